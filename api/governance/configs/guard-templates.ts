// Global guard templates (SPEC.md part 4): anyone with a workspace key lists them; only platform
// admins create, replace and delete them. `config` is validated with the toolkit's
// GuardTemplateSpec (the complete set of keys is in docs/guards.md) and stored with its defaults.
// Apps keep a snapshot of every template they reference (observability.ts), so replacing or
// deleting a template never changes an app until its custom_templates are set again.
import { randomUUID } from "node:crypto";
import type { EntityManager } from "@mikro-orm/postgresql";
import type { GuardTemplateConfig } from "../../../toolkit/src/index.ts";
import { NotFoundError } from "../../errors.ts";
import { GuardTemplate } from "./entities.ts";
import type { ResolvedTemplate } from "./observability.ts";

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

export interface TemplateInput {
  name: string;
  description: string | null;
  guardType: string;
  config: GuardTemplateConfig;
}

export interface TemplateView extends TemplateInput {
  id: string;
  createdAt: Date;
  updatedAt: Date;
}

function view(t: GuardTemplate): TemplateView {
  return { id: t.id, name: t.name, description: t.description ?? null, guardType: t.guardType, config: t.config as GuardTemplateConfig, createdAt: t.createdAt, updatedAt: t.updatedAt };
}

export class GuardTemplateService {
  readonly #now: () => Date;

  constructor(opts: { now?: () => Date } = {}) {
    this.#now = opts.now ?? (() => new Date());
  }

  /** Every template, oldest first. */
  async list(em: EntityManager): Promise<TemplateView[]> {
    return (await em.find(GuardTemplate, {}, { orderBy: { createdAt: "asc", id: "asc" } })).map(view);
  }

  async get(em: EntityManager, id: string): Promise<TemplateView> {
    return view(await this.#load(em, id));
  }

  async create(em: EntityManager, input: TemplateInput): Promise<TemplateView> {
    const now = this.#now();
    const row = em.create(GuardTemplate, { id: randomUUID(), ...input, config: input.config, createdAt: now, updatedAt: now });
    await em.persist(row).flush();
    return view(row);
  }

  async replace(em: EntityManager, id: string, input: TemplateInput): Promise<TemplateView> {
    const row = await this.#load(em, id);
    em.assign(row, { ...input, config: input.config, updatedAt: this.#now() });
    await em.flush();
    return view(row);
  }

  async remove(em: EntityManager, id: string): Promise<void> {
    const row = await this.#load(em, id);
    await em.remove(row).flush();
  }

  /** The templates with these ids, as an app's config keeps them. Unknown ids are left out. */
  async resolve(em: EntityManager, ids: readonly string[]): Promise<Map<string, ResolvedTemplate>> {
    const wanted = ids.filter((id) => UUID.test(id));
    if (wanted.length === 0) return new Map();
    const rows = await em.find(GuardTemplate, { id: { $in: wanted } });
    return new Map(rows.map((t) => [t.id, { name: t.name, guardType: t.guardType, config: t.config as GuardTemplateConfig }]));
  }

  async #load(em: EntityManager, id: string): Promise<GuardTemplate> {
    const row = UUID.test(id) ? await em.findOne(GuardTemplate, { id }) : null;
    if (!row) throw new NotFoundError("guard_template_not_found", `Guard template ${id} does not exist.`);
    return row;
  }
}
