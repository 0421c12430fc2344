// Governance provisioning end to end: the operator, authenticated with a real
// ServiceAccount token checked by TokenReview, gets an App's store and key from the API before the
// first rollout, mounts them, re-provisions on request, and removes them; the key in the Secret
// works for ingestion and stops working when replaced. The operator calls the API as the chart
// runs it with api.internalTls: over the API's internal TLS listener, trusting a CA of its own
// (a throwaway one here) and nothing else.
import test from "ava";
import { randomUUID } from "node:crypto";
import https from "node:https";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type * as k8s from "@kubernetes/client-node";
import { API_VERSION } from "../../crds/schemas.ts";
import { KubeClient, type KubeObject } from "../../kube/client.ts";
import type { RunningOperator } from "../../operator/main.ts";
import { startTestOperator } from "../helpers/operator.ts";
import { startApi, type TestApi } from "../helpers/api.ts";
import { identity } from "../helpers/identities.ts";
import { eventually, kube } from "../helpers/kube.ts";
import { issueServerCertificate, makeCa } from "../helpers/certificates.ts";

const k = kube();
const client = new KubeClient(k.kc);
let api: TestApi;
let op: RunningOperator;
let tls = "";
/** TLS connections the internal listener accepted (the operator's). */
let tlsConnections = 0;

test.before(async () => {
  tls = mkdtempSync(join(tmpdir(), "berth-governance-tls-"));
  const ca = makeCa("berth-api internal CA");
  const serving = issueServerCertificate(ca, { ipAddresses: ["127.0.0.1"] });
  writeFileSync(join(tls, "tls.crt"), serving.cert);
  writeFileSync(join(tls, "tls.key"), serving.key, { mode: 0o600 });
  writeFileSync(join(tls, "ca.crt"), ca.cert);
  api = await startApi({
    env: {
      BERTH_GOVERNANCE_HOST: "127.0.0.1:9",
      BERTH_INTERNAL_TLS_PORT: "0",
      BERTH_INTERNAL_TLS_CERT_FILE: join(tls, "tls.crt"),
      BERTH_INTERNAL_TLS_KEY_FILE: join(tls, "tls.key"),
    },
  });
  api.internal!.server.on("secureConnection", () => tlsConnections++);
  // As the chart runs it: the operator's ServiceAccount and RBAC, its token checked by TokenReview,
  // sent to the internal TLS listener only.
  op = await startTestOperator({
    namespace: api.namespace,
    apiUrl: api.internal!.url,
    env: { BERTH_OPERATOR_API_CA_FILE: join(tls, "ca.crt"), BERTH_FORWARD_AUTH_URL: `${api.url}/api/v1/forward-auth` },
  });
});
test.after.always(async () => {
  await op?.stop();
  await api?.stop();
  if (tls) rmSync(tls, { recursive: true, force: true });
});

const apps = () => `/workspaces/${api.workspaceId}/apps`;
const gov = (app: string) => `/workspaces/${api.workspaceId}/governance/apps/${app}`;
const secretOf = (app: string) =>
  client.get<k8s.V1Secret & KubeObject>({ apiVersion: "v1", kind: "Secret", namespace: api.namespace, name: `${app}-governance` });
const decode = (s: k8s.V1Secret | undefined, key: string) =>
  s?.data?.[key] ? Buffer.from(s.data[key], "base64").toString("utf8") : undefined;
const keyIn = (conn: string) => /^govdb:\/\/(gov_sk_[A-Za-z0-9_-]+)@/.exec(conn)?.[1];
const trace = () => ({
  traceId: randomUUID(),
  input: "What is our refund policy?",
  output: "Refunds are accepted within 30 days.",
  model: "gpt-4o-mini",
  latency: 420,
  tokens: { prompt: 12, completion: 9, total: 21 },
  timestamp: new Date().toISOString(),
});
const ingest = (key: string) => api.fetchJson("POST", "/governance/traces", { key, body: trace() });

test.serial("the first rollout waits for the governance Secret, and the container gets both variables", async (t) => {
  const r = await api.fetchJson("POST", apps(), { body: { name: "Chat", slug: "chat", image: "registry.invalid/chat:1" } });
  t.is(r.status, 201, r.text);
  const d = await eventually(
    "the Deployment",
    () => client.get<k8s.V1Deployment & KubeObject>({ apiVersion: "apps/v1", kind: "Deployment", namespace: api.namespace, name: "chat" }),
    60_000,
  );
  const secret = await secretOf("chat");
  t.truthy(secret, "the Secret exists once the Deployment does");
  t.true(new Date(secret!.metadata.creationTimestamp!) <= new Date(d.metadata.creationTimestamp!), "Secret first");
  t.deepEqual(
    d.spec?.template.spec?.containers[0]?.envFrom?.map((e) => e.secretRef?.name),
    ["chat-governance"],
  );
  const conn = decode(secret, "GOVDB_CONNECTION")!;
  t.regex(conn, /^govdb:\/\/gov_sk_[A-Za-z0-9_-]{43}@127\.0\.0\.1:9\/[a-z0-9_]+$/);
  t.is(decode(secret, "GOVERNANCE_PROJECT"), "chat");
  t.true(tlsConnections > 0, "the operator provisioned through the API's internal TLS listener");
  const app = await client.get<KubeObject>({ apiVersion: API_VERSION, kind: "App", namespace: api.namespace, name: "chat" });
  t.true(app?.metadata.finalizers?.includes("berth.dev/governance"));
  await eventually(
    "the App to be active with GovernanceReady",
    async () => {
      const a = await client.get<KubeObject & { status?: { phase?: string; conditions?: { type: string; status: string }[] } }>({
        apiVersion: API_VERSION,
        kind: "App",
        namespace: api.namespace,
        name: "chat",
      });
      return a?.status?.phase === "active" && a.status.conditions?.some((c) => c.type === "GovernanceReady" && c.status === "True");
    },
    60_000,
  );
  const pods = await k.core.listNamespacedPod({ namespace: api.namespace, labelSelector: "berth.dev/app=chat" });
  t.deepEqual(
    pods.items[0]?.spec?.containers[0]?.envFrom?.map((e) => e.secretRef?.name),
    ["chat-governance"],
  );
});

test.serial("the key in the Secret ingests traces for its app", async (t) => {
  const key = keyIn(decode(await secretOf("chat"), "GOVDB_CONNECTION")!)!;
  const r = await ingest(key);
  t.true(r.status === 200 || r.status === 201, r.text);
  const list = await api.fetchJson("GET", `${gov("chat")}/traces`);
  t.is(list.status, 200, list.text);
  t.is(list.body.total, 1);
  const state = await api.fetchJson("GET", `${apps()}/chat/pipeline-state`);
  t.not(state.body.harbor.status, "not_provisioned");
});

test.serial("a forced re-provision mints a new key into the Secret and rolls the pods; the old key stops working", async (t) => {
  const before = decode(await secretOf("chat"), "GOVDB_CONNECTION")!;
  const r = await api.fetchJson("POST", `${gov("chat")}/provision`);
  t.is(r.status, 200, r.text);
  t.regex(r.body.connectionString, /^govdb:\/\/\*+@/);
  const after = await eventually(
    "a new key in the Secret",
    async () => {
      const c = decode(await secretOf("chat"), "GOVDB_CONNECTION");
      return c && c !== before ? c : undefined;
    },
    60_000,
  );
  t.is((await ingest(keyIn(before)!)).status, 401);
  const ok = await ingest(keyIn(after)!);
  t.true(ok.status === 200 || ok.status === 201, ok.text);
  const d = await eventually(
    "the pod template to carry generation 2",
    async () => {
      const d = await client.get<k8s.V1Deployment & KubeObject>({
        apiVersion: "apps/v1",
        kind: "Deployment",
        namespace: api.namespace,
        name: "chat",
      });
      return d?.spec?.template.metadata?.annotations?.["berth.dev/governance-generation"] === "2" ? d : undefined;
    },
    60_000,
  );
  t.truthy(d);
});

test.serial("de-provisioning removes the Secret and the variables", async (t) => {
  const r = await api.fetchJson("DELETE", `${gov("chat")}/provision`);
  t.is(r.status, 204, r.text);
  await eventually("the Secret to go", async () => !(await secretOf("chat")), 60_000);
  const d = await eventually(
    "envFrom to go",
    async () => {
      const d = await client.get<k8s.V1Deployment & KubeObject>({
        apiVersion: "apps/v1",
        kind: "Deployment",
        namespace: api.namespace,
        name: "chat",
      });
      return d && !d.spec?.template.spec?.containers[0]?.envFrom ? d : undefined;
    },
    60_000,
  );
  t.truthy(d);
});

test.serial("a permanently deleted App has its store dropped before it goes", async (t) => {
  await api.fetchJson("POST", apps(), { body: { name: "Gone", slug: "gone", image: "registry.invalid/gone:1" } });
  const key = keyIn(await eventually("the Secret", async () => decode(await secretOf("gone"), "GOVDB_CONNECTION"), 60_000))!;
  t.true([200, 201].includes((await ingest(key)).status));
  t.is((await api.fetchJson("DELETE", `${apps()}/gone/permanent`)).status, 204);
  await eventually(
    "the App to be gone (finalizer released)",
    async () => !(await client.get({ apiVersion: API_VERSION, kind: "App", namespace: api.namespace, name: "gone" })),
    60_000,
  );
  t.is((await ingest(key)).status, 401, "the store and its key are gone");
});

test("with the internal TLS listener, operator routes refuse plain HTTP before looking at the token", async (t) => {
  const { token } = await identity("operator");
  const body = { namespace: "not-a-workspace", appName: "x", appUid: randomUUID(), generation: 1 };
  // the operator's own token, on the plain listener: refused as such, the token never reviewed
  const plain = await api.fetchJson("POST", "/internal/governance/provision", { key: token, body });
  t.is(plain.status, 403, plain.text);
  t.is(plain.body.code, "tls_required");
  // the same request over the internal listener is let through (and answered for what it asks)
  const overTls = await new Promise<{ status: number; text: string }>((resolve, reject) => {
    const req = https.request(
      new URL("/api/v1/internal/governance/provision", api.internal!.url),
      {
        method: "POST",
        ca: readFileSync(join(tls, "ca.crt")),
        headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
      },
      (res) => {
        let text = "";
        res.setEncoding("utf8").on("data", (c: string) => (text += c));
        res.on("end", () => resolve({ status: res.statusCode!, text }));
      },
    );
    req.on("error", reject);
    req.end(JSON.stringify(body));
  });
  t.is(overTls.status, 404, overTls.text);
  t.regex(overTls.text, /workspace_not_found/);
});
