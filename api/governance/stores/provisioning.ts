// Provisioning of an app's private store, its scoped key and the operator contract.
//
// Every change runs in ONE PostgreSQL transaction on one connection: an advisory lock on the app
// (LOCK_CLASS.provision), the store's DDL (store-sql.ts, idempotent), the project row, the key
// revocations and the new key. PostgreSQL DDL (CREATE ROLE included) is transactional, so a crash
// half-way rolls everything back and a retry starts from a clean slate; a retry after success
// finds a complete store and only mints a key. The public endpoints then patch the App's
// annotations; if that fails the call answers 503 and the same call, retried, finishes the job.
//
// This module is the one access path of governance_projects, raw SQL on the transaction's
// connection (the rows change together with DDL that no EntityManager runs); there is no MikroORM
// entity for the table. The keys and the config of the app change in the same transaction through
// their own modules (keys/app-keys.ts, configs/app-configs.ts); key verification reads the
// project in its join (keys/app-keys.ts), read-only.
import { randomUUID } from "node:crypto";
import { ConflictError, NotFoundError, UnavailableError } from "../../errors.ts";
import type { Logger } from "../../../kube/logger.ts";
import { ANNOTATIONS, governanceGeneration } from "../../../crds/app.ts";
import {
  APP_DELETED_CODE,
  GOVERNANCE_DISABLED_CODE,
  type DeprovisionRequest,
  type Provisioned,
  type ProvisionRequest,
} from "../../../crds/governance.ts";
import { type AppAnnotator, type AppLookup, type AppRef } from "./apps.ts";
import type { Client, GovernanceDb } from "./db.ts";
import { isoSql } from "./db.ts";
import { ident, LOCK_CLASS, storeNames, type StoreNames } from "./names.ts";
import { dropStoreSql, STORE_TEMPLATE_VERSION, storeDdl } from "./store-sql.ts";
import { removeAppConfig, removeStaleAppConfig } from "../configs/app-configs.ts";
import { mintAppKey, revokeAppKeys } from "../keys/app-keys.ts";

/** active: the store exists; disabled: de-provisioned through the public DELETE, no store */
export type ProjectStatus = "active" | "disabled";

export interface PublicProvisioned {
  appId: string;
  harborDatabase: string;
  connectionString: string;
}

export interface ProjectRow {
  workspaceId: string;
  appId: string;
  appUid: string | null;
  schema: string;
  role: string;
  status: ProjectStatus;
  generation: number;
  provisionedAt: string;
}

/** govdb://<key>@<host>/<database> (docs/spec.md part 1, GOVDB_CONNECTION). */
export function connectionString(key: string, host: string, database: string): string {
  return `govdb://${key}@${host}/${database}`;
}

export const MASKED_KEY = "****";

export interface ProvisioningDeps {
  db: GovernanceDb;
  apps: AppLookup;
  annotate: AppAnnotator;
  /** BERTH_GOVERNANCE_HOST */
  host: string;
  log: Logger;
  now?: () => Date;
}

const PROJECT_COLUMNS = `workspace_id, app_id, app_uid, schema_name, role_name, status, generation, ${isoSql("provisioned_at")} as provisioned_at`;

function projectOf(r: Record<string, unknown>): ProjectRow {
  return {
    workspaceId: r.workspace_id as string,
    appId: r.app_id as string,
    appUid: (r.app_uid as string | null) ?? null,
    schema: r.schema_name as string,
    role: r.role_name as string,
    status: r.status as ProjectStatus,
    generation: Number(r.generation),
    provisionedAt: r.provisioned_at as string,
  };
}

/** Why an app's audit chain began again (governance_audit_restarts.reason). */
export type RestartReason = "reprovisioned" | "disabled" | "replaced_by_new_app" | "app_deleted";

/** A restart of an app's audit chain, as verification reports it. */
export interface AuditRestart {
  at: string;
  reason: RestartReason;
  actor: string;
  previousEntries: number;
  previousHeadHash: string | null;
}

/**
 * Records, in the caller's transaction and before the store is dropped, how long its audit chain
 * was and where it ended (the store's audit_head). Nothing is recorded when there is no store, or
 * a store whose chain is empty.
 */
async function recordRestart(
  c: Client,
  workspaceId: string,
  appId: string,
  names: StoreNames,
  reason: RestartReason,
  actor: string,
): Promise<void> {
  const {
    rows: [table],
  } = await c.query<{ t: string | null }>(`select to_regclass($1)::text as t`, [`${ident(names.schema)}.audit_head`]);
  if (!table?.t) return;
  const {
    rows: [head],
  } = await c.query<{ sequence: string; hash: string }>(`select sequence, hash from ${ident(names.schema)}.audit_head`);
  if (!head || Number(head.sequence) === 0) return;
  await c.query(
    `insert into governance_audit_restarts (id, workspace_id, app_id, reason, actor, previous_entries, previous_head_hash) values ($1, $2, $3, $4, $5, $6, $7)`,
    [randomUUID(), workspaceId, appId, reason, actor.slice(0, 200), Number(head.sequence), head.hash],
  );
}

export class ProvisioningService {
  readonly #d: ProvisioningDeps;
  readonly #now: () => Date;

  constructor(deps: ProvisioningDeps) {
    this.#d = deps;
    this.#now = deps.now ?? (() => new Date());
  }

  /** Every restart of an app's audit chain, oldest first. */
  async restarts(workspaceId: string, appId: string): Promise<AuditRestart[]> {
    const pool = await this.#d.db.pool();
    const { rows } = await pool.query<{
      at: string;
      reason: RestartReason;
      actor: string;
      previous_entries: string;
      previous_head_hash: string | null;
    }>(
      `select ${isoSql("restarted_at")} as at, reason, actor, previous_entries, previous_head_hash from governance_audit_restarts
        where workspace_id = $1 and app_id = $2 order by restarted_at, id`,
      [workspaceId, appId],
    );
    return rows.map((r) => ({
      at: r.at,
      reason: r.reason,
      actor: r.actor,
      previousEntries: Number(r.previous_entries),
      previousHeadHash: r.previous_head_hash,
    }));
  }

  /** The project of an app (any status); undefined when never provisioned. */
  async project(workspaceId: string, appId: string): Promise<ProjectRow | undefined> {
    const pool = await this.#d.db.pool();
    const { rows } = await pool.query(`select ${PROJECT_COLUMNS} from governance_projects where workspace_id = $1 and app_id = $2`, [
      workspaceId,
      appId,
    ]);
    return rows[0] ? projectOf(rows[0] as Record<string, unknown>) : undefined;
  }

  // ---- the operator's contract (auth "operator") ------------------------------------------------

  /**
   * POST /internal/governance/provision: ensures the store, revokes the app's keys, mints a new
   * one and returns it unmasked (the operator writes it into the `<app>-governance` Secret).
   * A different appUid than the stored one is a new App of the same name: it gets a fresh store.
   */
  async provisionForOperator(req: ProvisionRequest): Promise<Provisioned> {
    const workspaceId = await this.#workspaceOf(req.namespace);
    if (workspaceId === undefined) throw new NotFoundError("workspace_not_found", `Namespace ${req.namespace} is not a Berth workspace.`);
    const app = await this.#d.apps(workspaceId, req.appName);
    const { project, key } = await this.#d.db.tx(async (c) => {
      await lock(c, workspaceId, req.appName);
      // a call for an App whose finalizer already ran (sent before, run after: its operator was
      // killed before the answer) must neither make its store again nor replace a newer App's
      const { rowCount: deleted } = await c.query(
        `select 1 from governance_deleted_apps where workspace_id = $1 and app_id = $2 and app_uid = $3`,
        [workspaceId, req.appName, req.appUid],
      );
      if (deleted)
        throw new ConflictError(
          APP_DELETED_CODE,
          `App ${req.appName} (uid ${req.appUid}) was deleted and its governance store dropped; it is not provisioned again.`,
        );
      // a config an earlier App of this id left (deleted before it had a store) is not this App's
      await removeStaleAppConfig(c, workspaceId, req.appName, {
        uid: req.appUid,
        createdAt: app?.uid === req.appUid ? app.createdAt : undefined,
      });
      const row = await this.#lockedProject(c, workspaceId, req.appName);
      const sameApp = !row || row.appUid === null || row.appUid === req.appUid;
      if (row && row.status === "disabled" && sameApp) {
        throw new ConflictError(
          GOVERNANCE_DISABLED_CODE,
          `Governance was switched off for ${req.appName} (DELETE .../governance/apps/${req.appName}/provision); POST .../provision turns it back on.`,
        );
      }
      const names = row ? { schema: row.schema, role: row.role } : storeNames(workspaceId, req.appName);
      if (row && !sameApp) {
        this.#d.log.info({ workspaceId, appId: req.appName }, "a new App of the same name: replacing the old store");
        await recordRestart(c, workspaceId, req.appName, names, "replaced_by_new_app", "operator");
        await runAll(c, dropStoreSql(names));
      }
      await runAll(c, storeDdl(names, await this.#d.db.serverVersion(c)));
      const generation = Math.max(row?.generation ?? 1, req.generation);
      const project = await this.#upsertProject(c, {
        workspaceId,
        appId: req.appName,
        appUid: req.appUid,
        names,
        generation,
        fresh: !row || !sameApp,
      });
      const key = await this.#rotateKey(c, workspaceId, req.appName, generation);
      return { project, key };
    });
    this.#d.log.info({ workspaceId, appId: req.appName, generation: project.generation }, "governance provisioned for the operator");
    return {
      project: req.appName,
      workspaceId,
      database: project.schema,
      generation: project.generation,
      connectionString: connectionString(key, this.#d.host, project.schema),
    };
  }

  /**
   * DELETE /internal/governance/provision (the App's finalizer): drops the store, the role, the
   * keys and the config, and records the uid as deleted (a later provisioning call for it is
   * refused). Idempotent. A store made for another App of the same name (another uid) is left alone.
   */
  async deprovisionForOperator(req: DeprovisionRequest): Promise<void> {
    const workspaceId = await this.#workspaceOf(req.namespace);
    if (workspaceId === undefined) return;
    await this.#d.db.tx(async (c) => {
      await lock(c, workspaceId, req.appName);
      // this uid is gone for good: a provisioning call for it that runs later is refused (above)
      await c.query(`insert into governance_deleted_apps (workspace_id, app_id, app_uid) values ($1, $2, $3) on conflict do nothing`, [
        workspaceId,
        req.appName,
        req.appUid,
      ]);
      await c.query(`delete from governance_deleted_apps where deleted_at < now() - interval '1 day'`);
      const row = await this.#lockedProject(c, workspaceId, req.appName);
      if (row && row.appUid !== null && row.appUid !== req.appUid) {
        this.#d.log.info({ workspaceId, appId: req.appName }, "de-provisioning skipped: the store belongs to another App of the same name");
        return;
      }
      const names = row ? { schema: row.schema, role: row.role } : storeNames(workspaceId, req.appName);
      await recordRestart(c, workspaceId, req.appName, names, "app_deleted", "operator");
      await runAll(c, dropStoreSql(names));
      await c.query(`delete from governance_projects where workspace_id = $1 and app_id = $2`, [workspaceId, req.appName]); // keys cascade
      await removeAppConfig(c, workspaceId, req.appName);
    });
    this.#d.log.info({ workspaceId, appId: req.appName }, "governance de-provisioned for the operator");
  }

  // ---- the public endpoints (auth "workspace") -------------------------------------------------

  /**
   * POST .../provision: a fresh store (the old one, with all its traces, evals, guard blocks and
   * audit trail, is dropped), the app's keys revoked, the generation incremented and the App
   * annotated so that the operator mints a key and rewrites the Secret.
   */
  async reprovision(workspaceId: string, appId: string, actor: string): Promise<PublicProvisioned> {
    const app = await this.#requireApp(workspaceId, appId);
    const project = await this.#d.db.tx(async (c) => {
      await lock(c, workspaceId, appId);
      const row = await this.#lockedProject(c, workspaceId, appId);
      const names = row ? { schema: row.schema, role: row.role } : storeNames(workspaceId, appId);
      await recordRestart(c, workspaceId, appId, names, "reprovisioned", actor);
      await runAll(c, [...dropStoreSql(names), ...storeDdl(names, await this.#d.db.serverVersion(c))]);
      const generation = Math.max(row?.generation ?? 1, governanceGeneration(app.annotations)) + 1;
      const project = await this.#upsertProject(c, {
        workspaceId,
        appId,
        appUid: app.uid ?? row?.appUid ?? null,
        names,
        generation,
        fresh: true,
      });
      await revokeAppKeys(c, workspaceId, appId, this.#now());
      return project;
    });
    await this.#annotate(app, { [ANNOTATIONS.governanceGeneration]: String(project.generation), [ANNOTATIONS.governanceDisabled]: null });
    this.#d.log.info({ workspaceId, appId, generation: project.generation }, "governance store re-created");
    return { appId, harborDatabase: project.schema, connectionString: connectionString(MASKED_KEY, this.#d.host, project.schema) };
  }

  /** DELETE .../provision: drops the store, revokes the keys, marks the project disabled and tells the operator. */
  async disable(workspaceId: string, appId: string, actor: string): Promise<void> {
    const app = await this.#requireApp(workspaceId, appId);
    await this.#d.db.tx(async (c) => {
      await lock(c, workspaceId, appId);
      const row = await this.#lockedProject(c, workspaceId, appId);
      const names = row ? { schema: row.schema, role: row.role } : storeNames(workspaceId, appId);
      await recordRestart(c, workspaceId, appId, names, "disabled", actor);
      await runAll(c, dropStoreSql(names));
      const now = this.#now();
      if (row) {
        await c.query(`update governance_projects set status = 'disabled', disabled_at = $3 where workspace_id = $1 and app_id = $2`, [
          workspaceId,
          appId,
          now,
        ]);
        await revokeAppKeys(c, workspaceId, appId, now);
      } else {
        await c.query(
          `insert into governance_projects (id, workspace_id, app_id, app_uid, schema_name, role_name, status, generation, created_at, provisioned_at, disabled_at)
           values ($1, $2, $3, $4, $5, $6, 'disabled', $7, $8, $8, $8)`,
          [randomUUID(), workspaceId, appId, app.uid ?? null, names.schema, names.role, governanceGeneration(app.annotations), now],
        );
      }
    });
    await this.#annotate(app, { [ANNOTATIONS.governanceDisabled]: "true" });
    this.#d.log.info({ workspaceId, appId }, "governance switched off");
  }

  // ---- upgrades -----------------------------------------------------------------------------------

  /**
   * Completes every active store made by an older template (store_version below
   * STORE_TEMPLATE_VERSION) by running the current template on it: each statement is idempotent,
   * and a new part fills itself from the data already stored (the rollups' backfill). One store per
   * transaction, under the app's provisioning lock, the version checked again under it, so API
   * replicas starting together do each store once. Returns the stores upgraded; a store that fails
   * is logged and left for the next start.
   */
  async upgradeStores(): Promise<number> {
    const pool = await this.#d.db.pool();
    const { rows } = await pool.query<{ workspace_id: string; app_id: string }>(
      `select workspace_id, app_id from governance_projects where status = 'active' and store_version < $1 order by workspace_id, app_id`,
      [STORE_TEMPLATE_VERSION],
    );
    let upgraded = 0;
    for (const r of rows) {
      try {
        const done = await this.#d.db.tx(async (c) => {
          await lock(c, r.workspace_id, r.app_id);
          const { rows: locked } = await c.query<{ schema_name: string; role_name: string }>(
            `select schema_name, role_name from governance_projects
              where workspace_id = $1 and app_id = $2 and status = 'active' and store_version < $3 for update`,
            [r.workspace_id, r.app_id, STORE_TEMPLATE_VERSION],
          );
          if (!locked[0]) return false;
          await runAll(c, storeDdl({ schema: locked[0].schema_name, role: locked[0].role_name }, await this.#d.db.serverVersion(c)));
          await c.query(`update governance_projects set store_version = $3 where workspace_id = $1 and app_id = $2`, [
            r.workspace_id,
            r.app_id,
            STORE_TEMPLATE_VERSION,
          ]);
          return true;
        });
        if (done) {
          upgraded++;
          this.#d.log.info(
            { workspaceId: r.workspace_id, appId: r.app_id, storeVersion: STORE_TEMPLATE_VERSION },
            "governance store upgraded",
          );
        }
      } catch (err) {
        this.#d.log.error(
          { err, workspaceId: r.workspace_id, appId: r.app_id },
          "could not upgrade a governance store; the next start retries",
        );
      }
    }
    return upgraded;
  }

  // ---- helpers -----------------------------------------------------------------------------------

  async #requireApp(workspaceId: string, appId: string): Promise<AppRef> {
    const app = await this.#d.apps(workspaceId, appId);
    if (!app) throw new NotFoundError("app_not_found", `No service ${appId} in this workspace`);
    return app;
  }

  async #annotate(app: AppRef, annotations: Record<string, string | null>): Promise<void> {
    try {
      await this.#d.annotate(app, annotations);
    } catch (err) {
      if (err instanceof NotFoundError) throw err;
      this.#d.log.error({ err, appId: app.name }, "could not annotate the App for the operator");
      throw new UnavailableError(
        "app_update_failed",
        `The store was changed but the App ${app.name} could not be annotated for the operator; retry the same call to finish.`,
        { cause: err },
      );
    }
  }

  async #workspaceOf(namespace: string): Promise<string | undefined> {
    const pool = await this.#d.db.pool();
    const { rows } = await pool.query<{ id: string }>(`select id from workspaces where namespace = $1`, [namespace]);
    return rows[0]?.id;
  }

  async #lockedProject(c: Client, workspaceId: string, appId: string): Promise<ProjectRow | undefined> {
    const { rows } = await c.query(
      `select ${PROJECT_COLUMNS} from governance_projects where workspace_id = $1 and app_id = $2 for update`,
      [workspaceId, appId],
    );
    return rows[0] ? projectOf(rows[0] as Record<string, unknown>) : undefined;
  }

  async #upsertProject(
    c: Client,
    p: { workspaceId: string; appId: string; appUid: string | null; names: StoreNames; generation: number; fresh: boolean },
  ): Promise<ProjectRow> {
    const now = this.#now();
    const { rows } = await c.query(
      `insert into governance_projects (id, workspace_id, app_id, app_uid, schema_name, role_name, status, generation, created_at, provisioned_at, store_version)
       values ($1, $2, $3, $4, $5, $6, 'active', $7, $8, $8, $10)
       on conflict (workspace_id, app_id) do update
         set app_uid = excluded.app_uid, status = 'active', generation = excluded.generation, disabled_at = null, store_version = excluded.store_version,
             provisioned_at = case when $9 then excluded.provisioned_at else governance_projects.provisioned_at end
       returning ${PROJECT_COLUMNS}`,
      [randomUUID(), p.workspaceId, p.appId, p.appUid, p.names.schema, p.names.role, p.generation, now, p.fresh, STORE_TEMPLATE_VERSION],
    );
    return projectOf(rows[0] as Record<string, unknown>);
  }

  async #rotateKey(c: Client, workspaceId: string, appId: string, generation: number): Promise<string> {
    const now = this.#now();
    await revokeAppKeys(c, workspaceId, appId, now);
    return mintAppKey(c, workspaceId, appId, `generation ${generation}`, now);
  }
}

async function lock(c: Client, workspaceId: string, appId: string): Promise<void> {
  await c.query(`select pg_advisory_xact_lock($1, hashtext($2))`, [LOCK_CLASS.provision, `${workspaceId}/${appId}`]);
}

/** The statements of a template in one round trip (simple protocol: no parameters in DDL). */
async function runAll(c: Client, statements: string[]): Promise<void> {
  await c.query(statements.join(";\n"));
}
