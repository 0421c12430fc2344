// Private services and share links through the real ingress: Apps of the sample image on
// the real node, reconciled by the operator under its ServiceAccount, a private one guarded by the
// Traefik ForwardAuth Middleware the operator writes, Traefik calling this API's forward-auth
// endpoint over the node's bridge. What a viewer sees: refused without a share, let in with one,
// the cookie working on later requests, refused on the very next request after a revocation; a
// public App served with no check. Then the benchmark of the check (hack/bench/forward-auth.ts).
import test from "ava";
import { KubeClient, type KubeObject } from "../../kube/client.ts";
import type { TestApi } from "../helpers/api.ts";
import { viaIngress as ingressRequest, type Answer, type IngressRequest } from "../helpers/ingress.ts";
import { eventually, kube } from "../helpers/kube.ts";
import { need, startOnNode, type OnNode } from "../helpers/e2e.ts";
import { benchForwardAuth, formatBench, interleaved, pct, warmUp } from "../../hack/bench/forward-auth.ts";
import { spawn } from "node:child_process";
import { once } from "node:events";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";

const REPO = fileURLToPath(new URL("../..", import.meta.url));

const INGRESS = need("BERTH_INGRESS_URL");
const SAMPLE = need("BERTH_SAMPLE_IMAGE");
const NODE_IP = need("BERTH_NODE_IP");
const HOST_API_PORT = need("BERTH_HOST_API_PORT");
const DOMAIN = "apps.shares-e2e.local";

const client = new KubeClient(kube().kc);
let api: TestApi;
let node: OnNode | undefined;

test.before(async () => {
  node = await startOnNode({
    domain: DOMAIN,
    governance: false,
    apiEnv: { BERTH_SHARE_COOKIE_KEY: "an-e2e-share-cookie-key-of-32-chars-or-more" },
    // Traefik runs in the node's network namespace: it reaches this API over the node's bridge.
    operatorEnv: { BERTH_FORWARD_AUTH_URL: `http://${NODE_IP}:${HOST_API_PORT}/api/v1/forward-auth` },
  });
  api = node.api;
});
test.after.always(async () => {
  await node?.stop();
});

const apps = () => `/workspaces/${api.workspaceId}/apps`;
const viaIngress = (slug: string, path = "/", opts: IngressRequest = {}): Promise<Answer> =>
  ingressRequest(INGRESS, `${slug}.${DOMAIN}`, path, opts);
const HELLO = /^Hello from Berth's sample service/;

async function active(id: string): Promise<void> {
  await eventually(
    `${id} to be active`,
    async () => (await api.fetchJson("GET", `${apps()}/${id}`)).body?.status === "active",
    240_000,
    1000,
  );
}

let cookie = "";
let shareId = "";

test.serial("a private App is refused through the ingress without a share, and a public App of the same image is served", async (t) => {
  for (const [slug, visibility] of [
    ["secret", "private"],
    ["open", "public"],
  ] as const) {
    const r = await api.fetchJson("POST", apps(), {
      body: { name: slug, slug, image: SAMPLE, visibility, cpuLimitMillicores: 100, memoryLimitMi: 128 },
    });
    t.is(r.status, 201, r.text);
  }
  await Promise.all([active("secret"), active("open")]);
  const mw = await client.get<KubeObject & { spec: { forwardAuth: { address: string } } }>({
    apiVersion: "traefik.io/v1alpha1",
    kind: "Middleware",
    namespace: api.namespace,
    name: "secret",
  });
  t.is(mw?.spec.forwardAuth.address, `http://${NODE_IP}:${HOST_API_PORT}/api/v1/forward-auth/${api.namespace}/secret`);
  const openMw = await client.get<KubeObject & { spec: Record<string, unknown> }>({
    apiVersion: "traefik.io/v1alpha1",
    kind: "Middleware",
    namespace: api.namespace,
    name: "open",
  });
  t.deepEqual(Object.keys(openMw?.spec ?? {}), ["headers"], "no check for a public App: only its X-Berth-* headers are dropped");
  const refused = await eventually(
    "the private App's route, guarded",
    async () => {
      const x = await viaIngress("secret");
      return x.status === 403 ? x : undefined;
    },
    60_000,
    500,
  );
  t.is(JSON.parse(refused.text).code, "share_no_grant");
  t.notRegex(refused.text, HELLO);
  const open = await eventually(
    "the public App served",
    async () => {
      const x = await viaIngress("open");
      return x.status === 200 ? x : undefined;
    },
    60_000,
    500,
  );
  t.regex(open.text, HELLO);
  t.is((await viaIngress("secret", "/?berth_share=shr_sk_" + "x".repeat(43))).status, 403, "a forged token is refused");
  // A client's own X-Berth-* headers never reach an App, public ones included: an App may trust them.
  const forged = { "X-Berth-User": "ceo@corp.example", "X-Berth-Share": "shr_forged", "X-Sample-Probe": "passed" };
  const whoami = await viaIngress("open", "/whoami", { headers: forged });
  t.is(whoami.status, 200, whoami.text);
  t.deepEqual(JSON.parse(whoami.text), { user: null, share: null, via: "passed" }, "the probe header passes, Berth's are removed");
  t.is(
    (await viaIngress("secret", "/whoami", { headers: { ...forged, "X-Original-URL": `http://open.${DOMAIN}/` } })).status,
    403,
    "nor does a client's X-Original-URL change what is checked",
  );
  t.is((await viaIngress("secret", "/", { headers: { Cookie: "berth_share=eyJ4IjoxfQ.AAAA" } })).status, 403, "a forged cookie is refused");
});

test.serial(
  "with a share link the viewer gets a cookie on the App's host, is sent back without the token, and the cookie works on later requests",
  async (t) => {
    const s = await api.fetchJson("POST", `${apps()}/secret/public-shares`, { body: {} });
    t.is(s.status, 201, s.text);
    shareId = s.body.id;
    const link = new URL(s.body.url);
    const first = await viaIngress("secret", `/${link.search}`);
    t.is(first.status, 302, first.text);
    t.is(first.headers.location, `http://secret.${DOMAIN}/`);
    const setCookie = ([] as string[]).concat(first.headers["set-cookie"] ?? []);
    t.is(setCookie.length, 1);
    t.regex(setCookie[0]!, /^berth_share=[^;]+; Path=\/; Max-Age=\d+; HttpOnly; SameSite=Lax$/);
    cookie = setCookie[0]!.split(";")[0]!;
    const served = await viaIngress("secret", "/", { headers: { Cookie: cookie } });
    t.is(served.status, 200, served.text);
    t.regex(served.text, HELLO);
    for (let i = 0; i < 5; i++) t.regex((await viaIngress("secret", "/", { headers: { Cookie: cookie } })).text, HELLO);
    const seen = await viaIngress("secret", "/whoami", {
      headers: { Cookie: cookie, "X-Berth-User": "ceo@corp.example", "X-Berth-Share": "shr_forged" },
    });
    t.deepEqual(
      JSON.parse(seen.text),
      { user: null, share: shareId, via: null },
      "the App sees the share Berth checked, and no viewer (no sign-in)",
    );
    const tampered = cookie.slice(0, -2) + (cookie.endsWith("AA") ? "BB" : "AA");
    t.is((await viaIngress("secret", "/", { headers: { Cookie: tampered } })).status, 403, "a tampered cookie is refused");
  },
);

// The benchmark of the forward-auth check's cost, small here (every request must pass); by hand with more requests:
// BERTH_BENCH_REQUESTS=1000 ./hack/test test/e2e/shares.test.ts (the whole file: the first two tests make the Apps and the cookie)
test.serial("the forward-auth check's added latency through the ingress, against the public App in the same run (benchmark)", async (t) => {
  const n = Number(process.env.BERTH_BENCH_REQUESTS ?? 100);
  const r = await benchForwardAuth({
    ingress: INGRESS,
    privateHost: `secret.${DOMAIN}`,
    publicHost: `open.${DOMAIN}`,
    cookie,
    forwardAuthUrl: `${api.url}/api/v1/forward-auth/${api.namespace}/secret`,
    forwardAuth: api.services.forwardAuth,
    namespace: api.namespace,
    app: "secret",
    server: api.server.server,
    requests: n,
  });
  t.log(formatBench(r));
  // Figures only (tests never assert on time): every private request passed the check once.
  t.is(r.berth.n, n, "Traefik asked the API once per request to the private App");
});

test.serial("revoking the share refuses the viewer's very next request through the ingress", async (t) => {
  t.is((await viaIngress("secret", "/", { headers: { Cookie: cookie } })).status, 200);
  t.is((await api.fetchJson("DELETE", `${apps()}/secret/public-shares/${shareId}`)).status, 204);
  const next = await viaIngress("secret", "/", { headers: { Cookie: cookie } });
  t.is(next.status, 403);
  t.is(JSON.parse(next.text).code, "share_share_revoked");
  t.regex((await viaIngress("open")).text, HELLO, "the public App is untouched");
});

test.serial("making the App public removes the check; private again restores it", async (t) => {
  t.is((await api.fetchJson("PATCH", `${apps()}/secret`, { body: { visibility: "public" } })).status, 200);
  await eventually("served without a share", async () => (await viaIngress("secret")).status === 200, 60_000, 500);
  t.deepEqual(
    Object.keys(
      (
        await client.get<KubeObject & { spec: Record<string, unknown> }>({
          apiVersion: "traefik.io/v1alpha1",
          kind: "Middleware",
          namespace: api.namespace,
          name: "secret",
        })
      )?.spec ?? {},
    ),
    ["headers"],
  );
  t.is((await api.fetchJson("PATCH", `${apps()}/secret`, { body: { visibility: "private" } })).status, 200);
  await eventually("guarded again", async () => (await viaIngress("secret")).status === 403, 60_000, 500);
  t.pass();
});

// The same measurement with the API in a process of its own, as the chart runs it: the test
// process also holds the operator and the benchmark's client, which keep its event loop busy and
// show up in the in-process figures. The in-process server is closed and `node api/main.ts` takes
// over the port Traefik calls (same database, key and identity); Berth time is the API's own
// access-log durationMs of each forward-auth request. Figures only.
test.serial("the check's Berth time with the API in its own process, as in production (benchmark)", async (t) => {
  t.timeout(170_000);
  const n = Number(process.env.BERTH_BENCH_REQUESTS ?? 100);
  const s = await api.fetchJson("POST", `${apps()}/secret/public-shares`, { body: {} });
  t.is(s.status, 201, s.text);
  const first = await viaIngress("secret", `/${new URL(s.body.url as string).search}`);
  t.is(first.status, 302, first.text);
  const viewer = ([] as string[]).concat(first.headers["set-cookie"] ?? [])[0]!.split(";")[0]!;

  await api.server.close();
  const lines: string[] = [];
  const c = api.config;
  const child = spawn(process.execPath, ["api/main.ts"], {
    cwd: REPO,
    stdio: ["ignore", "pipe", "pipe"],
    env: {
      PATH: process.env.PATH ?? "",
      DATABASE_URL: c.DATABASE_URL,
      KUBECONFIG: c.KUBECONFIG ?? "",
      BERTH_API_HOST: c.BERTH_API_HOST,
      BERTH_API_PORT: String(c.BERTH_API_PORT),
      BERTH_BASE_DOMAIN: c.BERTH_BASE_DOMAIN,
      BERTH_GOVERNANCE_HOST: c.BERTH_GOVERNANCE_HOST,
      BERTH_SHARE_COOKIE_KEY: c.BERTH_SHARE_COOKIE_KEY ?? "",
      BERTH_LOG_LEVEL: "info",
    },
  });
  const exited = once(child, "exit");
  t.teardown(async () => {
    if (child.exitCode === null) {
      child.kill("SIGTERM");
      await exited;
    }
  });
  createInterface({ input: child.stdout }).on("line", (l) => lines.push(l));
  child.stderr.resume();
  await eventually(
    "the API's own process serves the check",
    async () => (await viaIngress("secret", "/", { headers: { Cookie: viewer } })).status === 200,
    60_000,
    500,
  );

  const pair = { ingress: INGRESS, privateHost: `secret.${DOMAIN}`, publicHost: `open.${DOMAIN}`, cookie: viewer };
  await warmUp(pair);
  await new Promise((r) => setTimeout(r, 300)); // the warm-up's log lines
  const from = lines.length;
  const { pub, priv } = await interleaved(pair, n);
  await new Promise((r) => setTimeout(r, 200)); // its last log lines
  const durations = lines
    .slice(from)
    .map((l) => JSON.parse(l) as { msg?: string; route?: string; durationMs?: number })
    .filter((l) => l.msg === "request" && l.route?.includes("forward-auth") === true)
    .map((l) => l.durationMs!);
  const f = (x: number) => `${x.toFixed(3)} ms`;
  const [pu, pr, b] = [pct(pub), pct(priv), pct(durations)];
  t.log(
    `API in its own process, through the ingress (n=${n} each): public p50 ${f(pu.p50)} p99 ${f(pu.p99)}; private p50 ${f(pr.p50)} p99 ${f(pr.p99)}; added p50 ${f(pr.p50 - pu.p50)} p99 ${f(pr.p99 - pu.p99)}`,
  );
  t.log(
    `Berth time (the API's access-log durationMs of each check, n=${b.n}): p50 ${f(b.p50)} p99 ${f(b.p99)}; goal p99 < 1 ms: ${b.p99 < 1 ? "MET" : "MISSED"}`,
  );
  t.is(b.n, n, "the API's own process answered every check once");
  child.kill("SIGTERM");
  await exited;
});
