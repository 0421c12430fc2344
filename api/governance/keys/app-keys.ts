// App keys (gov_sk_ + 43 base64url characters): the credential of an app's GOVDB_CONNECTION.
// Minted when provisioning runs (the operator's internal call), stored only as a SHA-256 digest
// with a display prefix, revoked whenever a new one is minted, and verified here for "app-key"
// routes.
//
// This module is the one access path of governance_app_keys, raw SQL on GovernanceDb
// (stores/db.ts); there is no MikroORM entity for the table. Minting and revoking run inside the
// provisioning transaction (mintAppKey, revokeAppKeys); a project's removal deletes its keys by
// the foreign key's cascade. Verification is on the hot path of ingestion (every request), so it
// is one prepared statement on the governance pool: the key by its digest, with its app's store
// (governance_projects) and config version (governance_app_configs) in the same row, what
// ingestion needs next; those two tables are only read here.
import type { AppKeyVerifier, AppPrincipal } from "../../http/route.ts";
import type { Logger } from "../../../kube/logger.ts";
import { randomUUID } from "node:crypto";
import { APP_KEY_PREFIX, displayPrefix, hashToken, mintToken } from "../../auth/tokens.ts";
import { currentKey, LAST_USED_RESOLUTION_MS } from "../../auth/keys.ts";
import type { Client, GovernanceDb } from "../stores/db.ts";

const VERIFY = {
  name: "berth_app_key_verify",
  text: `select k.id, k.workspace_id, k.app_id, k.hash, k.revoked_at,
                k.last_used_at is null or k.last_used_at <= $2 as stale,
                p.schema_name, p.role_name, p.status, c.version
           from governance_app_keys k
           left join governance_projects p on p.workspace_id = k.workspace_id and p.app_id = k.app_id
           left join governance_app_configs c on c.workspace_id = k.workspace_id and c.app_id = k.app_id
          where k.hash = $1`,
};
const TOUCH = {
  name: "berth_app_key_touch",
  text: `update governance_app_keys set last_used_at = $2 where id = $1 and (last_used_at is null or last_used_at <= $3)`,
};

interface Row {
  id: string;
  workspace_id: string;
  app_id: string;
  hash: string;
  revoked_at: Date | string | null;
  stale: boolean;
  schema_name: string | null;
  role_name: string | null;
  status: string | null;
  version: string | null;
}

export class AppKeyService {
  readonly #db: GovernanceDb;
  readonly #now: () => Date;
  readonly #log: Logger;

  constructor(opts: { db: GovernanceDb; log: Logger; now?: () => Date }) {
    this.#db = opts.db;
    this.#log = opts.log;
    this.#now = opts.now ?? (() => new Date());
  }

  /** The app a current key belongs to, with its store as it is now; undefined for a malformed, unknown or revoked key. */
  async verify(token: string): Promise<AppPrincipal | undefined> {
    const now = this.#now();
    const cutoff = new Date(now.getTime() - LAST_USED_RESOLUTION_MS);
    const pool = await this.#db.pool();
    const row = await currentKey(
      token,
      APP_KEY_PREFIX,
      async (digest) => {
        const found = (await pool.query<Row>({ ...VERIFY, values: [digest, cutoff] })).rows[0];
        return found ? { ...found, revokedAt: found.revoked_at } : null;
      },
      async (r) => {
        if (!r.stale) return;
        try {
          await pool.query({ ...TOUCH, values: [r.id, now, cutoff] });
        } catch (err) {
          this.#log.warn({ err, keyId: r.id }, "could not record the app key's last use");
        }
      },
    );
    if (!row) return undefined;
    const store =
      row.schema_name === null || row.role_name === null || row.status === null
        ? null
        : {
            schema: row.schema_name,
            role: row.role_name,
            active: row.status === "active",
            configVersion: row.version === null ? 0 : Number(row.version),
          };
    return { kind: "app", workspaceId: row.workspace_id, appId: row.app_id, keyId: row.id, store };
  }

  /** The AppKeyVerifier given to buildServer. */
  verifier(): AppKeyVerifier {
    return (token) => this.verify(token);
  }
}

/** Mints a key for the app inside the caller's transaction; returns the secret, which is stored only as its digest. */
export async function mintAppKey(c: Client, workspaceId: string, appId: string, name: string, now: Date): Promise<string> {
  const secret = mintToken(APP_KEY_PREFIX);
  await c.query(
    `insert into governance_app_keys (id, workspace_id, app_id, name, prefix, hash, created_at) values ($1, $2, $3, $4, $5, $6, $7)`,
    [randomUUID(), workspaceId, appId, name, displayPrefix(secret), hashToken(secret), now],
  );
  return secret;
}

/** Revokes the app's current keys inside the caller's transaction. */
export async function revokeAppKeys(c: Client, workspaceId: string, appId: string, now: Date): Promise<void> {
  await c.query(`update governance_app_keys set revoked_at = $3 where workspace_id = $1 and app_id = $2 and revoked_at is null`, [
    workspaceId,
    appId,
    now,
  ]);
}
