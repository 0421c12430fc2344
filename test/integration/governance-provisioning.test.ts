// Governance provisioning: the operator's internal contract (TokenReview auth, store,
// role and key, idempotency, key rotation, de-provisioning), the public re-provision and
// de-provision (App annotations), and isolation enforced by PostgreSQL itself. Real API server,
// real PostgreSQL, real Kubernetes API server (TokenReview, App custom resources).
import test from "ava";
import pg from "pg";
import { API_VERSION } from "../../crds/schemas.ts";
import { KubeClient, type KubeObject } from "../../kube/client.ts";
import { serviceAccountToken, startApi, type TestApi } from "../helpers/api.ts";
import { identity } from "../helpers/identities.ts";
import { query } from "../helpers/db.ts";
import { deleteNamespace, kube, testNamespace } from "../helpers/kube.ts";

const k = kube();
const client = new KubeClient(k.kc);
let api: TestApi;
let opNs: string;
let operatorToken: string;
let intruderToken: string;

test.before(async () => {
  opNs = await testNamespace(k, "gov-op");
  api = await startApi({ env: { BERTH_GOVERNANCE_HOST: "gov.berth.test" } });
  operatorToken = (await identity("operator")).token;
  intruderToken = await serviceAccountToken(opNs, "intruder");
});
test.after.always(async () => {
  await api?.stop();
  await deleteNamespace(k, opNs);
});

const ws = () => `/workspaces/${api.workspaceId}/governance/apps`;

async function createApp(name: string, namespace = api.namespace): Promise<KubeObject> {
  return client.create({ apiVersion: API_VERSION, kind: "App", metadata: { name, namespace }, spec: { name, slug: name } }, "test");
}

async function getApp(name: string, namespace = api.namespace): Promise<KubeObject | undefined> {
  return client.get({ apiVersion: API_VERSION, kind: "App", namespace, name });
}

function internal(method: "POST" | "DELETE", body: unknown, key: string | null = operatorToken) {
  return api.fetchJson(method, "/internal/governance/provision", { body, key });
}

async function provision(app: KubeObject, generation = 1) {
  const r = await internal("POST", { namespace: app.metadata.namespace, appName: app.metadata.name, appUid: app.metadata.uid, generation });
  return r;
}

const keyOf = (connectionString: string) => /^govdb:\/\/([^@]+)@/.exec(connectionString)![1]!;

function ingest(key: string, traceId = crypto.randomUUID()) {
  return api.fetchJson("POST", "/governance/traces", {
    key,
    body: {
      traceId,
      input: "What is the capital of France?",
      output: "Paris.",
      model: "gpt-4o-mini",
      latency: 420,
      tokens: { prompt: 8, completion: 2, total: 10 },
      timestamp: new Date().toISOString(),
    },
  });
}

const schemaExists = async (schema: string) =>
  (await query(api.db.url, `select 1 from pg_namespace where nspname = $1`, [schema])).length === 1;
const roleExists = async (role: string) => (await query(api.db.url, `select 1 from pg_roles where rolname = $1`, [role])).length === 1;

test.serial("the operator provisions a store: schema, role, tables, a gov_sk_ key stored only as a hash", async (t) => {
  const app = await createApp("shop");
  const r = await provision(app);
  t.is(r.status, 200, r.text);
  t.is(r.headers.get("cache-control"), "no-store");
  t.is(r.body.project, "shop");
  t.is(r.body.workspaceId, api.workspaceId);
  t.is(r.body.generation, 1);
  t.is(r.body.database, `gov_${api.workspaceId}_shop`);
  t.regex(r.body.connectionString, new RegExp(`^govdb://gov_sk_[A-Za-z0-9_-]{43}@gov\\.berth\\.test/gov_${api.workspaceId}_shop$`));

  t.true(await schemaExists(`gov_${api.workspaceId}_shop`));
  t.true(await roleExists(`govr_${api.workspaceId}_shop`));
  const tables = await query<{ table_name: string }>(
    api.db.url,
    `select table_name from information_schema.tables where table_schema = $1 order by 1`,
    [`gov_${api.workspaceId}_shop`],
  );
  t.deepEqual(
    tables.map((x) => x.table_name),
    ["audit_head", "audit_log", "evals", "evals_hourly", "guard_blocks", "traces", "traces_hourly"],
  );
  const role = await query<{ rolcanlogin: boolean }>(api.db.url, `select rolcanlogin from pg_roles where rolname = $1`, [
    `govr_${api.workspaceId}_shop`,
  ]);
  t.false(role[0]!.rolcanlogin, "the app role is NOLOGIN");

  const key = keyOf(r.body.connectionString);
  const stored = await query<{ hash: string; prefix: string }>(
    api.db.url,
    `select hash, prefix from governance_app_keys where app_id = 'shop' and revoked_at is null`,
  );
  t.is(stored.length, 1);
  t.is(stored[0]!.hash.length, 64);
  t.is(stored[0]!.prefix, key.slice(0, 12));
  const everything =
    JSON.stringify(await query(api.db.url, `select * from governance_app_keys`)) +
    JSON.stringify(await query(api.db.url, `select * from governance_projects`));
  t.false(everything.includes(key.slice(7)), "the key is never stored");
  t.false(JSON.stringify(api.logs).includes(key.slice(7)), "nor logged");

  const ok = await ingest(key);
  t.is(ok.status, 201, ok.text);
});

test.serial("provisioning is idempotent; a repeated call revokes the previous key (401 on ingestion) and keeps the data", async (t) => {
  const app = (await getApp("shop"))!;
  const first = await provision(app);
  const oldKey = keyOf(first.body.connectionString);
  const traceId = crypto.randomUUID();
  t.is((await ingest(oldKey, traceId)).status, 201);

  const again = await provision(app);
  t.is(again.status, 200, again.text);
  t.is(again.body.database, first.body.database);
  const newKey = keyOf(again.body.connectionString);
  t.not(newKey, oldKey);

  const refused = await ingest(oldKey);
  t.is(refused.status, 401);
  t.is(refused.body.code, "unauthorized");
  const dup = await ingest(newKey, traceId);
  t.is(dup.status, 200, "the trace stored before is still there");
  t.is(dup.body.status, "duplicate");
  const live = await query(api.db.url, `select 1 from governance_app_keys where app_id = 'shop' and revoked_at is null`);
  t.is(live.length, 1, "exactly one live key");
  t.is((await query(api.db.url, `select 1 from governance_projects where app_id = 'shop'`)).length, 1);
});

test.serial("a provisioning interrupted half-way leaves nothing a retry cannot finish", async (t) => {
  const app = await createApp("halfway");
  // what a crash after the role and part of the schema would have left, had it not been one transaction
  await query(api.db.url, `create role "govr_${api.workspaceId}_halfway" nologin`);
  await query(api.db.url, `create schema "gov_${api.workspaceId}_halfway"`);
  await query(
    api.db.url,
    `create table "gov_${api.workspaceId}_halfway".traces (trace_id uuid primary key, session_id text, model text not null, prompt text not null, response text not null, error text, prompt_tokens integer not null, completion_tokens integer not null, total_tokens integer not null, latency_ms double precision not null, metadata jsonb, guard_blocked boolean not null, guard_evaluations jsonb not null, eval_score double precision not null, cost_usd double precision not null, priced boolean not null, price_version text not null, created_at timestamptz not null, ingested_at timestamptz not null default now())`,
  );
  const r = await provision(app);
  t.is(r.status, 200, r.text);
  const tables = await query<{ table_name: string }>(
    api.db.url,
    `select table_name from information_schema.tables where table_schema = $1 order by 1`,
    [`gov_${api.workspaceId}_halfway`],
  );
  t.deepEqual(
    tables.map((x) => x.table_name),
    ["audit_head", "audit_log", "evals", "evals_hourly", "guard_blocks", "traces", "traces_hourly"],
  );
  t.is((await ingest(keyOf(r.body.connectionString))).status, 201);
});

test.serial("the operator route refuses other callers: no token, a garbage token, another ServiceAccount, Berth keys", async (t) => {
  const app = (await getApp("shop"))!;
  const body = { namespace: api.namespace, appName: "shop", appUid: app.metadata.uid, generation: 1 };
  for (const [what, key, status] of [
    ["no token", null, 401],
    ["a garbage token", "not-a-token", 401],
    ["another ServiceAccount", intruderToken, 403],
    ["a workspace key", api.apiKey, 403],
    ["a platform admin key", api.adminKey, 403],
    ["an unknown ws_sk_ key", `ws_sk_${"A".repeat(43)}`, 401],
  ] as const) {
    const r = await internal("POST", body, key);
    t.is(r.status, status, `${what}: ${r.text}`);
    t.regex(r.headers.get("content-type") ?? "", /^application\/problem\+json/);
  }
  t.is((await internal("DELETE", { namespace: api.namespace, appName: "shop", appUid: app.metadata.uid }, intruderToken)).status, 403);
  t.truthy(await getApp("shop"));
  t.true(await schemaExists(`gov_${api.workspaceId}_shop`), "nothing was dropped");
});

test.serial("a namespace that is no workspace is 404; an invalid body is 422", async (t) => {
  const r = await internal("POST", { namespace: "kube-system", appName: "x", appUid: "u", generation: 1 });
  t.is(r.status, 404, r.text);
  t.is(r.body.code, "workspace_not_found");
  const bad = await internal("POST", { namespace: api.namespace, appName: "Not_A_Name", appUid: "", generation: 0 });
  t.is(bad.status, 422);
  t.deepEqual(bad.body.errors.map((e: { field: string }) => e.field).sort(), ["body.appName", "body.appUid", "body.generation"]);
});

test.serial("PostgreSQL itself refuses one app's role access to another app's schema", async (t) => {
  const other = await createApp("other");
  t.is((await provision(other)).status, 200);
  const c = new pg.Client({ connectionString: api.db.url });
  await c.connect();
  t.teardown(() => c.end());
  await c.query("begin");
  await c.query(`set local role "govr_${api.workspaceId}_shop"`);
  t.truthy((await c.query(`select count(*) from "gov_${api.workspaceId}_shop".traces`)).rows[0], "its own schema is readable");
  const err = await t.throwsAsync(c.query(`select * from "gov_${api.workspaceId}_other".traces`));
  t.regex(err.message, /permission denied for schema/);
  await c.query("rollback");
  await c.query("begin");
  await c.query(`set local role "govr_${api.workspaceId}_shop"`);
  const keys = await t.throwsAsync(c.query(`select * from public.governance_app_keys`));
  t.regex(keys.message, /permission denied/);
  await c.query("rollback");
});

test.serial("the public re-provision drops the old data, revokes keys and annotates the App with a new generation", async (t) => {
  const app = (await getApp("shop"))!;
  const r1 = await provision(app);
  const key = keyOf(r1.body.connectionString);
  t.is((await ingest(key)).status, 201);
  const before = await query<{ n: string }>(api.db.url, `select count(*) as n from "gov_${api.workspaceId}_shop".traces`);
  t.true(Number(before[0]!.n) > 0);

  const r = await api.fetchJson("POST", `${ws()}/shop/provision`);
  t.is(r.status, 200, r.text);
  t.deepEqual(r.body, {
    appId: "shop",
    harborDatabase: `gov_${api.workspaceId}_shop`,
    connectionString: `govdb://****@gov.berth.test/gov_${api.workspaceId}_shop`,
  });
  const after = await query<{ n: string }>(api.db.url, `select count(*) as n from "gov_${api.workspaceId}_shop".traces`);
  t.is(Number(after[0]!.n), 0, "a fresh, empty store");
  t.is((await ingest(key)).status, 401, "the old key is revoked");
  const annotated = (await getApp("shop"))!;
  t.is(annotated.metadata.annotations?.["berth.dev/governance-generation"], "2");
  t.is(annotated.metadata.annotations?.["berth.dev/governance-disabled"], undefined);

  // the operator follows the annotation: the generation it asks for comes back
  const op = await provision(annotated, 2);
  t.is(op.status, 200);
  t.is(op.body.generation, 2);
  // ingestion's prepared statements outlive the dropped tables on the API's connections: they
  // resolve the new store's tables
  t.is((await ingest(keyOf(op.body.connectionString))).status, 201);
  const fresh = await query<{ n: string }>(api.db.url, `select count(*) as n from "gov_${api.workspaceId}_shop".traces`);
  t.is(Number(fresh[0]!.n), 1, "the trace is in the new store");
});

test.serial("public provision of an App that does not exist is 404; another workspace's key sees 404", async (t) => {
  const r = await api.fetchJson("POST", `${ws()}/nope/provision`);
  t.is(r.status, 404);
  t.is(r.body.code, "app_not_found");
  const other = await api.createWorkspace("other ws");
  const cross = await api.fetchJson("POST", `${ws()}/shop/provision`, { key: other.apiKey });
  t.is(cross.status, 404);
  t.is(cross.body.code, "workspace_not_found");
  const cross2 = await api.fetchJson("GET", `/workspaces/${other.workspaceId}/governance/apps/shop/traces`, { key: other.apiKey });
  t.is(cross2.status, 404, "shop is not an App of the other workspace");
  t.is(cross2.body.code, "app_not_found");
});

test.serial("pipeline state reports the real governance stage", async (t) => {
  const ps = await api.fetchJson("GET", `/workspaces/${api.workspaceId}/apps/shop/pipeline-state`);
  t.is(ps.status, 200, ps.text);
  t.is(ps.body.harbor.status, "active");
  t.true(ps.body.harbor.guardsEnabled);
  t.regex(ps.body.harbor.lastEvalAt ?? "", /^\d{4}-\d\d-\d\dT/);
  await api.fetchJson("PUT", `${ws()}/shop/observability-config`, {
    body: { guards: { prompt_injection: { enabled: false }, sensitive_data: { enabled: false } } },
  });
  const off = await api.fetchJson("GET", `/workspaces/${api.workspaceId}/apps/shop/pipeline-state`);
  t.false(off.body.harbor.guardsEnabled);
  await createApp("fresh");
  const fresh = await api.fetchJson("GET", `/workspaces/${api.workspaceId}/apps/fresh/pipeline-state`);
  t.deepEqual(fresh.body.harbor, { status: "not_provisioned", guardsEnabled: false, lastEvalAt: null });
});

test.serial("public DELETE drops the store, revokes keys, annotates the App; the operator then gets 409 governance_disabled", async (t) => {
  const app = (await getApp("other"))!;
  const key = keyOf((await provision(app)).body.connectionString);
  const r = await api.fetchJson("DELETE", `${ws()}/other/provision`);
  t.is(r.status, 204, r.text);
  t.false(await schemaExists(`gov_${api.workspaceId}_other`));
  t.false(await roleExists(`govr_${api.workspaceId}_other`));
  t.is((await ingest(key)).status, 401);
  t.is((await getApp("other"))!.metadata.annotations?.["berth.dev/governance-disabled"], "true");
  const op = await provision(app);
  t.is(op.status, 409, op.text);
  t.is(op.body.code, "governance_disabled");
  const traces = await api.fetchJson("GET", `${ws()}/other/traces`);
  t.is(traces.status, 404);
  t.is(traces.body.code, "governance_not_provisioned");
  const ps = await api.fetchJson("GET", `/workspaces/${api.workspaceId}/apps/other/pipeline-state`);
  t.is(ps.body.harbor.status, "disabled");
  t.is((await api.fetchJson("DELETE", `${ws()}/other/provision`)).status, 204, "idempotent");

  // POST turns it back on
  const back = await api.fetchJson("POST", `${ws()}/other/provision`);
  t.is(back.status, 200, back.text);
  const annotations = (await getApp("other"))!.metadata.annotations ?? {};
  t.is(annotations["berth.dev/governance-disabled"], undefined);
  const again = await provision((await getApp("other"))!, Number(annotations["berth.dev/governance-generation"]));
  t.is(again.status, 200, again.text);
});

test.serial("the operator's DELETE drops store, role, keys and config; it is idempotent and spares another App's store", async (t) => {
  const app = await createApp("doomed");
  const key = keyOf((await provision(app)).body.connectionString);
  await api.fetchJson("PUT", `${ws()}/doomed/observability-config`, { body: { guards: { prompt_injection: { threshold: 0.9 } } } });
  const stranger = await internal("DELETE", { namespace: api.namespace, appName: "doomed", appUid: "another-uid" });
  t.is(stranger.status, 204);
  t.true(await schemaExists(`gov_${api.workspaceId}_doomed`), "a store made for another App of this name stays");

  const r = await internal("DELETE", { namespace: api.namespace, appName: "doomed", appUid: app.metadata.uid });
  t.is(r.status, 204, r.text);
  t.false(await schemaExists(`gov_${api.workspaceId}_doomed`));
  t.false(await roleExists(`govr_${api.workspaceId}_doomed`));
  t.is((await query(api.db.url, `select 1 from governance_app_keys where app_id = 'doomed'`)).length, 0);
  t.is((await query(api.db.url, `select 1 from governance_projects where app_id = 'doomed'`)).length, 0);
  t.is((await query(api.db.url, `select 1 from governance_app_configs where app_id = 'doomed'`)).length, 0);
  t.is((await ingest(key)).status, 401);
  t.is((await internal("DELETE", { namespace: api.namespace, appName: "doomed", appUid: app.metadata.uid })).status, 204, "idempotent");
  t.is((await internal("DELETE", { namespace: "no-such-namespace", appName: "doomed", appUid: "x" })).status, 204);
});

test.serial(
  "a provisioning call that runs after the finalizer's DELETE is refused: no store again, and a newer App's store is not replaced",
  async (t) => {
    // the operator sent POST, was killed before the answer, and the next one deleted the App: the
    // POST, queued behind the DELETE on the app's lock, runs after it
    const app = await createApp("late");
    t.is((await provision(app)).status, 200);
    t.is((await internal("DELETE", { namespace: api.namespace, appName: "late", appUid: app.metadata.uid })).status, 204);
    const late = await provision(app);
    t.is(late.status, 409, late.text);
    t.is(late.body.code, "app_deleted");
    t.false(await schemaExists(`gov_${api.workspaceId}_late`), "the deleted App's store is not made again");
    t.false(await roleExists(`govr_${api.workspaceId}_late`));
    t.is((await query(api.db.url, `select 1 from governance_projects where app_id = 'late'`)).length, 0);

    // a new App of the same name (another uid) gets its store; the late call of the old one leaves it be
    const fresh = await internal("POST", { namespace: api.namespace, appName: "late", appUid: "uid-of-the-new-late", generation: 1 });
    t.is(fresh.status, 200, fresh.text);
    const key = keyOf(fresh.body.connectionString as string);
    t.is((await ingest(key)).status, 201);
    t.is((await provision(app)).status, 409, "still refused");
    t.true(await schemaExists(`gov_${api.workspaceId}_late`));
    t.is((await ingest(key)).status, 201, "the new App's key and store are as they were");
    const rows = await query<{ app_uid: string }>(api.db.url, `select app_uid from governance_projects where app_id = 'late'`);
    t.deepEqual(
      rows.map((r) => r.app_uid),
      ["uid-of-the-new-late"],
    );
  },
);

test.serial("a new App with the name of a deleted one gets a fresh store, never the old data", async (t) => {
  const first = await createApp("phoenix");
  const key = keyOf((await provision(first)).body.connectionString);
  t.is((await ingest(key)).status, 201);
  await client.delete({ apiVersion: API_VERSION, kind: "App", namespace: api.namespace, name: "phoenix" });
  let second: KubeObject | undefined;
  for (let i = 0; i < 50 && !second; i++) {
    try {
      second = await createApp("phoenix");
    } catch {
      await new Promise((r) => setTimeout(r, 100));
    }
  }
  t.truthy(second);
  t.not(second!.metadata.uid, first.metadata.uid);
  const r = await provision(second!);
  t.is(r.status, 200, r.text);
  const n = await query<{ n: string }>(api.db.url, `select count(*) as n from "gov_${api.workspaceId}_phoenix".traces`);
  t.is(Number(n[0]!.n), 0);
});

test.serial("an App deleted before its store existed leaves no config to a later App of the same id", async (t) => {
  const cfg = `${ws()}/ember/observability-config`;
  const first = await createApp("ember");
  const put = await api.fetchJson("PUT", cfg, { body: { guards: { prompt_injection: { enabled: false, threshold: 0.33 } } } });
  t.is(put.status, 200, put.text);
  await client.delete({ apiVersion: API_VERSION, kind: "App", namespace: api.namespace, name: "ember" });
  let second: KubeObject | undefined;
  for (let i = 0; i < 50 && !second; i++) {
    try {
      second = await createApp("ember");
    } catch {
      await new Promise((r) => setTimeout(r, 100));
    }
  }
  t.not(second!.metadata.uid, first.metadata.uid);
  // the earlier App's row is still there (nothing removed it: the App had no store, so no finalizer) ...
  t.is((await query(api.db.url, `select 1 from governance_app_configs where app_id = 'ember'`)).length, 1);
  // ... and it is not the new App's: the defaults, through the API and once the store is made
  const read = await api.fetchJson("GET", cfg);
  t.is(read.status, 200, read.text);
  t.true(read.body.guards.prompt_injection.enabled);
  t.not(read.body.guards.prompt_injection.threshold, 0.33);
  t.is((await provision(second!)).status, 200);
  t.is((await query(api.db.url, `select 1 from governance_app_configs where app_id = 'ember'`)).length, 0, "provisioning removed it");
  // the new App's own config is its own
  t.is(
    (await api.fetchJson("PUT", cfg, { body: { guards: { prompt_injection: { threshold: 0.5 } } } })).body.guards.prompt_injection
      .threshold,
    0.5,
  );
  t.like((await api.fetchJson("GET", cfg)).body.guards.prompt_injection, { enabled: true, threshold: 0.5 });
});

// A transaction that asked the pool for a second connection deadlocked a whole API once: the
// first server-version look-up of a fresh API went to the pool from inside each provisioning's
// transaction, and with as many provisionings at once as the pool has connections, every one
// waited for a connection only their own commits would free.
test("a fresh API provisions more Apps at once than its pool has connections", async (t) => {
  const small = await startApi({ poolMax: 2 });
  try {
    const apps = await Promise.all(
      Array.from({ length: 4 }, (_, i) =>
        client.create<KubeObject>(
          {
            apiVersion: API_VERSION,
            kind: "App",
            metadata: { name: `crowd-${i}`, namespace: small.namespace },
            spec: { name: `crowd-${i}`, slug: `crowd-${i}` },
          },
          "test",
        ),
      ),
    );
    const provisioned = Promise.all(
      apps.map((a) =>
        small.fetchJson("POST", "/internal/governance/provision", {
          key: operatorToken,
          body: { namespace: a.metadata.namespace, appName: a.metadata.name, appUid: a.metadata.uid, generation: 1 },
        }),
      ),
    );
    const stuck = new Promise<"stuck">((r) => setTimeout(() => r("stuck"), 60_000).unref());
    const out = await Promise.race([provisioned, stuck]);
    if (out === "stuck") return t.fail("the provisionings did not finish in 60 s: the pool is deadlocked");
    for (const r of out) t.is(r.status, 200, r.text);
  } finally {
    await small.stop();
  }
});

test("a governance transaction cannot take a second connection from the pool", async (t) => {
  const db = api.services.governance.db;
  // the server version on the transaction's own connection ...
  t.true((await db.tx((c) => db.serverVersion(c))) >= 130000);
  // ... and the pool refused inside a transaction, so the mistake fails at once instead of
  // deadlocking under load
  await t.throwsAsync(
    db.tx(async () => (await db.pool()).query("select 1")),
    { message: /inside a transaction/ },
  );
  t.is((await (await db.pool()).query("select 1 as one")).rows[0].one, 1, "outside one, the pool serves");
});
