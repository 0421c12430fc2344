// API keys: workspace keys (ws_sk_...) and platform admin keys (pa_sk_...). Only the SHA-256 digest
// and a 12-character display prefix are stored; the secret is returned once, at creation.
// Verification looks the digest up by its unique index and compares digests in constant time;
// revoked keys are refused; lastUsedAt is written at most once a minute per key.
import type { EntityManager } from "@mikro-orm/postgresql";
import { randomUUID } from "node:crypto";
import { ConflictError, NotFoundError } from "../errors.ts";
import type { Logger } from "../../kube/logger.ts";
import type { PlatformAdminPrincipal, Principal } from "../http/route.ts";
import { ApiKey, Workspace } from "../workspaces/entities.ts";
import { PlatformAdminKey } from "./entities.ts";
import {
  PLATFORM_ADMIN_KEY_PREFIX,
  WORKSPACE_KEY_PREFIX,
  digestsEqual,
  displayPrefix,
  hashToken,
  isTokenOfKind,
  mintToken,
} from "./tokens.ts";

/** lastUsedAt is only rewritten when it is older than this (no write per request). */
export const LAST_USED_RESOLUTION_MS = 60_000;

/** A key as shown to people: never the secret, never the digest. */
export interface KeyView {
  id: string;
  name: string;
  prefix: string;
  createdAt: Date;
  lastUsedAt: Date | null;
  revokedAt: Date | null;
}

export interface WorkspaceKeyView extends KeyView {
  workspaceId: string;
}

export interface CreatedKey<V extends KeyView = KeyView> {
  key: V;
  /** The whole key; shown once, never stored. */
  secret: string;
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

interface KeyRow {
  id: string;
  name: string;
  prefix: string;
  createdAt: Date;
  lastUsedAt?: Date | null;
  revokedAt?: Date | null;
}

function view(row: KeyRow): KeyView {
  return {
    id: row.id,
    name: row.name,
    prefix: row.prefix,
    createdAt: row.createdAt,
    lastUsedAt: row.lastUsedAt ?? null,
    revokedAt: row.revokedAt ?? null,
  };
}

function workspaceKeyView(row: ApiKey): WorkspaceKeyView {
  return { ...view(row), workspaceId: row.workspace.id };
}

export interface KeyServiceOptions {
  /** The clock; tests may move it. */
  now?: () => Date;
  log?: Logger;
}

export class ApiKeyService {
  readonly #now: () => Date;
  readonly #log: Logger | undefined;
  readonly #max: number | undefined;

  /** `maxPerWorkspace`: the most keys not revoked a workspace may hold (BERTH_MAX_KEYS_PER_WORKSPACE); none for the CLI. */
  constructor(opts: KeyServiceOptions & { maxPerWorkspace?: number } = {}) {
    this.#now = opts.now ?? (() => new Date());
    this.#log = opts.log;
    this.#max = opts.maxPerWorkspace;
  }

  async create(em: EntityManager, workspaceId: string, name: string): Promise<CreatedKey<WorkspaceKeyView>> {
    const ws = await em.findOne(Workspace, { id: workspaceId });
    if (!ws) throw new NotFoundError("workspace_not_found", `Workspace ${workspaceId} does not exist.`);
    if (this.#max !== undefined && (await em.count(ApiKey, { workspace: workspaceId, revokedAt: null })) >= this.#max) {
      throw new ConflictError(
        "key_limit_reached",
        `The workspace holds ${this.#max} keys, the most it may (BERTH_MAX_KEYS_PER_WORKSPACE): revoke one first. All of a workspace's keys share one rate-limit budget.`,
      );
    }
    const secret = mintToken(WORKSPACE_KEY_PREFIX);
    const row = em.create(ApiKey, {
      id: randomUUID(),
      workspace: ws,
      name,
      prefix: displayPrefix(secret),
      hash: hashToken(secret),
      createdAt: this.#now(),
      lastUsedAt: null,
      revokedAt: null,
    });
    await em.persist(row).flush();
    return { key: workspaceKeyView(row), secret };
  }

  /** Every key of the workspace, revoked ones included, newest first. */
  async list(em: EntityManager, workspaceId: string): Promise<WorkspaceKeyView[]> {
    const rows = await em.find(ApiKey, { workspace: workspaceId }, { orderBy: { createdAt: "desc", id: "asc" } });
    return rows.map(workspaceKeyView);
  }

  /** A key by id; within `workspaceId` when given (a key of another workspace is not found). */
  async get(em: EntityManager, keyId: string, workspaceId?: string): Promise<WorkspaceKeyView> {
    const row = UUID.test(keyId)
      ? await em.findOne(ApiKey, workspaceId === undefined ? { id: keyId } : { id: keyId, workspace: workspaceId })
      : null;
    if (!row) throw new NotFoundError("api_key_not_found", `API key ${keyId} does not exist.`);
    return workspaceKeyView(row);
  }

  /**
   * Revokes a key (idempotent: revoking a revoked key changes nothing). `currentKeyId` is the key
   * making the request: revoking it is refused (409), so that a workspace cannot lock itself out
   * by mistake; rotate by creating a new key, switching to it, then revoking the old one.
   */
  async revoke(em: EntityManager, keyId: string, opts: { workspaceId?: string; currentKeyId?: string } = {}): Promise<WorkspaceKeyView> {
    const row = UUID.test(keyId)
      ? await em.findOne(ApiKey, opts.workspaceId === undefined ? { id: keyId } : { id: keyId, workspace: opts.workspaceId })
      : null;
    if (!row) throw new NotFoundError("api_key_not_found", `API key ${keyId} does not exist.`);
    if (opts.currentKeyId !== undefined && row.id === opts.currentKeyId) {
      throw new ConflictError(
        "cannot_revoke_current_key",
        "A key cannot revoke itself: make the request with another key of the workspace.",
      );
    }
    if (!row.revokedAt) {
      row.revokedAt = this.#now();
      await em.flush();
    }
    return workspaceKeyView(row);
  }

  /** The principal of a current workspace key, or undefined (unknown, malformed or revoked). */
  async verify(em: EntityManager, token: string): Promise<Principal | undefined> {
    const row = await currentKey(
      token,
      WORKSPACE_KEY_PREFIX,
      (hash) => em.findOne(ApiKey, { hash }),
      (r) => touch(em, ApiKey, r, this.#now(), this.#log),
    );
    return row && { kind: "workspace", workspaceId: row.workspace.id, keyId: row.id };
  }
}

export class PlatformAdminKeyService {
  readonly #now: () => Date;
  readonly #log: Logger | undefined;

  constructor(opts: KeyServiceOptions = {}) {
    this.#now = opts.now ?? (() => new Date());
    this.#log = opts.log;
  }

  async create(em: EntityManager, name: string): Promise<CreatedKey> {
    const secret = mintToken(PLATFORM_ADMIN_KEY_PREFIX);
    const row = em.create(PlatformAdminKey, {
      id: randomUUID(),
      name,
      prefix: displayPrefix(secret),
      hash: hashToken(secret),
      createdAt: this.#now(),
      lastUsedAt: null,
      revokedAt: null,
    });
    await em.persist(row).flush();
    return { key: view(row), secret };
  }

  async list(em: EntityManager): Promise<KeyView[]> {
    const rows = await em.find(PlatformAdminKey, {}, { orderBy: { createdAt: "desc", id: "asc" } });
    return rows.map(view);
  }

  async revoke(em: EntityManager, keyId: string): Promise<KeyView> {
    const row = UUID.test(keyId) ? await em.findOne(PlatformAdminKey, { id: keyId }) : null;
    if (!row) throw new NotFoundError("admin_key_not_found", `Platform admin key ${keyId} does not exist.`);
    if (!row.revokedAt) {
      row.revokedAt = this.#now();
      await em.flush();
    }
    return view(row);
  }

  async verify(em: EntityManager, token: string): Promise<PlatformAdminPrincipal | undefined> {
    const row = await currentKey(
      token,
      PLATFORM_ADMIN_KEY_PREFIX,
      (hash) => em.findOne(PlatformAdminKey, { hash }),
      (r) => touch(em, PlatformAdminKey, r, this.#now(), this.#log),
    );
    return row && { kind: "platform-admin", keyId: row.id };
  }
}

/**
 * The current (not revoked) key row of a token of the given kind, looked up by the SHA-256 of the
 * token and compared in constant time; its last use is recorded. Undefined for anything else.
 */
export async function currentKey<R extends { hash: string; revokedAt?: Date | string | null }>(
  token: string,
  prefix: string,
  find: (digest: string) => Promise<R | null>,
  recordUse: (row: R) => Promise<void>,
): Promise<R | undefined> {
  if (!isTokenOfKind(token, prefix)) return undefined;
  const digest = hashToken(token);
  const row = await find(digest);
  if (!row || !digestsEqual(row.hash, digest) || row.revokedAt) return undefined;
  await recordUse(row);
  return row;
}

/**
 * Records that a key was used, at most once per LAST_USED_RESOLUTION_MS: nothing is written while
 * the stored value is fresh, and the conditional update keeps concurrent requests (or replicas)
 * from writing more than once per interval. A failure here never fails the request.
 */
async function touch(
  em: EntityManager,
  entity: typeof ApiKey | typeof PlatformAdminKey,
  row: { id: string; lastUsedAt?: Date | null },
  now: Date,
  log: Logger | undefined,
): Promise<void> {
  const cutoff = new Date(now.getTime() - LAST_USED_RESOLUTION_MS);
  if (row.lastUsedAt && row.lastUsedAt > cutoff) return;
  try {
    const where = { id: row.id, $or: [{ lastUsedAt: null }, { lastUsedAt: { $lte: cutoff } }] };
    await em.nativeUpdate(entity as typeof ApiKey, where, { lastUsedAt: now });
  } catch (err) {
    log?.warn({ err, keyId: row.id }, "could not record the key's last use");
  }
}
