// Workspaces: a row in PostgreSQL and a namespace `berth-<id>` labelled berth.dev/workspace=<id>.
// Creation writes the row first, then ensures the namespace; both steps are idempotent, so a
// create retried with the same id after a crash or a Kubernetes outage finishes the job.
import { randomBytes } from "node:crypto";
import type { MikroORM, EntityManager } from "@mikro-orm/postgresql";
import { UniqueConstraintViolationException } from "@mikro-orm/core";
import { WORKSPACE_LABEL } from "../../crds/schemas.ts";
import { BadRequestError, ConflictError, DomainError, NotFoundError, UnavailableError } from "../errors.ts";
import type { Logger } from "../../kube/logger.ts";
import { Workspace } from "./entities.ts";

/** Creates (or finishes) a namespace with these labels. The real one is in ./namespaces.ts. */
export interface NamespaceEnsurer {
  ensure(name: string, labels: Record<string, string>): Promise<void>;
}

/** "ws" + 10 characters of lowercase RFC 4648 base32: a DNS label, 50 random bits. */
export const WORKSPACE_ID_PATTERN = /^ws[a-z2-7]{10}$/;
const BASE32 = "abcdefghijklmnopqrstuvwxyz234567";

export function newWorkspaceId(): string {
  // 256 is a multiple of 32, so `byte & 31` is unbiased.
  return "ws" + [...randomBytes(10)].map((b) => BASE32[b & 31]).join("");
}

export function namespaceFor(workspaceId: string): string {
  return `berth-${workspaceId}`;
}

/**
 * A workspace namespace's labels: the workspace, Berth's, and the "restricted" Pod Security
 * Standard enforced by the API server's admission: whatever runs there (Apps' pods, build and
 * release Jobs, and anything a workspace's own kubectl creates) runs as non-root, without
 * privilege escalation, capabilities or host namespaces, under the RuntimeDefault seccomp profile.
 */
export function workspaceLabels(workspaceId: string): Record<string, string> {
  return {
    [WORKSPACE_LABEL]: workspaceId,
    "app.kubernetes.io/managed-by": "berth",
    "pod-security.kubernetes.io/enforce": "restricted",
    "pod-security.kubernetes.io/warn": "restricted",
    "pod-security.kubernetes.io/audit": "restricted",
  };
}

export interface WorkspaceView {
  id: string;
  name: string;
  namespace: string;
  createdAt: Date;
}

function view(w: Workspace): WorkspaceView {
  return { id: w.id, name: w.name, namespace: w.namespace, createdAt: w.createdAt };
}

export interface WorkspaceServiceDeps {
  orm: MikroORM;
  namespaces: NamespaceEnsurer;
  log: Logger;
}

export class WorkspaceService {
  readonly #orm: MikroORM;
  readonly #namespaces: NamespaceEnsurer;
  readonly #log: Logger;
  /** workspace id -> namespace; workspaces are immutable once created, so entries never go stale. */
  readonly #namespaceCache = new Map<string, string>();

  constructor(deps: WorkspaceServiceDeps) {
    this.#orm = deps.orm;
    this.#namespaces = deps.namespaces;
    this.#log = deps.log;
  }

  /**
   * Creates a workspace and its namespace. With `id`, the call is idempotent: when that workspace
   * exists with the same name, its namespace is ensured again and `created` is false (a retry);
   * with another name it is a 409 conflict.
   */
  async create(
    em: EntityManager,
    input: { name: string; id?: string | undefined },
  ): Promise<{ workspace: WorkspaceView; created: boolean }> {
    const id = input.id ?? newWorkspaceId();
    if (!WORKSPACE_ID_PATTERN.test(id))
      throw new BadRequestError("invalid_workspace_id", `Workspace ids look like ws + 10 characters of [a-z2-7]; got ${id}.`);
    let row = await em.findOne(Workspace, { id });
    let created = false;
    if (!row) {
      try {
        row = em.create(Workspace, { id, name: input.name, namespace: namespaceFor(id), createdAt: new Date() });
        await em.persist(row).flush();
        created = true;
      } catch (err) {
        if (!(err instanceof UniqueConstraintViolationException)) throw err;
        em.clear();
        row = await em.findOneOrFail(Workspace, { id }); // a concurrent create of the same id won
      }
    }
    if (row.name !== input.name) throw new ConflictError("workspace_exists", `Workspace ${id} already exists with another name.`);
    await this.#ensureNamespace(row);
    this.#namespaceCache.set(row.id, row.namespace);
    if (created) this.#log.info({ workspaceId: row.id, namespace: row.namespace }, "workspace created");
    return { workspace: view(row), created };
  }

  async get(em: EntityManager, id: string): Promise<WorkspaceView> {
    const row = WORKSPACE_ID_PATTERN.test(id) ? await em.findOne(Workspace, { id }) : null;
    if (!row) throw new NotFoundError("workspace_not_found", `Workspace ${id} does not exist.`);
    return view(row);
  }

  async list(em: EntityManager): Promise<WorkspaceView[]> {
    const rows = await em.find(Workspace, {}, { orderBy: { createdAt: "desc", id: "asc" } });
    return rows.map(view);
  }

  /** Ensures the namespace of an existing workspace (finishes an interrupted create). */
  async ensureNamespace(em: EntityManager, id: string): Promise<WorkspaceView> {
    const row = WORKSPACE_ID_PATTERN.test(id) ? await em.findOne(Workspace, { id }) : null;
    if (!row) throw new NotFoundError("workspace_not_found", `Workspace ${id} does not exist.`);
    await this.#ensureNamespace(row);
    return view(row);
  }

  /**
   * Ensures every workspace's namespace again, one at a time, so that what this version of Berth
   * gives a namespace (labels, quota, limits, NetworkPolicies) reaches the workspaces created before
   * it. Run by each API process once it serves; a failure is logged and the next one goes on.
   */
  async ensureAll(signal?: AbortSignal): Promise<{ ensured: number; failed: number }> {
    const rows = await this.#orm.em.fork().find(Workspace, {}, { orderBy: { id: "asc" } });
    let ensured = 0;
    let failed = 0;
    for (const row of rows) {
      if (signal?.aborted) break;
      try {
        await this.#namespaces.ensure(row.namespace, workspaceLabels(row.id));
        ensured++;
      } catch (err) {
        failed++;
        this.#log.error({ err, workspaceId: row.id, namespace: row.namespace }, "could not ensure the workspace's namespace again");
      }
    }
    this.#log.info({ ensured, failed }, "workspace namespaces ensured");
    return { ensured, failed };
  }

  /** The namespace of a workspace, from memory after the first lookup. 404 when there is no such workspace. */
  async namespaceOf(workspaceId: string): Promise<string> {
    const cached = this.#namespaceCache.get(workspaceId);
    if (cached !== undefined) return cached;
    const ws = await this.get(this.#orm.em.fork(), workspaceId);
    this.#namespaceCache.set(ws.id, ws.namespace);
    return ws.namespace;
  }

  /** Whether a namespace is one of this installation's workspaces (remembered once it is). */
  async ownsNamespace(namespace: string): Promise<boolean> {
    for (const ns of this.#namespaceCache.values()) if (ns === namespace) return true;
    const row = await this.#orm.em.fork().findOne(Workspace, { namespace });
    if (row) this.#namespaceCache.set(row.id, row.namespace);
    return !!row;
  }

  async #ensureNamespace(row: Workspace): Promise<void> {
    try {
      await this.#namespaces.ensure(row.namespace, workspaceLabels(row.id));
    } catch (err) {
      if (err instanceof DomainError) throw err;
      this.#log.error({ err, workspaceId: row.id, namespace: row.namespace }, "could not ensure the workspace's namespace");
      throw new UnavailableError(
        "namespace_unavailable",
        `Workspace ${row.id} is recorded but its namespace ${row.namespace} could not be created; retry with the same id to finish.`,
        { details: { workspaceId: row.id, namespace: row.namespace }, cause: err },
      );
    }
  }
}
