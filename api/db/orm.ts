// MikroORM wiring: entities, committed migrations (run explicitly, never schema.update at boot).
import { MikroORM, defineConfig } from "@mikro-orm/postgresql";
import { Migrator } from "@mikro-orm/migrations";
import { ApiKey, Workspace, WorkspaceMember } from "../workspaces/entities.ts";
import { PlatformAdminKey } from "../auth/entities.ts";
import { GuardTemplate } from "../governance/configs/entities.ts";
import { ConsoleSession } from "../console/entities.ts";
import { Migration20261121000000_workspaces } from "./migrations/Migration20261121000000_workspaces.ts";
import { Migration20261122000000_platform_admin_keys } from "./migrations/Migration20261122000000_platform_admin_keys.ts";
import { Migration20261123000000_governance } from "./migrations/Migration20261123000000_governance.ts";
import { Migration20261124000000_store_version } from "./migrations/Migration20261124000000_store_version.ts";
import { Migration20261125000000_guard_template_owner } from "./migrations/Migration20261125000000_guard_template_owner.ts";
import { Migration20261126000000_webhook_deliveries } from "./migrations/Migration20261126000000_webhook_deliveries.ts";
import { Migration20261127000000_sign_in_tickets } from "./migrations/Migration20261127000000_sign_in_tickets.ts";
import { Migration20261128000000_audit_restarts } from "./migrations/Migration20261128000000_audit_restarts.ts";
import { Migration20261129000000_console_sessions } from "./migrations/Migration20261129000000_console_sessions.ts";
import { Migration20261130000000_workspace_members } from "./migrations/Migration20261130000000_workspace_members.ts";
import { Migration20261201000000_console_member_sessions } from "./migrations/Migration20261201000000_console_member_sessions.ts";
import { Migration20261202000000_governance_deleted_apps } from "./migrations/Migration20261202000000_governance_deleted_apps.ts";

/** The tables MikroORM maps; the governance module's other tables have one raw SQL module each (api/governance/configs/entities.ts). */
export const ENTITIES = [Workspace, ApiKey, PlatformAdminKey, GuardTemplate, ConsoleSession, WorkspaceMember];

/** Every migration, in order. A new migration is added here and committed. */
export const MIGRATIONS = [
  { name: "Migration20261121000000_workspaces", class: Migration20261121000000_workspaces },
  { name: "Migration20261122000000_platform_admin_keys", class: Migration20261122000000_platform_admin_keys },
  { name: "Migration20261123000000_governance", class: Migration20261123000000_governance },
  { name: "Migration20261124000000_store_version", class: Migration20261124000000_store_version },
  { name: "Migration20261125000000_guard_template_owner", class: Migration20261125000000_guard_template_owner },
  { name: "Migration20261126000000_webhook_deliveries", class: Migration20261126000000_webhook_deliveries },
  { name: "Migration20261127000000_sign_in_tickets", class: Migration20261127000000_sign_in_tickets },
  { name: "Migration20261128000000_audit_restarts", class: Migration20261128000000_audit_restarts },
  { name: "Migration20261129000000_console_sessions", class: Migration20261129000000_console_sessions },
  { name: "Migration20261130000000_workspace_members", class: Migration20261130000000_workspace_members },
  { name: "Migration20261201000000_console_member_sessions", class: Migration20261201000000_console_member_sessions },
  { name: "Migration20261202000000_governance_deleted_apps", class: Migration20261202000000_governance_deleted_apps },
];

export function ormConfig(databaseUrl: string, opts: { debug?: boolean; poolMax?: number } = {}) {
  return defineConfig({
    clientUrl: databaseUrl,
    entities: ENTITIES,
    extensions: [Migrator],
    migrations: {
      migrationsList: MIGRATIONS,
      tableName: "berth_migrations",
      transactional: true,
      allOrNothing: true,
      silent: true,
      snapshot: false,
    },
    pool: { min: 0, max: opts.poolMax ?? 10 },
    debug: opts.debug ?? false,
    allowGlobalContext: false,
    ensureDatabase: false,
  });
}

export async function openOrm(databaseUrl: string, opts: { debug?: boolean; poolMax?: number } = {}): Promise<MikroORM> {
  return MikroORM.init(ormConfig(databaseUrl, opts));
}

export async function migrateUp(orm: MikroORM): Promise<string[]> {
  const done = await orm.migrator.up();
  return done.map((m) => m.name);
}

export async function migrateDown(orm: MikroORM, to: string | 0 = 0): Promise<string[]> {
  const done = await orm.migrator.down({ to });
  return done.map((m) => m.name);
}
