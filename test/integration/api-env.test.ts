// A service's environment variables: REST API → the <app>-env Secret (owned by the
// App) → the operator mounts it and rolls the Deployment. Real API server and PostgreSQL; the API
// and the operator run under the chart's ServiceAccounts, so a missing grant fails here.
import test from "ava";
import type * as k8s from "@kubernetes/client-node";
import { API_VERSION } from "../../crds/schemas.ts";
import { ENV_HASH_ANNOTATION } from "../../crds/app.ts";
import { ENV_LIMITS } from "../../api/apps/schemas.ts";
import { KubeClient, type KubeObject } from "../../kube/client.ts";
import type { RunningOperator } from "../../operator/main.ts";
import { startTestOperator } from "../helpers/operator.ts";
import { startApi, type TestApi } from "../helpers/api.ts";
import { eventually, kube } from "../helpers/kube.ts";

const k = kube();
const client = new KubeClient(k.kc);
let api: TestApi;
let op: RunningOperator;
const apps = () => `/workspaces/${api.workspaceId}/apps`;
const env = (app = "shop") => `${apps()}/${app}/env`;
/** A secret value: it must never come back, in an answer or a log line. */
const TOKEN = "tok-5ecret-9f2c81e0";

type Secret = KubeObject & { data?: Record<string, string> };
const secretOf = (name: string) => client.get<Secret>({ apiVersion: "v1", kind: "Secret", namespace: api.namespace, name });
// Plain JSON (the objects client), so that deepEqual compares values, not client-node's classes.
const templateOf = async (name = "shop"): Promise<k8s.V1PodTemplateSpec> =>
  (await client.get<KubeObject & k8s.V1Deployment>({ apiVersion: "apps/v1", kind: "Deployment", namespace: api.namespace, name }))!.spec!
    .template;
const decode = (b64: string | undefined) => (b64 === undefined ? undefined : Buffer.from(b64, "base64").toString("utf8"));
const until = (id: string, status: string) =>
  eventually(`${id} to be ${status}`, async () => (await api.fetchJson("GET", `${apps()}/${id}`)).body?.status === status, 60_000);

test.before(async () => {
  api = await startApi({ env: { BERTH_BASE_DOMAIN: "apps.test.local" } });
  op = await startTestOperator({ namespace: api.namespace, apiUrl: api.url, env: { BERTH_BASE_DOMAIN: "apps.test.local" } });
  const r = await api.fetchJson("POST", apps(), { body: { name: "Shop", slug: "shop", image: "registry.invalid/shop:1" } });
  if (r.status !== 201) throw new Error(r.text);
  await until("shop", "active");
});
test.after.always(async () => {
  await op?.stop();
  await api?.stop();
});

test.serial("PATCH sets many at once; the list shows plain values and hides secret ones; the Secret is the App's", async (t) => {
  const r = await api.fetchJson("PATCH", env(), {
    body: { set: { GREETING: { value: "hej", secret: false }, API_TOKEN: TOKEN, EMPTY: { value: "", secret: false } } },
  });
  t.is(r.status, 200, r.text);
  const want = [
    { name: "API_TOKEN", value: null, secret: true },
    { name: "EMPTY", value: "", secret: false },
    { name: "GREETING", value: "hej", secret: false },
  ];
  t.deepEqual(r.body.data, want);
  t.is(r.headers.get("cache-control"), "no-store");
  const list = await api.fetchJson("GET", env());
  t.is(list.status, 200);
  t.deepEqual(list.body.data, want);
  t.false(list.text.includes(TOKEN) || r.text.includes(TOKEN));

  const s = await secretOf("shop-env");
  const app = await client.get({ apiVersion: API_VERSION, kind: "App", namespace: api.namespace, name: "shop" });
  t.truthy(s);
  t.is(decode(s!.data?.API_TOKEN), TOKEN, "stored in the Secret, not in the App");
  t.false(JSON.stringify(app).includes(TOKEN));
  t.deepEqual(
    s!.metadata.ownerReferences?.map((o) => ({ kind: o.kind, name: o.name, uid: o.uid, controller: o.controller })),
    [{ kind: "App", name: "shop", uid: app!.metadata.uid, controller: true }],
  );
});

test.serial("the operator mounts the variables before the governance Secret, and a change of a value rolls the Deployment", async (t) => {
  const before = await eventually(
    "the env hash on the pod template",
    async () => {
      const tpl = await templateOf();
      return tpl.metadata?.annotations?.[ENV_HASH_ANNOTATION] ? tpl : undefined;
    },
    30_000,
  );
  t.deepEqual(
    before.spec!.containers[0]!.envFrom,
    [{ secretRef: { name: "shop-env", optional: true } }, { secretRef: { name: "shop-governance" } }],
    "the governance variables come last: they win",
  );
  const r = await api.fetchJson("PUT", `${env()}/GREETING`, { body: { value: "hallo" } });
  t.is(r.status, 200, r.text);
  t.deepEqual(r.body, { name: "GREETING", value: "hallo", secret: false }, "the flag was kept");
  const after = await eventually(
    "a new pod template",
    async () => {
      const tpl = await templateOf();
      const h = tpl.metadata?.annotations?.[ENV_HASH_ANNOTATION];
      return h && h !== before.metadata!.annotations![ENV_HASH_ANNOTATION] ? tpl : undefined;
    },
    30_000,
  );
  t.truthy(after);
  await until("shop", "active");

  // The same value again writes nothing and rolls nothing.
  const rv = (await secretOf("shop-env"))!.metadata.resourceVersion;
  t.is((await api.fetchJson("PUT", `${env()}/GREETING`, { body: { value: "hallo" } })).status, 200);
  t.is((await secretOf("shop-env"))!.metadata.resourceVersion, rv);

  const created = await api.fetchJson("PUT", `${env()}/FEATURE_X`, { body: { value: "on" } });
  t.is(created.status, 201, created.text);
  t.is(created.headers.get("location"), `/api/v1${env()}/FEATURE_X`);
  t.deepEqual(created.body, { name: "FEATURE_X", value: null, secret: true }, "a new variable is secret unless told otherwise");
});

test.serial("one variable: GET, DELETE (404 when not set); PATCH's unset of a name that is not set is no error", async (t) => {
  const one = await api.fetchJson("GET", `${env()}/API_TOKEN`);
  t.is(one.status, 200, one.text);
  t.deepEqual(one.body, { name: "API_TOKEN", value: null, secret: true });
  t.is((await api.fetchJson("DELETE", `${env()}/API_TOKEN`)).status, 204);
  const gone = await api.fetchJson("GET", `${env()}/API_TOKEN`);
  t.is(gone.status, 404);
  t.is(gone.body.code, "env_var_not_found");
  t.is((await api.fetchJson("DELETE", `${env()}/API_TOKEN`)).status, 404);
  const unset = await api.fetchJson("PATCH", env(), { body: { unset: ["API_TOKEN", "FEATURE_X"] } });
  t.is(unset.status, 200, unset.text);
  t.deepEqual(
    unset.body.data.map((v: { name: string }) => v.name),
    ["EMPTY", "GREETING"],
  );
  t.false("API_TOKEN" in ((await secretOf("shop-env"))!.data ?? {}));
});

test.serial(
  "names the operator owns, BERTH_* and malformed names are refused with 422 naming each field, and nothing is written",
  async (t) => {
    const rv = (await secretOf("shop-env"))!.metadata.resourceVersion;
    const r = await api.fetchJson("PATCH", env(), {
      body: {
        set: {
          GOVDB_CONNECTION: "govdb://x@evil/db",
          GOVERNANCE_PROJECT: "other",
          PORT: "1",
          BERTH_GOVERNANCE: "off",
          "bad-name": "x",
          FINE: "y",
        },
      },
    });
    t.is(r.status, 422, r.text);
    t.regex(r.headers.get("content-type") ?? "", /^application\/problem\+json/);
    t.is(r.body.code, "validation_failed");
    t.deepEqual(r.body.errors.map((e: { field: string }) => e.field).sort(), [
      "body.set.BERTH_GOVERNANCE",
      "body.set.GOVDB_CONNECTION",
      "body.set.GOVERNANCE_PROJECT",
      "body.set.PORT",
      "body.set.bad-name",
    ]);
    t.regex(
      r.body.errors.find((e: { field: string }) => e.field === "body.set.GOVDB_CONNECTION").message,
      /set by Berth and cannot be set or overridden/,
    );
    const put = await api.fetchJson("PUT", `${env()}/PORT`, { body: { value: "9999" } });
    t.is(put.status, 422);
    t.deepEqual(
      put.body.errors.map((e: { field: string }) => e.field),
      ["params.name"],
    );
    t.is((await api.fetchJson("DELETE", `${env()}/GOVDB_CONNECTION`)).status, 422);
    t.is((await secretOf("shop-env"))!.metadata.resourceVersion, rv, "all or nothing: FINE was not written either");
  },
);

test.serial("limits: a value's size, the number of variables and the total size", async (t) => {
  const big = await api.fetchJson("PUT", `${env()}/BIG`, { body: { value: "x".repeat(ENV_LIMITS.maxValueBytes + 1) } });
  t.is(big.status, 422);
  t.deepEqual(
    big.body.errors.map((e: { field: string }) => e.field),
    ["body.value"],
  );
  const many = Object.fromEntries(Array.from({ length: ENV_LIMITS.maxVariables }, (_, i) => [`V${i}`, "1"]));
  const tooMany = await api.fetchJson("PATCH", env(), { body: { set: many } });
  t.is(tooMany.status, 422, tooMany.text);
  t.is(tooMany.body.code, "env_limit_exceeded");
  t.like(tooMany.body.details, { limit: ENV_LIMITS.maxVariables, count: ENV_LIMITS.maxVariables + 2 });
  const chunk = "y".repeat(ENV_LIMITS.maxValueBytes);
  const heavy = Object.fromEntries(
    Array.from({ length: Math.ceil(ENV_LIMITS.maxTotalBytes / ENV_LIMITS.maxValueBytes) }, (_, i) => [`H${i}`, chunk]),
  );
  const tooBig = await api.fetchJson("PATCH", env(), { body: { set: heavy } });
  t.is(tooBig.status, 422, tooBig.text.slice(0, 300));
  t.is(tooBig.body.code, "env_limit_exceeded");
  t.deepEqual(
    (await api.fetchJson("GET", env())).body.data.map((v: { name: string }) => v.name),
    ["EMPTY", "GREETING"],
  );
});

test.serial("concurrent writers do not lose each other's changes", async (t) => {
  const puts = Array.from({ length: 8 }, (_, i) => api.fetchJson("PUT", `${env()}/P${i}`, { body: { value: String(i), secret: false } }));
  const patches = Array.from({ length: 4 }, (_, i) =>
    api.fetchJson("PATCH", env(), { body: { set: { [`Q${i}`]: { value: String(i), secret: false } } } }),
  );
  const answers = await Promise.all([...puts, ...patches]);
  t.deepEqual(
    answers.map((a) => a.status).filter((s) => s !== 200 && s !== 201),
    [],
    answers
      .map((a) => a.text)
      .join("\n")
      .slice(0, 500),
  );
  const list = (await api.fetchJson("GET", env())).body.data as { name: string; value: string }[];
  for (let i = 0; i < 8; i++) t.is(list.find((v) => v.name === `P${i}`)?.value, String(i), `P${i}`);
  for (let i = 0; i < 4; i++) t.is(list.find((v) => v.name === `Q${i}`)?.value, String(i), `Q${i}`);
});

test.serial("a Secret of that name that is not the App's is never taken over nor mounted", async (t) => {
  const r = await api.fetchJson("POST", apps(), { body: { name: "Lonely", slug: "lonely", image: "registry.invalid/lonely:1" } });
  t.is(r.status, 201, r.text);
  await client.create(
    {
      apiVersion: "v1",
      kind: "Secret",
      metadata: {
        name: "lonely-env",
        namespace: api.namespace,
        labels: { "app.kubernetes.io/managed-by": "berth", "berth.dev/app": "lonely" },
      },
      data: { X: Buffer.from("theirs").toString("base64") },
    } as KubeObject,
    "test",
  );
  const put = await api.fetchJson("PUT", `${env("lonely")}/A`, { body: { value: "1" } });
  t.is(put.status, 409, put.text);
  t.is(put.body.code, "env_secret_conflict");
  t.is((await api.fetchJson("GET", env("lonely"))).status, 409);
  await until("lonely", "active");
  const tpl = await templateOf("lonely");
  t.false(JSON.stringify(tpl.spec!.containers[0]!.envFrom ?? []).includes("lonely-env"));
  t.is(decode((await secretOf("lonely-env"))!.data?.X), "theirs", "untouched");
});

test.serial("another workspace's key gets 404 and nothing of this workspace's variables", async (t) => {
  const other = await api.createWorkspace("intruder");
  for (const [method, path, body] of [
    ["GET", env(), undefined],
    ["PATCH", env(), { set: { A: "1" } }],
    ["GET", `${env()}/GREETING`, undefined],
    ["PUT", `${env()}/A`, { value: "1" }],
    ["DELETE", `${env()}/GREETING`, undefined],
  ] as const) {
    const r = await api.fetchJson(method, path, { key: other.apiKey, ...(body ? { body } : {}) });
    t.is(r.status, 404, `${method} ${path}`);
    t.false(r.text.includes("hallo"));
  }
  t.is((await api.fetchJson("GET", `${env()}/GREETING`)).body.value, "hallo", "untouched");
  const unknown = await api.fetchJson("GET", env("nope"));
  t.is(unknown.status, 404);
  t.is(unknown.body.code, "app_not_found");
  t.is((await api.fetchJson("GET", env(), { key: null })).status, 401);
});

test.serial("permanent delete removes the service's variables with it", async (t) => {
  const r = await api.fetchJson("POST", apps(), { body: { name: "Gone", slug: "gone", image: "registry.invalid/gone:1" } });
  t.is(r.status, 201, r.text);
  t.is((await api.fetchJson("PUT", `${env("gone")}/A`, { body: { value: "1" } })).status, 201);
  t.truthy(await secretOf("gone-env"));
  t.is((await api.fetchJson("DELETE", `${apps()}/gone/permanent`)).status, 204);
  await eventually("the env Secret to be collected", async () => !(await secretOf("gone-env")), 90_000);
  t.pass();
});

test.serial("secret values are never logged", (t) => {
  t.true(api.logs.length > 0);
  t.false(JSON.stringify(api.logs).includes(TOKEN));
});

test("the OpenAPI document describes every variables endpoint", async (t) => {
  const doc = (await api.fetchJson("GET", "/api/v1/openapi.json", { key: null })).body;
  for (const op of ["listEnvVars", "updateEnvVars", "getEnvVar", "setEnvVar", "deleteEnvVar"])
    t.true(JSON.stringify(doc.paths).includes(`"operationId":"${op}"`), op);
  t.truthy(doc.components.schemas.EnvVar);
  t.truthy(doc.components.schemas.UpdateEnvRequest);
});
