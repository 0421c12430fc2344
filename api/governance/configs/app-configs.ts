// Observability configs (GET/PUT .../observability-config), one row per app in
// governance_app_configs. Every write takes a fresh version from governance_config_version_seq
// (never reused, not even after a config is deleted and created again): ingestion caches what it
// builds from a config (the engine input, the compiled engine) by that version, so it reads and
// compiles a config only after a change.
//
// This module is the table's one access path, raw SQL on GovernanceDb (stores/db.ts): the
// service below, the config of one version for ingestion (atVersion) and the removal with an App
// (removeAppConfig, inside the provisioning transaction). There is no MikroORM entity for it:
// key verification (keys/app-keys.ts) reads `version` in its per-request join, which no
// EntityManager could serve as one statement; that join is the only other statement that names
// the table, read-only.
import { randomUUID } from "node:crypto";
import type { EntityManager } from "@mikro-orm/postgresql";
import { GuardEngine } from "../../../toolkit/src/index.ts";
import { ValidationError } from "../../errors.ts";
import { pgCode, type Client, type GovernanceDb } from "../stores/db.ts";
import {
  defaultObservabilityConfig,
  engineInput,
  mergeObservability,
  readStoredConfig,
  resolveCustomTemplates,
  type ObservabilityConfig,
  type ObservabilityConfigPatch,
  type TemplateSnapshot,
} from "./observability.ts";
import type { GuardTemplateService } from "./guard-templates.ts";

export interface AppConfigState {
  config: ObservabilityConfig;
  templates: TemplateSnapshot;
  /** 0 for an app that never set a config (the defaults) */
  version: number;
}

/** A row as stored: `config` has every default applied, `templates` is the snapshot it references. */
interface Row {
  config: Record<string, unknown>;
  templates: Record<string, unknown>;
  /** bigint, as text */
  version: string;
}

const BY_APP = "where workspace_id = $1 and app_id = $2";
/** unique_violation: two first writes of one app raced */
const UNIQUE_VIOLATION = "23505";

export class ObservabilityConfigService {
  readonly #db: GovernanceDb;
  readonly #templates: GuardTemplateService;
  readonly #now: () => Date;

  constructor(deps: { db: GovernanceDb; templates: GuardTemplateService; now?: () => Date }) {
    this.#db = deps.db;
    this.#templates = deps.templates;
    this.#now = deps.now ?? (() => new Date());
  }

  /**
   * The app's config, or the defaults. `app`: the App as it is now; a config written for another
   * App of the same id (permanently deleted before its store existed, which would have removed
   * it) is not this App's: one recorded with another uid, or, written before uids were recorded,
   * last written before this App was created.
   */
  async get(workspaceId: string, appId: string, app?: AppIdentity): Promise<AppConfigState> {
    const pool = await this.#db.pool();
    const { rows } = await pool.query<Row>(`select config, templates, version from governance_app_configs ${BY_APP} and not ${STALE}`, [
      workspaceId,
      appId,
      app?.uid ?? null,
      app?.createdAt ?? null,
    ]);
    return rows[0] ? stateOf(rows[0]) : { config: defaultObservabilityConfig(), templates: {}, version: 0 };
  }

  /**
   * The config and templates of one version, as stored (what ingestion compiles); undefined when
   * the app's config is at another version by now.
   */
  async atVersion(
    workspaceId: string,
    appId: string,
    version: number,
  ): Promise<{ config: ObservabilityConfig; templates: TemplateSnapshot } | undefined> {
    const pool = await this.#db.pool();
    const { rows } = await pool.query<{ config: unknown; templates: TemplateSnapshot }>(
      `select config, templates from governance_app_configs ${BY_APP} and version = $3`,
      [workspaceId, appId, version],
    );
    const row = rows[0];
    // read as stateOf reads it: a config stored before a key gets that day's default, not today's
    return row && { config: configOf(row.config), templates: row.templates };
  }

  /**
   * A partial update (observability.ts); 422 with every offending field, nothing stored then.
   * `em` resolves the guard templates the patch names (guard-templates.ts).
   */
  async update(
    em: EntityManager,
    workspaceId: string,
    appId: string,
    patch: ObservabilityConfigPatch,
    app?: AppIdentity,
  ): Promise<AppConfigState> {
    const entries = patch.guards?.custom_templates;
    const resolved = entries
      ? await this.#templates.resolve(
          em,
          workspaceId,
          entries.map((e) => e.template_id),
        )
      : undefined;
    for (let attempt = 1; ; attempt++) {
      try {
        return await this.#db.tx(async (c) => {
          if (app) await removeStaleAppConfig(c, workspaceId, appId, app);
          const { rows } = await c.query<Row>(`select config, templates, version from governance_app_configs ${BY_APP} for update`, [
            workspaceId,
            appId,
          ]);
          const row = rows[0];
          const current = row ? stateOf(row) : { config: defaultObservabilityConfig(), templates: {}, version: 0 };
          const { config, errors } = mergeObservability(current.config, patch);
          let templates = current.templates;
          if (entries && resolved) {
            const r = resolveCustomTemplates(entries, resolved);
            errors.push(...r.errors);
            config.guards.custom_templates = r.entries;
            templates = r.snapshot;
          }
          if (errors.length > 0) throw new ValidationError(errors);
          // the engine must accept what is stored (it is what ingestion compiles)
          new GuardEngine(engineInput(config, templates));
          const {
            rows: [next],
          } = await c.query<{ v: string }>("select nextval('governance_config_version_seq') as v");
          const version = Number(next!.v);
          const values = [workspaceId, appId, JSON.stringify(config), JSON.stringify(templates), version, this.#now(), app?.uid ?? null];
          if (row) {
            await c.query(
              `update governance_app_configs set config = $3::jsonb, templates = $4::jsonb, version = $5, updated_at = $6, app_uid = coalesce($7, app_uid) ${BY_APP}`,
              values,
            );
          } else {
            await c.query(
              `insert into governance_app_configs (workspace_id, app_id, config, templates, version, updated_at, app_uid, id)
                           values ($1, $2, $3::jsonb, $4::jsonb, $5, $6, $7, $8)`,
              [...values, randomUUID()],
            );
          }
          return { config, templates, version };
        });
      } catch (err) {
        // two first writes raced: the loser retries and merges onto the winner's row
        if (pgCode(err) === UNIQUE_VIOLATION && attempt < 3) continue;
        throw err;
      }
    }
  }
}

/** The App a config is read or written for: its uid and creation time. */
export interface AppIdentity {
  uid?: string | undefined;
  createdAt?: Date | undefined;
}

/** A config row that is another App's ($3: this App's uid, $4: its creation time). */
const STALE = `((app_uid is not null and $3::text is not null and app_uid <> $3::text)
                or (app_uid is null and $4::timestamptz is not null and updated_at < $4::timestamptz))`;

/** Removes a config written for an earlier App of the same id. */
export async function removeStaleAppConfig(c: Client, workspaceId: string, appId: string, app: AppIdentity): Promise<void> {
  await c.query(`delete from governance_app_configs ${BY_APP} and ${STALE}`, [workspaceId, appId, app.uid ?? null, app.createdAt ?? null]);
}

/** Removes an app's config inside the caller's transaction (an App's permanent deletion). */
export async function removeAppConfig(c: Client, workspaceId: string, appId: string): Promise<void> {
  await c.query(`delete from governance_app_configs ${BY_APP}`, [workspaceId, appId]);
}

function configOf(stored: unknown): ObservabilityConfig {
  const parsed = readStoredConfig(stored);
  // a stored config always parses; defaults stand in if a later schema ever disagreed
  return parsed.success ? parsed.data : { ...defaultObservabilityConfig(), ...(stored as Partial<ObservabilityConfig>) };
}

function stateOf(row: Row): AppConfigState {
  return { config: configOf(row.config), templates: row.templates as TemplateSnapshot, version: Number(row.version) };
}
