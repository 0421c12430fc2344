// Authentication and workspace scoping against the real server and database: 401 for every way a
// key can be wrong, 404 (and no data) across workspaces, 403 for the wrong kind of key; keys are
// stored hashed, listed without secrets, revoked immediately, never logged.
import test, { type ExecutionContext } from "ava";
import { createHash } from "node:crypto";
import { z } from "zod";
import { defineRoute } from "../../api/http/route.ts";
import { createLogger } from "../../kube/logger.ts";
import { buildServer } from "../../api/server.ts";
import { query } from "../helpers/db.ts";
import { deleteNamespace, kube, testNamespace } from "../helpers/kube.ts";
import { startApi, type ApiResponse, type TestApi, type TestWorkspace } from "../helpers/api.ts";

let api: TestApi;
let other: TestWorkspace;
test.before(async () => {
  api = await startApi();
  other = await api.createWorkspace("other team");
});
test.after.always(async () => {
  await api?.stop();
});

const KEY_FORMAT = /^ws_sk_[A-Za-z0-9_-]{43}$/;

function assert401(t: ExecutionContext, r: ApiResponse, message?: string) {
  t.is(r.status, 401, message ?? r.text);
  t.regex(r.headers.get("content-type") ?? "", /^application\/problem\+json/);
  t.is(r.body.code, "unauthorized");
  t.regex(r.headers.get("www-authenticate") ?? "", /^Bearer/);
  t.is(r.body.data, undefined);
}

test("requests without a valid key are 401 with WWW-Authenticate: Bearer", async (t) => {
  const path = `/workspaces/${api.workspaceId}/api-keys`;
  assert401(t, await api.fetchJson("GET", path, { key: null }));
  assert401(
    t,
    await api.fetchJson("GET", path, { key: null, headers: { Authorization: `Basic ${Buffer.from("a:b").toString("base64")}` } }),
  );
  assert401(t, await api.fetchJson("GET", path, { key: null, headers: { Authorization: `Token ${api.apiKey}` } }));
  assert401(t, await api.fetchJson("GET", path, { key: null, headers: { Authorization: "Bearer" } }));
  assert401(t, await api.fetchJson("GET", path, { key: "ws_sk_short" }));
  assert401(t, await api.fetchJson("GET", path, { key: `ws_sk_${"A".repeat(43)}` }));
  assert401(t, await api.fetchJson("GET", path, { key: api.apiKey.slice(0, -1) + (api.apiKey.endsWith("A") ? "B" : "A") }));
  // The scheme is case-insensitive.
  t.is((await api.fetchJson("GET", path, { key: null, headers: { Authorization: `bearer ${api.apiKey}` } })).status, 200);
});

test("a key of workspace A on workspace B's paths is a 404 workspace_not_found with no data", async (t) => {
  for (const [method, path] of [
    ["GET", `/workspaces/${other.workspaceId}`],
    ["GET", `/workspaces/${other.workspaceId}/api-keys`],
    ["GET", `/workspaces/${other.workspaceId}/api-keys/${other.apiKeyId}`],
    ["DELETE", `/workspaces/${other.workspaceId}/api-keys/${other.apiKeyId}`],
    ["POST", `/workspaces/${other.workspaceId}/api-keys`],
    ["GET", "/workspaces/wsdoesnotexist/api-keys"],
  ] as const) {
    const r = await api.fetchJson(method, path, method === "POST" ? { body: { name: "steal" } } : {});
    t.is(r.status, 404, `${method} ${path}`);
    t.is(r.body.code, "workspace_not_found");
    t.deepEqual(Object.keys(r.body).sort(), ["code", "detail", "instance", "requestId", "status", "title", "type"]);
    t.false(r.text.includes(other.apiKey.slice(0, 12)), "no key prefix of the other workspace");
    t.false(r.text.includes("other team"));
  }
  // The other workspace's key was not revoked and no key was added to it.
  const keys = await query<{ n: string }>(
    api.db.url,
    `select count(*)::text as n from api_keys where workspace_id = $1 and revoked_at is null`,
    [other.workspaceId],
  );
  t.is(keys[0]!.n, "1");
  // A key of workspace A cannot read B's key through A's path either.
  const cross = await api.fetchJson("GET", `/workspaces/${api.workspaceId}/api-keys/${other.apiKeyId}`);
  t.is(cross.status, 404);
  t.is(cross.body.code, "api_key_not_found");
});

test("keys are stored as SHA-256 only and listed without secrets", async (t) => {
  const created = await api.fetchJson("POST", `/workspaces/${api.workspaceId}/api-keys`, { body: { name: "  ci  " } });
  t.is(created.status, 201, created.text);
  const secret: string = created.body.key;
  t.regex(secret, KEY_FORMAT);
  t.is(created.body.name, "ci");
  t.is(created.body.prefix, secret.slice(0, 12));
  t.is(created.body.workspaceId, api.workspaceId);
  t.is(created.headers.get("location"), `/api/v1/workspaces/${api.workspaceId}/api-keys/${created.body.id}`);
  t.is(created.headers.get("cache-control"), "no-store");

  const rows = await query(api.db.url, `select * from api_keys where id = $1`, [created.body.id]);
  t.is(rows.length, 1);
  const row = rows[0]!;
  t.is(row.hash, createHash("sha256").update(secret).digest("hex"));
  const secretPart = secret.slice("ws_sk_".length);
  for (const [col, value] of Object.entries(row)) {
    const s = value instanceof Date ? value.toISOString() : String(value);
    t.false(s.includes(secretPart), `column ${col} holds the secret`);
    t.false(s.includes(secretPart.slice(6, 26)), `column ${col} holds part of the secret`);
  }

  const list = await api.fetchJson("GET", `/workspaces/${api.workspaceId}/api-keys`);
  t.is(list.status, 200);
  t.false(list.text.includes(secretPart));
  const item = (list.body.data as { id: string }[]).find((k) => k.id === created.body.id)!;
  t.deepEqual(Object.keys(item).sort(), ["createdAt", "id", "lastUsedAt", "name", "prefix", "revokedAt", "workspaceId"]);

  // The new key works, and is what it says.
  const ws = await api.fetchJson("GET", `/workspaces/${api.workspaceId}`, { key: secret });
  t.is(ws.status, 200);
  t.is(ws.body.id, api.workspaceId);
});

test("a revoked key is refused at once; a key cannot revoke itself; revoking twice is harmless", async (t) => {
  const a = (await api.fetchJson("POST", `/workspaces/${api.workspaceId}/api-keys`, { body: { name: "a" } })).body;
  const b = (await api.fetchJson("POST", `/workspaces/${api.workspaceId}/api-keys`, { body: { name: "b" } })).body;
  t.is((await api.fetchJson("GET", `/workspaces/${api.workspaceId}`, { key: b.key })).status, 200);

  const self = await api.fetchJson("DELETE", `/workspaces/${api.workspaceId}/api-keys/${a.id}`, { key: a.key });
  t.is(self.status, 409);
  t.is(self.body.code, "cannot_revoke_current_key");
  t.is((await api.fetchJson("GET", `/workspaces/${api.workspaceId}`, { key: a.key })).status, 200, "still valid");

  const revoke = await api.fetchJson("DELETE", `/workspaces/${api.workspaceId}/api-keys/${b.id}`, { key: a.key });
  t.is(revoke.status, 204);
  assert401(t, await api.fetchJson("GET", `/workspaces/${api.workspaceId}`, { key: b.key }));
  t.is((await api.fetchJson("DELETE", `/workspaces/${api.workspaceId}/api-keys/${b.id}`, { key: a.key })).status, 204);

  const got = await api.fetchJson("GET", `/workspaces/${api.workspaceId}/api-keys/${b.id}`);
  t.truthy(got.body.revokedAt);
  const unknown = await api.fetchJson("DELETE", `/workspaces/${api.workspaceId}/api-keys/00000000-0000-4000-8000-000000000000`);
  t.is(unknown.status, 404);
  t.is(unknown.body.code, "api_key_not_found");
  const notUuid = await api.fetchJson("DELETE", `/workspaces/${api.workspaceId}/api-keys/not-a-uuid`);
  t.is(notUuid.status, 404);
});

test("lastUsedAt is written on use but at most once a minute", async (t) => {
  const k = (await api.fetchJson("POST", `/workspaces/${api.workspaceId}/api-keys`, { body: { name: "touch" } })).body;
  const lastUsed = async () =>
    (await query<{ last_used_at: Date | null }>(api.db.url, `select last_used_at from api_keys where id = $1`, [k.id]))[0]!.last_used_at;
  t.is(await lastUsed(), null);
  await api.fetchJson("GET", `/workspaces/${api.workspaceId}`, { key: k.key });
  const first = await lastUsed();
  t.truthy(first);
  await new Promise((r) => setTimeout(r, 20));
  await api.fetchJson("GET", `/workspaces/${api.workspaceId}`, { key: k.key });
  await api.fetchJson("GET", `/workspaces/${api.workspaceId}`, { key: k.key });
  t.is((await lastUsed())!.getTime(), first!.getTime(), "not rewritten within the minute");

  await query(api.db.url, `update api_keys set last_used_at = now() - interval '61 seconds' where id = $1`, [k.id]);
  const old = await lastUsed();
  await api.fetchJson("GET", `/workspaces/${api.workspaceId}`, { key: k.key });
  t.true((await lastUsed())!.getTime() > old!.getTime() + 60_000, "rewritten once the minute has passed");
});

test("platform admin keys and workspace keys do not stand in for each other", async (t) => {
  const asAdmin = await api.fetchJson("GET", `/workspaces/${api.workspaceId}/api-keys`, { key: api.adminKey });
  t.is(asAdmin.status, 403);
  t.is(asAdmin.body.code, "insufficient_scope");
  const asWorkspace = await api.fetchJson("GET", "/workspaces", { key: api.apiKey });
  t.is(asWorkspace.status, 403);
  t.is(asWorkspace.body.code, "insufficient_scope");
  assert401(t, await api.fetchJson("GET", "/workspaces", { key: `pa_sk_${"x".repeat(43)}` }));
  assert401(t, await api.fetchJson("GET", "/workspaces", { key: null }));
  const list = await api.fetchJson("GET", "/workspaces", { key: api.adminKey });
  t.is(list.status, 200);
  t.true((list.body.data as { id: string }[]).some((w) => w.id === other.workspaceId));

  const rows = await query(api.db.url, `select * from platform_admin_keys`);
  t.is(rows.length, 1);
  t.is(rows[0]!.hash, createHash("sha256").update(api.adminKey).digest("hex"));
  t.false(JSON.stringify(rows).includes(api.adminKey.slice(6)));
});

test("a platform admin creates a workspace: real labelled namespace, first key, idempotent retry by id", async (t) => {
  const r = await api.fetchJson("POST", "/workspaces", { key: api.adminKey, body: { name: "Payments" } });
  t.is(r.status, 201, r.text);
  t.regex(r.body.id, /^ws[a-z2-7]{10}$/);
  t.is(r.body.namespace, `berth-${r.body.id}`);
  t.regex(r.body.apiKey.key, KEY_FORMAT);
  const k = kube();
  t.teardown(() =>
    k.core.deleteNamespace({ name: r.body.namespace }).then(
      () => undefined,
      () => undefined,
    ),
  );
  const ns = await k.core.readNamespace({ name: r.body.namespace });
  t.is(ns.metadata?.labels?.["berth.dev/workspace"], r.body.id);
  t.is(ns.metadata?.labels?.["pod-security.kubernetes.io/enforce"], "restricted");
  // what a workspace's own kubectl could create there: a privileged pod is refused by the API
  // server; the same pod is admitted in a namespace without the label (the protection off)
  const privileged = (namespace: string) =>
    k.core.createNamespacedPod({
      namespace,
      dryRun: "All",
      body: {
        metadata: { name: "escape" },
        spec: { containers: [{ name: "c", image: "registry.invalid/x:1", securityContext: { privileged: true } }] },
      },
    });
  const refused = await privileged(r.body.namespace).then(
    () => undefined,
    (e: unknown) => e as { code?: number; body?: unknown },
  );
  t.is(refused?.code, 403, "refused by Pod Security admission");
  t.regex(String(refused?.body), /violates PodSecurity/);
  const plain = await testNamespace(k, "no-pss");
  t.teardown(() => deleteNamespace(k, plain));
  await t.notThrowsAsync(privileged(plain));

  const mine = await api.fetchJson("GET", `/workspaces/${r.body.id}`, { key: r.body.apiKey.key });
  t.is(mine.status, 200);
  t.is(mine.body.name, "Payments");

  // a retry of a create that succeeded: no second key for an existing workspace
  const retry = await api.fetchJson("POST", "/workspaces", { key: api.adminKey, body: { name: "Payments", id: r.body.id } });
  t.is(retry.status, 409, retry.text);
  t.is(retry.body.code, "workspace_exists");
  t.is(retry.body.apiKey, undefined);
  t.deepEqual(
    (await api.fetchJson("GET", `/workspaces/${r.body.id}/api-keys`, { key: r.body.apiKey.key })).body.data.map(
      (k: { name: string }) => k.name,
    ),
    ["initial"],
  );
  // a create interrupted before its first key (the row, no key): the retry finishes it
  const half = await api.services.workspaces.create(api.orm.em.fork(), { name: "Half" });
  t.teardown(() =>
    k.core.deleteNamespace({ name: half.workspace.namespace }).then(
      () => undefined,
      () => undefined,
    ),
  );
  const finished = await api.fetchJson("POST", "/workspaces", { key: api.adminKey, body: { name: "Half", id: half.workspace.id } });
  t.is(finished.status, 200, finished.text);
  t.regex(finished.body.apiKey.key, KEY_FORMAT);
  const clash = await api.fetchJson("POST", "/workspaces", { key: api.adminKey, body: { name: "Other", id: r.body.id } });
  t.is(clash.status, 409);
  t.is(clash.body.code, "workspace_exists");
  const badId = await api.fetchJson("POST", "/workspaces", { key: api.adminKey, body: { name: "x", id: "WS-1" } });
  t.is(badId.status, 422);
  t.deepEqual(
    (badId.body.errors as { field: string }[]).map((e) => e.field),
    ["body.id"],
  );
});

test("no key secret ever reaches the logs", async (t) => {
  await api.fetchJson("GET", `/workspaces/${api.workspaceId}`);
  await api.fetchJson("GET", `/workspaces/${api.workspaceId}`, { key: `ws_sk_${"Z".repeat(43)}` });
  const created = await api.fetchJson("POST", `/workspaces/${api.workspaceId}/api-keys`, { body: { name: "logged?" } });
  const all = JSON.stringify(api.logs);
  t.true(api.logs.length > 0);
  for (const secret of [api.apiKey, api.adminKey, created.body.key as string, "Z".repeat(43)]) t.false(all.includes(secret.slice(6)));
});

test("app-key routes use the AppKeyVerifier given to the server, scoped to the app's workspace", async (t) => {
  const appApi = await startApi({
    appKeyVerifier: (token) =>
      Promise.resolve(
        token === "app_good"
          ? { kind: "app" as const, workspaceId: appApi.workspaceId, appId: "web", keyId: "k1", store: null }
          : undefined,
      ),
    routes: [
      defineRoute({
        method: "post",
        path: "/workspaces/:workspaceId/ingest",
        operationId: "ingestProbe",
        summary: "t",
        tags: ["test"],
        auth: "app-key",
        params: z.object({ workspaceId: z.string() }).strict(),
        responses: { 200: z.object({ kind: z.string(), appId: z.string(), principal: z.null() }).strict() },
        handler: ({ caller, principal }) =>
          Promise.resolve({
            status: 200,
            body: { kind: caller!.kind, appId: caller!.kind === "app" ? caller!.appId : "", principal: principal ?? null },
          }),
      }),
    ],
  });
  t.teardown(() => appApi.stop());
  const path = `/workspaces/${appApi.workspaceId}/ingest`;
  const ok = await appApi.fetchJson("POST", path, { key: "app_good" });
  t.is(ok.status, 200, ok.text);
  t.deepEqual(ok.body, { kind: "app", appId: "web", principal: null });
  assert401(t, await appApi.fetchJson("POST", path, { key: "app_bad" }));
  assert401(t, await appApi.fetchJson("POST", path, { key: null }));
  assert401(t, await appApi.fetchJson("POST", path), "a workspace key is not an app key");
  const elsewhere = await appApi.fetchJson("POST", "/workspaces/wsaaaaaaaaaa/ingest", { key: "app_good" });
  t.is(elsewhere.status, 404);
  t.is(elsewhere.body.code, "workspace_not_found");
});

test("a server with app-key routes but no verifier refuses to build", (t) => {
  const route = defineRoute({
    method: "get",
    path: "/x",
    operationId: "x",
    summary: "t",
    tags: ["t"],
    auth: "app-key",
    responses: { 204: null },
    handler: () => Promise.resolve({ status: 204 }),
  });
  t.throws(
    () => buildServer({ config: api.config, orm: api.orm, logger: createLogger({ level: "silent" }), routes: [route], readiness: [] }),
    { message: /no appKeyVerifier/ },
  );
});
