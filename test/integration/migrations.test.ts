// Committed migrations apply to an empty database and are reversible.
import test from "ava";
import { migrateDown, migrateUp, openOrm, MIGRATIONS } from "../../api/db/orm.ts";
import { freshDatabase, query } from "../helpers/db.ts";

const tables = async (url: string) =>
  (
    await query<{ table_name: string }>(
      url,
      `select table_name from information_schema.tables where table_schema = 'public' and table_name <> 'berth_migrations' order by 1`,
    )
  ).map((r) => r.table_name);

/** The tables the migrations make, by name. */
const TABLES = [
  "api_keys",
  "console_sessions",
  "governance_app_configs",
  "governance_app_keys",
  "governance_audit_restarts",
  "governance_deleted_apps",
  "governance_guard_templates",
  "governance_projects",
  "platform_admin_keys",
  "used_sign_in_tickets",
  "webhook_deliveries",
  "workspace_members",
  "workspaces",
];

test("migrations apply to a fresh database, revert completely and apply again", async (t) => {
  const db = await freshDatabase({ empty: true });
  t.teardown(() => db.drop());
  const orm = await openOrm(db.url, { poolMax: 2 });
  t.teardown(() => orm.close());

  t.deepEqual(
    await migrateUp(orm),
    MIGRATIONS.map((m) => m.name),
  );
  t.deepEqual(await tables(db.url), TABLES);
  t.deepEqual(await migrateUp(orm), [], "a second run applies nothing");

  t.deepEqual(
    await migrateDown(orm),
    [...MIGRATIONS].reverse().map((m) => m.name),
  );
  t.deepEqual(await tables(db.url), []);

  await migrateUp(orm);
  t.deepEqual(await tables(db.url), TABLES);
});

test("the template database that tests clone is fully migrated", async (t) => {
  const db = await freshDatabase();
  t.teardown(() => db.drop());
  const applied = await query<{ name: string }>(db.url, `select name from berth_migrations order by id`);
  t.deepEqual(
    applied.map((r) => r.name),
    MIGRATIONS.map((m) => m.name),
  );
});
