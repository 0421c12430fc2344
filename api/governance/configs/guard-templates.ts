// Guard templates (docs/spec.md part 4), each with an owner: a platform template (owner null, written
// with a platform admin key) is read by every workspace and written by platform admins alone; a
// workspace's template (written with its workspace key) is seen and written by that workspace
// alone. A caller sees the platform's templates and its own; another workspace's template is a
// 404 as if it did not exist, a platform template written with a workspace key a 403.
// `config` is validated with the toolkit's GuardTemplateSpec (the complete set of keys is in
// docs/guards.md) and stored with its defaults. Apps keep a snapshot of every template they
// reference (observability.ts), so replacing or deleting a template never changes an app until its
// custom_templates are set again.
import { randomUUID } from "node:crypto";
import type { EntityManager, FilterQuery } from "@mikro-orm/postgresql";
import type { GuardTemplateConfig } from "../../../toolkit/src/index.ts";
import { ForbiddenError, NotFoundError } from "../../errors.ts";
import { GuardTemplate } from "./entities.ts";
import type { ResolvedTemplate } from "./observability.ts";

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

export interface TemplateInput {
  name: string;
  description: string | null;
  guardType: string;
  config: GuardTemplateConfig;
}

/** Who acts on templates: a workspace id, or null for the platform (a platform admin key). */
export type TemplateOwner = string | null;

export interface TemplateView extends TemplateInput {
  id: string;
  /** The owning workspace; null for a platform template. */
  workspaceId: string | null;
  createdAt: Date;
  updatedAt: Date;
}

function view(t: GuardTemplate): TemplateView {
  return {
    id: t.id,
    workspaceId: t.workspaceId ?? null,
    name: t.name,
    description: t.description ?? null,
    guardType: t.guardType,
    config: t.config as GuardTemplateConfig,
    createdAt: t.createdAt,
    updatedAt: t.updatedAt,
  };
}

export class GuardTemplateService {
  readonly #now: () => Date;

  constructor(opts: { now?: () => Date } = {}) {
    this.#now = opts.now ?? (() => new Date());
  }

  /** The platform's templates and the owner's own (for the platform: its own alone), oldest first. */
  async list(em: EntityManager, owner: TemplateOwner): Promise<TemplateView[]> {
    return (await em.find(GuardTemplate, visibleTo(owner), { orderBy: { createdAt: "asc", id: "asc" } })).map(view);
  }

  async get(em: EntityManager, owner: TemplateOwner, id: string): Promise<TemplateView> {
    return view(await this.#load(em, owner, id));
  }

  async create(em: EntityManager, owner: TemplateOwner, input: TemplateInput): Promise<TemplateView> {
    const now = this.#now();
    const row = em.create(GuardTemplate, {
      id: randomUUID(),
      workspaceId: owner,
      ...input,
      config: input.config,
      createdAt: now,
      updatedAt: now,
    });
    await em.persist(row).flush();
    return view(row);
  }

  async replace(em: EntityManager, owner: TemplateOwner, id: string, input: TemplateInput): Promise<TemplateView> {
    const row = await this.#loadOwn(em, owner, id);
    em.assign(row, { ...input, config: input.config, updatedAt: this.#now() });
    await em.flush();
    return view(row);
  }

  async remove(em: EntityManager, owner: TemplateOwner, id: string): Promise<void> {
    const row = await this.#loadOwn(em, owner, id);
    await em.remove(row).flush();
  }

  /**
   * The templates with these ids that the workspace may use (the platform's and its own), as an
   * app's config keeps them. Other ids, another workspace's included, are left out.
   */
  async resolve(em: EntityManager, workspaceId: string, ids: readonly string[]): Promise<Map<string, ResolvedTemplate>> {
    const wanted = ids.filter((id) => UUID.test(id));
    if (wanted.length === 0) return new Map();
    const rows = await em.find(GuardTemplate, { $and: [{ id: { $in: wanted } }, visibleTo(workspaceId)] });
    return new Map(rows.map((t) => [t.id, { name: t.name, guardType: t.guardType, config: t.config as GuardTemplateConfig }]));
  }

  /** A template the owner may write: 404 when it cannot see it, 403 when it is a platform template and the owner a workspace. */
  async #loadOwn(em: EntityManager, owner: TemplateOwner, id: string): Promise<GuardTemplate> {
    const row = await this.#load(em, owner, id);
    if ((row.workspaceId ?? null) !== owner) {
      throw new ForbiddenError(
        "guard_template_read_only",
        `Guard template ${id} is a platform template: a workspace key reads it, only a platform admin key (pa_sk_) changes it.`,
      );
    }
    return row;
  }

  async #load(em: EntityManager, owner: TemplateOwner, id: string): Promise<GuardTemplate> {
    const row = UUID.test(id) ? await em.findOne(GuardTemplate, { $and: [{ id }, visibleTo(owner)] }) : null;
    if (!row) throw new NotFoundError("guard_template_not_found", `Guard template ${id} does not exist.`);
    return row;
  }
}

/** The templates an owner sees: the platform's, and a workspace's own. */
function visibleTo(owner: TemplateOwner): FilterQuery<GuardTemplate> {
  return owner === null ? { workspaceId: null } : { $or: [{ workspaceId: null }, { workspaceId: owner }] };
}
