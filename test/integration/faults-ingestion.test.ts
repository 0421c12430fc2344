// Fault test (docs/reliability.md): the API process is killed and restarted, and PostgreSQL is restarted and
// crashed, while the toolkit sends a steady stream of traces. The toolkit retries a batch whose
// answer it did not get with the same traceIds, and the API is idempotent on traceId, so every
// trace must be stored exactly once (one trace row, one audit entry) and the audit chain must
// verify through the verify endpoint.
//
// Isolation: PostgreSQL is stopped here, so this file runs its own server (helpers/postgres.ts:
// the same binaries as the suite's, its own port and data, purged at the end); the suite's shared
// server, which the other test files use at the same time, is never touched. The API is the real
// process (`node api/main.ts`) under the chart's API ServiceAccount, on a fixed port so that the
// toolkit's connection string stays valid across restarts.
import test from "ava";
import { API_VERSION } from "../../crds/schemas.ts";
import { KubeClient, type KubeObject } from "../../kube/client.ts";
import { Governance, type GovernanceLogger } from "../../toolkit/src/index.ts";
import { run, root } from "../helpers/binaries.ts";
import { freshDatabase, query, type TestDatabase } from "../helpers/db.ts";
import { identity } from "../helpers/identities.ts";
import { deleteNamespace, eventually, kube } from "../helpers/kube.ts";
import { dedicatedPostgres, type DedicatedPostgres } from "../helpers/postgres.ts";
import { freePort, spawnNode, type NodeProcess } from "../helpers/processes.ts";
import { join } from "node:path";

const k = kube();
const client = new KubeClient(k.kc);
let pg: DedicatedPostgres | undefined;
let db: TestDatabase;
let api: NodeProcess | undefined;
let port = 0;
let apiEnv: Record<string, string> = {};
let workspace: { workspaceId: string; namespace: string; apiKey: string };

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function startApiProcess(): Promise<NodeProcess> {
  const p = spawnNode("api", "api/main.ts", apiEnv);
  await eventually(
    "the API to answer /healthz",
    async () => {
      if (p.child.exitCode !== null) throw new Error(`the API exited: ${p.tail()}`);
      return (await fetch(`http://127.0.0.1:${port}/healthz`).catch(() => undefined))?.ok;
    },
    60_000,
    100,
  ).catch(async (err: unknown) => {
    await p.stop("SIGKILL");
    throw new Error(`${(err as Error).message}\n${p.tail()}`);
  });
  api = p;
  return p;
}

test.before(async () => {
  pg = await dedicatedPostgres();
  process.env.BERTH_TEST_ADMIN_DATABASE_URL = pg.adminUrl; // helpers/db.ts: databases on the dedicated server
  db = await freshDatabase();
  port = await freePort();
  apiEnv = {
    DATABASE_URL: db.url,
    KUBECONFIG: (await identity("api")).kubeconfig,
    BERTH_API_HOST: "127.0.0.1",
    BERTH_API_PORT: String(port),
    BERTH_GOVERNANCE_HOST: `127.0.0.1:${port}`,
    BERTH_LOG_LEVEL: "info",
    BERTH_SHUTDOWN_TIMEOUT_MS: "3000",
  };
  // a workspace (and its namespace) and its key, as an operator bootstraps one
  const created = await run(process.execPath, [join(root, "api/cli.ts"), "workspace", "create", "--name", "faults"], {
    env: { ...process.env, ...apiEnv },
  });
  if (created.code !== 0) throw new Error(`api/cli.ts workspace create failed: ${created.stderr}`);
  workspace = JSON.parse(created.stdout) as typeof workspace;
  await startApiProcess();
});
test.after.always(async () => {
  await api?.stop("SIGKILL");
  if (workspace) await deleteNamespace(k, workspace.namespace);
  await pg?.purge();
});

test("API and PostgreSQL restarts and crashes during ingestion: every trace is stored exactly once and the audit chain verifies", async (t) => {
  t.timeout(10 * 60_000);
  // the App and its store, provisioned as the operator does it
  const app = await client.create<KubeObject>(
    {
      apiVersion: API_VERSION,
      kind: "App",
      metadata: { name: "chat", namespace: workspace.namespace },
      spec: { name: "chat", slug: "chat" },
    },
    "test",
  );
  const prov = await fetch(`http://127.0.0.1:${port}/api/v1/internal/governance/provision`, {
    method: "POST",
    headers: { Authorization: `Bearer ${(await identity("operator")).token}`, "Content-Type": "application/json" },
    body: JSON.stringify({ namespace: workspace.namespace, appName: "chat", appUid: app.metadata.uid, generation: 1 }),
  });
  t.is(prov.status, 200, await prov.clone().text());
  const { connectionString, database: schema } = (await prov.json()) as { connectionString: string; database: string };

  const warnings: string[] = [];
  const logger: GovernanceLogger = {
    warn: (m) => {
      warnings.push(m);
    },
  };
  const g = new Governance({
    env: { GOVDB_CONNECTION: connectionString, GOVERNANCE_PROJECT: "chat" },
    lingerMs: 20,
    batchSize: 50,
    initialBackoffMs: 100,
    maxBackoffMs: 1000,
    maxQueue: 100_000,
    requestTimeoutMs: 5000,
    logger,
  });
  await g.start();
  t.teardown(() => g.shutdown(1000).then(() => undefined));

  // A steady stream: 20 traces every 50 ms, until the faults are over.
  const ids: string[] = [];
  let producing = true;
  const producer = (async () => {
    let i = 0;
    while (producing) {
      for (let j = 0; j < 20; j++, i++) {
        const id = g.submit({
          input: `question ${i}: what is the refund policy?`,
          output: `answer ${i}: within 30 days.`,
          model: "gpt-4o-mini",
          latency: 300,
          tokens: { prompt: 12, completion: 8, total: 20 },
          sessionId: `s-${i % 7}`,
        });
        if (!id) throw new Error(`trace ${i} was not queued`);
        ids.push(id);
      }
      await sleep(50);
    }
  })();

  const faults: string[] = [];
  const fault = async (what: string, fn: () => Promise<void>) => {
    await sleep(1500);
    faults.push(what);
    await fn();
  };
  await fault("API SIGKILL, restart", async () => {
    await api!.stop("SIGKILL");
    await sleep(700);
    await startApiProcess();
  });
  await fault("PostgreSQL crash (immediate stop), restart", async () => {
    await pg!.crash();
    await sleep(700);
    await pg!.start();
  });
  await fault("API SIGTERM (graceful), restart", async () => {
    await api!.stop("SIGTERM");
    await startApiProcess();
  });
  await fault("PostgreSQL restart (fast stop)", async () => {
    await pg!.restart();
  });
  await fault("PostgreSQL crash and API SIGKILL together, both restarted", async () => {
    await Promise.all([pg!.crash(), api!.stop("SIGKILL")]);

    await pg!.start();
    await startApiProcess();
  });
  await sleep(1500);
  producing = false;
  await producer;

  t.true(await g.flush(180_000), `the toolkit did not deliver everything: ${JSON.stringify(g.stats())}`);
  const stats = g.stats();
  t.log(`faults: ${faults.join("; ")}`);
  t.log(`toolkit: ${JSON.stringify(stats)}`);
  t.is(stats.submitted, ids.length);
  t.is(stats.sent + stats.duplicates, ids.length, "every trace was created or was already there");
  t.is(stats.rejected, 0, `rejected: ${stats.lastError?.message}`);
  t.is(stats.dropped, 0);
  t.true(stats.retries > 0, "the faults were felt by the toolkit (else the test proves nothing)");

  // Exactly once: one trace row and one audit entry per traceId, and no other.
  const stored = await query<{ trace_id: string }>(db.url, `select trace_id from "${schema}".traces`);
  t.is(stored.length, ids.length, "one trace row per trace");
  const want = new Set(ids);
  t.is(new Set(stored.map((r) => r.trace_id)).size, ids.length);
  t.true(
    stored.every((r) => want.has(r.trace_id)),
    "no trace that was not sent",
  );
  const [audit] = await query<{ n: string; distinct_ids: string; max_seq: string }>(
    db.url,
    `select count(*) as n, count(distinct trace_id) as distinct_ids, max(sequence) as max_seq from "${schema}".audit_log`,
  );
  t.is(Number(audit!.n), ids.length, "one audit entry per trace");
  t.is(Number(audit!.distinct_ids), ids.length);
  t.is(Number(audit!.max_seq), ids.length, "the audit sequence has no gap");

  const verify = await fetch(`http://127.0.0.1:${port}/api/v1/workspaces/${workspace.workspaceId}/governance/apps/chat/audit/verify`, {
    headers: { Authorization: `Bearer ${workspace.apiKey}` },
  });
  const v = (await verify.json()) as { valid: boolean; entries: number; firstBrokenLink: unknown };
  t.is(verify.status, 200);
  t.true(v.valid, `the audit chain does not verify: ${JSON.stringify(v.firstBrokenLink)}`);
  t.is(v.entries, ids.length);
  // the API that runs now is ready (its database included)
  t.is((await fetch(`http://127.0.0.1:${port}/readyz`)).status, 200);
});
