// Benchmark of the services list, run by hand against the local control plane and PostgreSQL (./hack/up;
// stop its operator first — `kill $(cat .local/operator.pid)` — or it reconciles the bench Apps):
//   node hack/bench/api-list.ts [--apps 5000] [--requests 2000]
// Creates a workspace with N Apps, serves the real API in-process on 127.0.0.1, and measures
// GET .../apps?search=...&limit=20 latency (p50/p99) against GET /healthz on the same server
// (the HTTP floor) in the same run. Goal: list with search p99 under 20 ms.
import { parseArgs } from "node:util";
import { join } from "node:path";
import { pino } from "pino";
import { loadConfig } from "../../api/config.ts";
import { openOrm } from "../../api/db/orm.ts";
import { buildServices, composeRoutes, serviceReadiness, startServices, stopServices } from "../../api/main.ts";
import { buildServer, listen } from "../../api/server.ts";
import { API_VERSION } from "../../crds/schemas.ts";
import { loadKubeConfig } from "../../kube/client.ts";

const { values } = parseArgs({ options: { apps: { type: "string", default: "5000" }, requests: { type: "string", default: "2000" } } });
const N = Number(values.apps);
const R = Number(values.requests);
const root = join(import.meta.dirname, "../..");
// The list's latency is measured with one key at full speed (thousands of requests in a row), far
// above a key's default rate limit (docs/api.md "Limits"): the limit is off unless given.
const config = loadConfig({
  BERTH_RATE_LIMIT_API_PER_SECOND: "0",
  ...process.env,
  KUBECONFIG: process.env.KUBECONFIG ?? join(root, ".local/kubeconfig"),
  BERTH_API_PORT: "0",
  BERTH_LOG_LEVEL: "warn",
});
const logger = pino({ level: "warn" });
const orm = await openOrm(config.DATABASE_URL);
const kubeConfig = loadKubeConfig(config.KUBECONFIG);
const services = buildServices({ config, orm, logger, kubeConfig });

const { workspace } = await services.workspaces.create(orm.em.fork(), { name: `bench ${Date.now()}` });
const { secret } = await services.keys.create(orm.em.fork(), workspace.id, "bench");
const words = ["alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india", "juliet", "kilo", "lima"];
const t0 = performance.now();
let next = 0;
await Promise.all(
  Array.from({ length: 16 }, async () => {
    while (next < N) {
      const i = next++;
      const name = `${words[i % words.length]} ${words[(i * 7) % words.length]} service ${i}`;
      await services.kube.create(
        {
          apiVersion: API_VERSION,
          kind: "App",
          metadata: { name: `app-${i}`, namespace: workspace.namespace },
          spec: { name, slug: `app-${i}`, type: i % 3 ? "web" : "worker" },
        },
        "bench",
      );
    }
  }),
);
console.error(`created ${N} Apps in ${((performance.now() - t0) / 1000).toFixed(1)} s`);

await startServices(services);
const app = buildServer({
  config,
  orm,
  logger,
  routes: composeRoutes(services),
  readiness: serviceReadiness(services),
  keys: services.keys,
  adminKeys: services.adminKeys,
  appKeyVerifier: services.appKeyVerifier,
  operatorVerifier: services.operatorVerifier,
});
const server = await listen(app, { host: "127.0.0.1", port: 0, shutdownTimeoutMs: 5000, logger });
while (services.appCache.list(workspace.namespace).length < N) await new Promise((r) => setTimeout(r, 200));

async function measure(path: (i: number) => string): Promise<{ p50: number; p99: number; mean: number }> {
  const headers = { Authorization: `Bearer ${secret}` };
  for (let i = 0; i < 200; i++) await (await fetch(server.url + path(i), { headers })).arrayBuffer(); // warm-up
  const ms: number[] = [];
  for (let i = 0; i < R; i++) {
    const s = performance.now();
    const res = await fetch(server.url + path(i), { headers });
    await res.arrayBuffer();
    if (res.status !== 200) throw new Error(`${path(i)}: ${res.status}`);
    ms.push(performance.now() - s);
  }
  ms.sort((a, b) => a - b);
  const q = (p: number) => +ms[Math.min(ms.length - 1, Math.floor(p * ms.length))]!.toFixed(2);
  return { p50: q(0.5), p99: q(0.99), mean: +(ms.reduce((a, b) => a + b, 0) / ms.length).toFixed(2) };
}

const base = `/api/v1/workspaces/${workspace.id}/apps`;
const floor = await measure(() => "/healthz");
const search = await measure((i) => `${base}?search=${words[i % words.length]}%20${words[(i * 5) % words.length]}&limit=20`);
const page = await measure((i) => `${base}?page=${(i % 50) + 1}&limit=100&type=web`);
const stats = await measure(() => `${base}/stats`);
console.log(
  JSON.stringify(
    {
      apps: N,
      requests: R,
      healthzFloorMs: floor,
      listWithSearchMs: search,
      listPage100Ms: page,
      statsMs: stats,
      searchP99OverFloorP99: +(search.p99 / floor.p99).toFixed(2),
    },
    null,
    2,
  ),
);

await server.close();
await stopServices(services);
await services.kube.core.deleteNamespace({ name: workspace.namespace });
await orm.close();
