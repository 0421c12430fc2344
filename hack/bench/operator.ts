// Benchmark of issue 3, run by hand against the local control plane (./hack/up first):
//   node hack/bench/operator.ts [--apps 500] [--idle-seconds 60]
// 1. floor:    the same child objects the operator would write, applied directly (no operator),
//              until every Deployment has its replica Ready
// 2. operator: as many App CRs created at once, with the operator (a separate process) running,
//              until every App reports phase active
// 3. idle:     the operator's CPU time, RSS and the number of writes it causes while nothing
//              changes (resync forced every 20 s during the window)
// Prints the ratio operator/floor (goal: within 1.5x) and the idle figures (goal: no writes, <150 MiB).
import { spawn } from "node:child_process";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { parseArgs } from "node:util";
import * as k8s from "@kubernetes/client-node";
import { API_VERSION, AppSpec } from "../../crds/schemas.ts";
import { KubeClient, OPERATOR_FIELD_MANAGER, loadKubeConfig, type KubeObject } from "../../crds/kube/client.ts";
import { resourcePath } from "../../crds/kube/informer.ts";
import { buildChildren } from "../../operator/app/builders.ts";

const { values } = parseArgs({ options: { apps: { type: "string", default: "500" }, "idle-seconds": { type: "string", default: "60" }, concurrency: { type: "string", default: "8" }, "operator-concurrency": { type: "string" } } });
const N = Number(values.apps);
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
  await Promise.all(Array.from({ length: n }, async () => { while (next < items.length) await fn(items[next++]!); }));
}

async function until(what: string, check: () => Promise<boolean>, timeoutMs = 20 * 60_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out: ${what}`);
    await new Promise((r) => setTimeout(r, 250));
  }
}

async function namespace(prefix: string): Promise<string> {
  const name = `${prefix}-${Date.now().toString(36)}`;
  await core.createNamespace({ body: { metadata: { name } } });
  return name;
}

async function floor(): Promise<number> {
  const ns = await namespace("bench-floor");
  const t0 = performance.now();
  await pool([...Array(N).keys()], CONC, async (i) => {
    // An owner the children can point at, as they would point at an App.
    const owner = await core.createNamespacedConfigMap({ namespace: ns, body: { metadata: { name: `b${i}` } } });
    const children = buildChildren({ name: `b${i}`, namespace: ns, uid: owner.metadata!.uid! }, AppSpec.parse(spec(i)), {}, cfg)
      .map((c) => ({ ...c, metadata: { ...c.metadata, ownerReferences: [{ apiVersion: "v1", kind: "ConfigMap", name: `b${i}`, uid: owner.metadata!.uid!, controller: true }] } }));
    for (const c of children) await client.apply(c, OPERATOR_FIELD_MANAGER);
  });
  await until("floor deployments ready", async () => {
    const list = await appsApi.listNamespacedDeployment({ namespace: ns });
    return list.items.filter((d) => d.status?.readyReplicas === 1).length === N;
  });
  const ms = performance.now() - t0;
  await core.deleteNamespace({ name: ns });
  return ms;
}

function procStats(pid: number): { cpuMs: number; rssMiB: number } {
  const stat = readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1]!.split(" ");
  const ticks = Number(stat[11]) + Number(stat[12]); // utime + stime, in clock ticks (100/s)
  const rssPages = Number(readFileSync(`/proc/${pid}/statm`, "utf8").split(" ")[1]);
  return { cpuMs: ticks * 10, rssMiB: (rssPages * 4096) / 2 ** 20 };
}

async function withOperator(): Promise<{ ms: number; idle: { cpuMs: number; rssMiB: number; writes: number } }> {
  const ns = await namespace("bench-op");
  const op = spawn(process.execPath, ["--max-semi-space-size=1", join(root, "operator/main.ts")], { // as hack/up and the chart run it
    env: { ...process.env, KUBECONFIG: kubeconfig, BERTH_WATCH_NAMESPACE: ns, BERTH_LEADER_ELECTION: "false", BERTH_OPERATOR_HEALTH_PORT: "0", BERTH_OPERATOR_CONCURRENCY: String(OP_CONC), BERTH_OPERATOR_RESYNC_SECONDS: "20", BERTH_BASE_DOMAIN: cfg.baseDomain, BERTH_LOG_LEVEL: "warn" },
    stdio: ["ignore", "inherit", "inherit"],
  });
  await new Promise((r) => setTimeout(r, 1500));
  const t0 = performance.now();
  await pool([...Array(N).keys()], CONC, (i) => client.create({ apiVersion: API_VERSION, kind: "App", metadata: { name: `b${i}`, namespace: ns }, spec: spec(i) }, "bench"));
  await until("apps active", async () => {
    const list = await custom.listNamespacedCustomObject({ group: "berth.dev", version: "v1alpha1", namespace: ns, plural: "apps" }) as { items: { status?: { phase?: string } }[] };
    return list.items.filter((a) => a.status?.phase === "active").length === N;
  });
  const ms = performance.now() - t0;

  // Idle: let the last events settle, then count every write in the namespace over the window.
  await new Promise((r) => setTimeout(r, 5000));
  // Only writes by the operator count: the HPA controller keeps updating HPA status on its own.
  let writes = 0;
  const windowStart = Date.now();
  const byOperator = (obj: KubeObject) => (obj.metadata.managedFields ?? [])
    .some((m) => m.manager === OPERATOR_FIELD_MANAGER && m.time && new Date(m.time).getTime() >= windowStart - 1000);
  const watches: AbortController[] = [];
  const w = new k8s.Watch(kc);
  const watched = [
    { apiVersion: API_VERSION, kind: "App", plural: "apps" }, { apiVersion: "apps/v1", kind: "Deployment", plural: "deployments" },
    { apiVersion: "v1", kind: "Service", plural: "services" }, { apiVersion: "networking.k8s.io/v1", kind: "Ingress", plural: "ingresses" },
    { apiVersion: "autoscaling/v2", kind: "HorizontalPodAutoscaler", plural: "horizontalpodautoscalers" },
  ];
  for (const r of watched) {
    const list = await client.objects.list(r.apiVersion, r.kind, ns);
    watches.push(await w.watch(resourcePath({ ...r, namespace: ns }), { resourceVersion: list.metadata?.resourceVersion }, (type, obj: KubeObject) => { if (type === "DELETED" || (type !== "BOOKMARK" && byOperator(obj))) writes++; }, () => {}));
  }
  const before = procStats(op.pid!);
  await new Promise((r) => setTimeout(r, IDLE_S * 1000));
  const after = procStats(op.pid!);
  watches.forEach((a) => a.abort());
  op.kill("SIGTERM");
  await new Promise((r) => op.once("exit", r));
  await core.deleteNamespace({ name: ns });
  return { ms, idle: { cpuMs: after.cpuMs - before.cpuMs, rssMiB: after.rssMiB, writes } };
}

const f = await floor();
const o = await withOperator();
console.log(JSON.stringify({ apps: N, concurrency: CONC, operatorConcurrency: OP_CONC, floorSeconds: +(f / 1000).toFixed(1), operatorSeconds: +(o.ms / 1000).toFixed(1), ratio: +(o.ms / f).toFixed(2), idleSeconds: IDLE_S, idle: { ...o.idle, cpuPercent: +((o.idle.cpuMs / (IDLE_S * 1000)) * 100).toFixed(2), rssMiB: +o.idle.rssMiB.toFixed(1) } }, null, 2));
