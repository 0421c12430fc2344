// Database set-up for local runs and tests. Usage: node hack/db.ts template|migrate|create <admin-url>
//   template  (re)create berth_template, migrated: tests clone a fresh database from it per file
//   migrate   create the `berth` database when missing and run pending migrations; prints its URL
//   create    create the `berth` database when missing, without migrating (Berth's migration Job
//             does, as a Helm hook: ./hack/up on the real node); prints its URL
import pg from "pg";
import { migrateUp, openOrm } from "../api/db/orm.ts";

export const TEMPLATE_DB = "berth_template";

export function withDatabase(adminUrl: string, db: string): string {
  const u = new URL(adminUrl);
  u.pathname = `/${db}`;
  return u.toString();
}

async function admin<T>(adminUrl: string, fn: (c: pg.Client) => Promise<T>): Promise<T> {
  const c = new pg.Client({ connectionString: adminUrl });
  await c.connect();
  try {
    return await fn(c);
  } finally {
    await c.end();
  }
}

async function migrate(url: string): Promise<void> {
  const orm = await openOrm(url, { poolMax: 2 });
  try {
    await migrateUp(orm);
  } finally {
    await orm.close();
  }
}

const [cmd, adminUrl] = process.argv.slice(2);
if (!adminUrl) {
  console.error("usage: node hack/db.ts template|migrate|create <admin-url>");
  process.exit(2);
}
if (cmd === "template") {
  await admin(adminUrl, async (c) => {
    await c.query(`select pg_terminate_backend(pid) from pg_stat_activity where datname = $1 and pid <> pg_backend_pid()`, [TEMPLATE_DB]);
    const exists = await c.query(`select 1 from pg_database where datname = $1`, [TEMPLATE_DB]);
    if (exists.rowCount) await c.query(`alter database ${TEMPLATE_DB} is_template false`);
    await c.query(`drop database if exists ${TEMPLATE_DB}`);
    await c.query(`create database ${TEMPLATE_DB}`);
  });
  await migrate(withDatabase(adminUrl, TEMPLATE_DB));
  await admin(adminUrl, (c) => c.query(`alter database ${TEMPLATE_DB} is_template true`));
} else if (cmd === "migrate" || cmd === "create") {
  await admin(adminUrl, async (c) => {
    const r = await c.query(`select 1 from pg_database where datname = 'berth'`);
    if (r.rowCount === 0) await c.query(`create database berth`);
  });
  const url = withDatabase(adminUrl, "berth");
  if (cmd === "migrate") await migrate(url);
  console.log(url);
} else {
  console.error(`unknown command ${cmd}`);
  process.exit(2);
}
