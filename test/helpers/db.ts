// A fresh PostgreSQL database per test file, cloned from the migrated template (hack/test makes it).
import pg from "pg";
import { randomBytes } from "node:crypto";

export const TEMPLATE_DB = "berth_template";

export function adminUrl(): string {
  const url = process.env.BERTH_TEST_ADMIN_DATABASE_URL;
  if (!url) throw new Error("BERTH_TEST_ADMIN_DATABASE_URL is not set: run the tests through ./hack/test");
  return url;
}

export function databaseUrl(db: string): string {
  const u = new URL(adminUrl());
  u.pathname = `/${db}`;
  return u.toString();
}

async function withAdmin<R>(fn: (c: pg.Client) => Promise<R>): Promise<R> {
  const c = new pg.Client({ connectionString: adminUrl() });
  await c.connect();
  try {
    return await fn(c);
  } finally {
    await c.end();
  }
}

export interface TestDatabase {
  name: string;
  url: string;
  drop(): Promise<void>;
}

/** Creates `t_<random>` from the template (migrated) or empty (`{ empty: true }`). */
export async function freshDatabase(opts: { empty?: boolean } = {}): Promise<TestDatabase> {
  const name = `t_${randomBytes(6).toString("hex")}`;
  await withAdmin((c) => c.query(`create database ${name} ${opts.empty ? "" : `template ${TEMPLATE_DB}`}`));
  return {
    name,
    url: databaseUrl(name),
    drop: () =>
      withAdmin(async (c) => {
        await c.query(`drop database if exists ${name} with (force)`);
      }),
  };
}

export async function query<R extends pg.QueryResultRow = Record<string, unknown>>(
  url: string,
  sql: string,
  params: unknown[] = [],
): Promise<R[]> {
  const c = new pg.Client({ connectionString: url });
  await c.connect();
  try {
    return (await c.query<R>(sql, params)).rows;
  } finally {
    await c.end();
  }
}
