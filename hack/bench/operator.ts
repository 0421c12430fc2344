// Benchmark of the operator, run by hand against the local control plane (./hack/up first):
//   node hack/bench/operator.ts [--apps 500] [--idle-seconds 60]
// 1. floor:    the same child objects the operator would write, applied directly (no operator),
//              until every Deployment has its replica Ready
// 2. operator: as many App CRs created at once, with the operator (a separate process) running,
//              until every App reports phase active
// 3. idle:     the operator's CPU time, RSS and the number of writes it causes while nothing
//              changes (resync forced every 20 s during the window)
// Prints the ratio operator/floor (goal: within 1.5x) and the idle figures (goal: no writes, <150 MiB),
// and the operator's own requests to the API server (berth_kube_requests_total) during the burst,
// per App, by verb and resource.
import { spawn } from "node:child_process";
import { readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { parseArgs } from "node:util";
import * as k8s from "@kubernetes/client-node";
import { API_VERSION, AppSpec } from "../../crds/schemas.ts";
import { KubeClient, OPERATOR_FIELD_MANAGER, loadKubeConfig, resourcePath, type KubeObject } from "../../kube/client.ts";
import { buildChildren } from "../../operator/app/builders.ts";
import { cpuSeconds, freePort, rssMiB } from "./proc.ts";
import { extraKwokNodes } from "./kwok.ts";

const { values } = parseArgs({
  options: {
    apps: { type: "string", default: "500" },
    "idle-seconds": { type: "string", default: "60" },
    concurrency: { type: "string", default: "8" },
    "operator-concurrency": { type: "string" },
    // The operator's Node.js flags; by default the ones hack/up and the Helm chart launch it with.
    "node-options": { type: "string" },
    // Only the operator phase (for comparing operator settings; no ratio).
    "skip-floor": { type: "boolean", default: false },
  },
});
const N = Number(values.apps);
// As hack/up and the Helm chart run the operator (docs/operating.md, "Operator memory").
const NODE_FLAGS = (values["node-options"] ?? "--max-semi-space-size=1 --optimize-for-size --v8-pool-size=1").split(/\s+/).filter(Boolean);
const IDLE_S = Number(values["idle-seconds"]);
const CONC = Number(values.concurrency);
const OP_CONC = Number(values["operator-concurrency"] ?? values.concurrency);
const root = join(import.meta.dirname, "../..");
const kubeconfig = process.env.KUBECONFIG ?? join(root, ".local/kubeconfig");
const kc = loadKubeConfig(kubeconfig);
const client = new KubeClient(kc);
const core = kc.makeApiClient(k8s.CoreV1Api);
const appsApi = kc.makeApiClient(k8s.AppsV1Api);
const custom = kc.makeApiClient(k8s.CustomObjectsApi);
const cfg = { baseDomain: "apps.bench.local" };
const spec = (i: number) => ({ name: `Bench ${i}`, slug: `b${i}`, image: "registry.invalid/bench:1" });

async function pool<T>(items: T[], n: number, fn: (t: T) => Promise<unknown>): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: n }, async () => {
      while (next < items.length) await fn(items[next++]!);
    }),
  );
}

async function until(what: string, check: () => Promise<boolean>, timeoutMs = 20 * 60_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out: ${what}`);
    await new Promise((r) => setTimeout(r, 250));
  }
}

/**
 * Deletes a namespace and waits until it is gone: tearing down 500 Apps' worth of objects loads
 * the API server for a while, and that must not overlap the next measurement.
 */
async function removeNamespace(name: string): Promise<void> {
  await core.deleteNamespace({ name }).catch(() => undefined);
  await until(`namespace ${name} deleted`, async () => !(await core.readNamespace({ name }).catch(() => undefined)), 10 * 60_000);
}

async function namespace(prefix: string): Promise<string> {
  const name = `${prefix}-${Date.now().toString(36)}`;
  await core.createNamespace({ body: { metadata: { name } } });
  return name;
}

let floorCpu: Record<string, number> = {};
let operatorCpu: Record<string, number> = {};

async function floor(): Promise<number> {
  const ns = await namespace("bench-floor");
  try {
    const cpu0 = controlPlaneCpu();
    const t0 = performance.now();
    await pool([...Array(N).keys()], CONC, async (i) => {
      // An owner the children can point at, as they would point at an App.
      const owner = await core.createNamespacedConfigMap({ namespace: ns, body: { metadata: { name: `b${i}` } } });
      const children = buildChildren({ name: `b${i}`, namespace: ns, uid: owner.metadata!.uid! }, AppSpec.parse(spec(i)), {}, cfg).map(
        (c) => ({
          ...c,
          metadata: {
            ...c.metadata,
            ownerReferences: [{ apiVersion: "v1", kind: "ConfigMap", name: `b${i}`, uid: owner.metadata!.uid!, controller: true }],
          },
        }),
      );
      for (const c of children) await client.apply(c, OPERATOR_FIELD_MANAGER);
    });
    await until("floor deployments ready", async () => {
      const list = await appsApi.listNamespacedDeployment({ namespace: ns });
      return list.items.filter((d) => d.status?.readyReplicas === 1).length === N;
    });
    const ms = performance.now() - t0;
    floorCpu = cpuSince(cpu0, controlPlaneCpu());
    return ms;
  } finally {
    await removeNamespace(ns);
  }
}

/** CPU seconds used so far by each local control-plane process (./hack/cluster's pid files); empty elsewhere. */
function controlPlaneCpu(): Record<string, number> {
  const dir = join(dirname(kubeconfig), "cluster");
  const out: Record<string, number> = {};
  for (const name of ["kube-apiserver", "etcd", "kube-controller-manager", "kube-scheduler", "kwok"]) {
    try {
      out[name] = procStats(Number(readFileSync(join(dir, `${name}.pid`), "utf8").trim())).cpuMs / 1000;
    } catch {
      /* not running here */
    }
  }
  return out;
}

const cpuSince = (a: Record<string, number>, b: Record<string, number>) =>
  Object.fromEntries(Object.entries(b).map(([k, v]) => [k, +(v - (a[k] ?? 0)).toFixed(1)]));

/** Resident memory split into anonymous (heap, malloc, stacks) and file-backed (the node binary's code, ...). */
function residentSplit(pid: number): { anonMiB: number; fileMiB: number } {
  const text = readFileSync(`/proc/${pid}/smaps_rollup`, "utf8");
  const kb = (field: string) => Number(new RegExp(`^${field}:\\s+(\\d+) kB`, "m").exec(text)?.[1] ?? NaN);
  return { anonMiB: +(kb("Anonymous") / 1024).toFixed(1), fileMiB: +((kb("Rss") - kb("Anonymous")) / 1024).toFixed(1) };
}

function procStats(pid: number): { cpuMs: number; rssMiB: number } {
  return { cpuMs: cpuSeconds(pid) * 1000, rssMiB: rssMiB(pid) };
}

/** The operator's heap figures at the moment, in MiB, from prom-client's default metrics. */
async function heap(port: number): Promise<Record<string, number>> {
  const text = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
  const get = (name: string) => +(Number(new RegExp(`^${name} (\\S+)$`, "m").exec(text)?.[1] ?? NaN) / 2 ** 20).toFixed(1);
  return {
    heapUsedMiB: get("nodejs_heap_size_used_bytes"),
    heapTotalMiB: get("nodejs_heap_size_total_bytes"),
    externalMiB: get("nodejs_external_memory_bytes"),
  };
}

/** berth_kube_requests_total of the operator, as "verb resource" -> count (all status codes). */
async function kubeRequests(port: number): Promise<Record<string, number>> {
  const text = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
  const out: Record<string, number> = {};
  for (const m of text.matchAll(/^berth_kube_requests_total\{([^}]*)\} (\S+)$/gm)) {
    const l: Record<string, string> = Object.fromEntries([...m[1]!.matchAll(/(\w+)="([^"]*)"/g)].map((x) => [x[1]!, x[2]!]));
    const key = `${l.verb} ${l.resource}${l.code && !l.code.startsWith("2") ? ` ${l.code}` : ""}`;
    out[key] = (out[key] ?? 0) + Number(m[2]);
  }
  return out;
}

const diff = (a: Record<string, number>, b: Record<string, number>): Record<string, number> =>
  Object.fromEntries(
    Object.entries(b)
      .map(([k, v]): [string, number] => [k, v - (a[k] ?? 0)])
      .filter(([, v]) => v > 0)
      .sort(),
  );

async function withOperator(): Promise<{
  ms: number;
  requests: Record<string, number>;
  idle: { cpuMs: number; rssMiB: number; writes: number; requests: Record<string, number> } & Record<string, unknown>;
}> {
  const ns = await namespace("bench-op");
  const port = await freePort();
  const op = spawn(process.execPath, [...NODE_FLAGS, join(root, "operator/main.ts")], {
    env: {
      ...process.env,
      KUBECONFIG: kubeconfig,
      BERTH_WATCH_NAMESPACE: ns,
      BERTH_LEADER_ELECTION: "false",
      BERTH_OPERATOR_HEALTH_PORT: String(port),
      BERTH_OPERATOR_CONCURRENCY: String(OP_CONC),
      BERTH_OPERATOR_RESYNC_SECONDS: "20",
      BERTH_BASE_DOMAIN: cfg.baseDomain,
      BERTH_LOG_LEVEL: "warn",
    },
    stdio: ["ignore", "inherit", "inherit"],
  });
  const exited = new Promise((r) => op.once("exit", r));
  try {
    await until("operator ready", async () => (await fetch(`http://127.0.0.1:${port}/readyz`).catch(() => undefined))?.ok === true, 60_000);
    const start = await kubeRequests(port);
    const cpu0 = { ...controlPlaneCpu(), operator: procStats(op.pid!).cpuMs / 1000 };
    const t0 = performance.now();
    await pool([...Array(N).keys()], CONC, (i) =>
      client.create({ apiVersion: API_VERSION, kind: "App", metadata: { name: `b${i}`, namespace: ns }, spec: spec(i) }, "bench"),
    );
    await until("apps active", async () => {
      const list = (await custom.listNamespacedCustomObject({
        group: "berth.dev",
        version: "v1alpha1",
        namespace: ns,
        plural: "apps",
      })) as { items: { status?: { phase?: string } }[] };
      return list.items.filter((a) => a.status?.phase === "active").length === N;
    });
    const ms = performance.now() - t0;
    operatorCpu = cpuSince(cpu0, { ...controlPlaneCpu(), operator: procStats(op.pid!).cpuMs / 1000 });
    const burst = await kubeRequests(port);

    // Idle: let the last events settle, then count every write in the namespace over the window.
    await new Promise((r) => setTimeout(r, 5000));
    // Only writes by the operator count: the HPA controller keeps updating HPA status on its own.
    let writes = 0;
    const windowStart = Date.now();
    const byOperator = (obj: KubeObject) =>
      (obj.metadata.managedFields ?? []).some(
        (m) => m.manager === OPERATOR_FIELD_MANAGER && m.time && new Date(m.time).getTime() >= windowStart - 1000,
      );
    const watches: AbortController[] = [];
    const w = new k8s.Watch(kc);
    const watched = [
      { apiVersion: API_VERSION, kind: "App", plural: "apps" },
      { apiVersion: "apps/v1", kind: "Deployment", plural: "deployments" },
      { apiVersion: "v1", kind: "Service", plural: "services" },
      { apiVersion: "networking.k8s.io/v1", kind: "Ingress", plural: "ingresses" },
      { apiVersion: "autoscaling/v2", kind: "HorizontalPodAutoscaler", plural: "horizontalpodautoscalers" },
    ];
    for (const r of watched) {
      const list = await client.list(r.apiVersion, r.kind, ns);
      watches.push(
        await w.watch(
          resourcePath({ ...r, namespace: ns }),
          { resourceVersion: list.metadata?.resourceVersion },
          (type, obj: KubeObject) => {
            if (type === "DELETED" || (type !== "BOOKMARK" && byOperator(obj))) writes++;
          },
          () => {},
        ),
      );
    }
    const before = procStats(op.pid!);
    const idleStart = await kubeRequests(port);
    await new Promise((r) => setTimeout(r, IDLE_S * 1000));
    const after = procStats(op.pid!);
    const idleEnd = await kubeRequests(port);
    const heapAtEnd = { ...residentSplit(op.pid!), ...(await heap(port)) };
    watches.forEach((a) => a.abort());
    return {
      ms,
      requests: diff(start, burst),
      idle: { cpuMs: after.cpuMs - before.cpuMs, rssMiB: after.rssMiB, ...heapAtEnd, writes, requests: diff(idleStart, idleEnd) },
    };
  } finally {
    op.kill("SIGTERM");
    await exited;
    await removeNamespace(ns);
  }
}

// Leftovers of an interrupted run would load the API server during this one.
for (const n of (await core.listNamespace()).items.map((x) => x.metadata!.name!).filter((x) => /^bench-(floor|op)-/.test(x)))
  await removeNamespace(n);
// One pod per App: past what the cluster's kwok node holds, more simulated nodes for both phases.
const nodes = extraKwokNodes(core, "bench-kwok", N);
await nodes.add();
let f: number;
let o: Awaited<ReturnType<typeof withOperator>>;
try {
  f = values["skip-floor"] ? NaN : await floor();
  o = await withOperator();
} finally {
  await nodes.remove();
}
const perApp = Object.fromEntries(Object.entries(o.requests).map(([k, v]) => [k, +(v / N).toFixed(2)]));
const total = +(Object.values(o.requests).reduce((a, b) => a + b, 0) / N).toFixed(2);
console.log(
  JSON.stringify(
    {
      apps: N,
      concurrency: CONC,
      operatorConcurrency: OP_CONC,
      nodeOptions: NODE_FLAGS.join(" "),
      floorSeconds: +(f / 1000).toFixed(1),
      operatorSeconds: +(o.ms / 1000).toFixed(1),
      ratio: +(o.ms / f).toFixed(2),
      requestsPerApp: { total, ...perApp },
      cpuSeconds: { floor: floorCpu, operator: operatorCpu },
      idleSeconds: IDLE_S,
      idle: { ...o.idle, cpuPercent: +((o.idle.cpuMs / (IDLE_S * 1000)) * 100).toFixed(2), rssMiB: +o.idle.rssMiB.toFixed(1) },
    },
    null,
    2,
  ),
);
