// Load test of the operator under App churn (docs/reliability.md, "Load"), run by hand (not part of ./hack/test) against the local control plane
// with kwok (./hack/up, or the test one):
//   node hack/bench/operator-churn.ts [--apps 5000] [--minutes 10] [--churn 10] [--type web|cron]
//     [--sample-seconds 5] [--drain-minutes 15] [--idle-seconds 60]
// (CHURN_LOG_LEVEL=info shows the operator's own log lines: each App's phase changes)
// 1. fill:  --apps Apps created (8 at a time) with the operator (a separate process, the flags
//           hack/up and the chart run it with) running, until every App's generation is observed,
//           then until the App queue has drained (the later reconciles follow the children's
//           rollouts; at most --drain-minutes)
// 2. idle:  --idle-seconds with nothing changing: the operator should write nothing
// 3. churn: for --minutes, --churn changes per second, in equal parts: a new App created, an App
//           updated (image bumped), an App deleted, so the population stays at --apps
// 4. settle: until every App's generation is observed again and the queue has drained
// The operator's RSS, V8 heap and work-queue depth (berth_workqueue_depth{controller="app"}) are
// sampled every --sample-seconds. Prints, per minute of churn, the figures, and at the end the
// churn phase's RSS, heap and queue depth at start, at the end and at most, and the
// least-squares slopes per minute with a verdict (flat: the growth the slope predicts over the
// churn is under 10 % of the starting value). For each phase: the App controller's reconciles
// and queue adds, and the operator's writes to the API server by verb and resource (from its
// /metrics). --type web (default): Deployments, Services, Ingresses and HPAs, and kwok pods
// (fake nodes are added for them: kwok-node-0 holds 2,000 pods); cron: a CronJob each (no pods).
import { spawn } from "node:child_process";
import { join } from "node:path";
import { parseArgs } from "node:util";
import * as k8s from "@kubernetes/client-node";
import { API_VERSION } from "../../crds/schemas.ts";
import { KubeClient, loadKubeConfig, type KubeObject } from "../../kube/client.ts";
import { cpuSeconds, freePort, rssMiB } from "./proc.ts";
import { benchNamespace, dropNamespace } from "./namespaces.ts";
import { trend } from "./series.ts";
import { extraKwokNodes } from "./kwok.ts";

const { values } = parseArgs({
  options: {
    apps: { type: "string", default: "5000" },
    minutes: { type: "string", default: "10" },
    churn: { type: "string", default: "10" },
    type: { type: "string", default: "web" },
    "sample-seconds": { type: "string", default: "5" },
    "node-options": { type: "string" },
    "drain-minutes": { type: "string", default: "15" },
    "idle-seconds": { type: "string", default: "60" },
  },
});
const N = Number(values.apps);
const MINUTES = Number(values.minutes);
const CHURN = Number(values.churn);
const TYPE = values.type === "cron" ? "cron" : "web";
const SAMPLE_MS = Number(values["sample-seconds"]) * 1000;
const DRAIN_MS = Number(values["drain-minutes"]) * 60_000;
const IDLE_MS = Number(values["idle-seconds"]) * 1000;
const NODE_FLAGS = (values["node-options"] ?? "--max-semi-space-size=1 --optimize-for-size --v8-pool-size=1").split(/\s+/).filter(Boolean);
const root = join(import.meta.dirname, "../..");
const kubeconfig = process.env.KUBECONFIG ?? join(root, ".local/kubeconfig");
const kc = loadKubeConfig(kubeconfig);
const client = new KubeClient(kc);
const core = kc.makeApiClient(k8s.CoreV1Api);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

type App = KubeObject & { status?: { observedGeneration?: number } };
const spec = (name: string, tag = 1) => ({
  name,
  slug: name,
  image: `registry.invalid/churn:${tag}`,
  visibility: "public",
  ...(TYPE === "cron" ? { type: "cron", schedule: "0 0 1 1 *" } : { minReplicas: 1, maxReplicas: 2 }),
});
const ref = (ns: string, name: string) => ({ apiVersion: API_VERSION, kind: "App", namespace: ns, name });

async function pool<T>(items: T[], n: number, fn: (t: T) => Promise<unknown>): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: n }, async () => {
      while (next < items.length) await fn(items[next++]!);
    }),
  );
}

/** Apps whose generation the operator has not observed yet. */
async function pending(ns: string): Promise<number> {
  let n = 0;
  let cont: string | undefined;
  do {
    const page = await client.list<App>(API_VERSION, "App", ns, { limit: 1000, ...(cont ? { continue: cont } : {}) });
    for (const a of page.items) if (a.status?.observedGeneration !== a.metadata.generation) n++;
    cont = page.metadata?.continue || undefined;
  } while (cont);
  return n;
}

interface OperatorMetrics {
  depth: number;
  heapMiB: number;
  /** Counters by series (name and labels as exposed): reconciles, queue adds, API requests. */
  counters: Map<string, number>;
}

/** One scrape of the operator's /metrics; a failed one (a kept-alive connection the server just closed) is tried again, up to 10 times. */
async function metrics(port: number): Promise<OperatorMetrics> {
  let text: string;
  for (let i = 0; ; i++) {
    try {
      text = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
      break;
    } catch (err) {
      if (i >= 10) throw err;
      await sleep(500);
    }
  }
  const depth = Number(/^berth_workqueue_depth\{controller="app"\} (\S+)$/m.exec(text)?.[1] ?? NaN);
  const heapMiB = Number(/^nodejs_heap_size_used_bytes (\S+)$/m.exec(text)?.[1] ?? NaN) / 2 ** 20;
  const counters = new Map<string, number>();
  for (const m of text.matchAll(
    /^(berth_(?:reconcile_total|workqueue_adds_total|kube_requests_total|watch_events_total)\{[^}]*\}) (\S+)$/gm,
  ))
    counters.set(m[1]!, Number(m[2]));
  return { depth, heapMiB, counters };
}

/** What the operator did between two snapshots: reconciles and queue adds of the App controller, and its writes to the API server by verb and resource. */
function activity(from: Map<string, number>, to: Map<string, number>, seconds: number): string {
  const delta = (series: string) => (to.get(series) ?? 0) - (from.get(series) ?? 0);
  const sum = (test: (series: string) => boolean) => [...to.keys()].filter(test).reduce((a, k) => a + delta(k), 0);
  const rate = (n: number) => `${n} (${(n / seconds).toFixed(1)}/s)`;
  const reconciles = sum((k) => k.startsWith("berth_reconcile_total{") && k.includes('controller="app"'));
  const adds = sum((k) => k.startsWith("berth_workqueue_adds_total{") && k.includes('controller="app"'));
  const writes = new Map<string, number>();
  for (const k of to.keys()) {
    const m = /^berth_kube_requests_total\{verb="(\w+)",resource="([^"]+)"/.exec(k);
    if (!m || ["get", "list", "watch"].includes(m[1]!) || m[2] === "leases" || m[2] === "events") continue;
    const label = `${m[1]} ${m[2]}`;
    writes.set(label, (writes.get(label) ?? 0) + delta(k));
  }
  const total = [...writes.values()].reduce((a, b) => a + b, 0);
  const by = [...writes]
    .filter(([, n]) => n > 0)
    .sort((a, b) => b[1] - a[1])
    .map(([l, n]) => `${l} ${n}`)
    .join(", ");
  // What woke the App controller: its watch events by kind, and how many of them its update predicates filtered.
  const events = [...to.keys()]
    .map((k) => [k, /^berth_watch_events_total\{controller="app",kind="(\w+)",result="(\w+)"\}$/.exec(k)] as const)
    .filter(([k, m]) => m && delta(k) > 0)
    .map(([k, m]) => `${m![1]} ${delta(k)}${m![2] === "filtered" ? " filtered" : ""}`)
    .join(", ");
  return `app reconciles ${rate(reconciles)}, queue adds ${rate(adds)}, writes to the API server ${rate(total)}${by ? `: ${by}` : ""}${events ? `; app watch events: ${events}` : ""}`;
}

/** Waits until the App queue is empty (nothing waiting, after `quietMs` of looking) or `limitMs` passed; returns the seconds waited, or undefined at the limit. */
async function drained(port: number, limitMs: number, quietMs = 10_000): Promise<number | undefined> {
  const start = performance.now();
  let emptySince: number | undefined;
  while (performance.now() - start < limitMs) {
    const { depth } = await metrics(port);
    const now = performance.now();
    if (depth === 0) {
      emptySince ??= now;
      if (now - emptySince >= quietMs) return (emptySince - start) / 1000;
    } else emptySince = undefined;
    await sleep(1000);
  }
  return undefined;
}

const nodes = extraKwokNodes(core, "churn-kwok", TYPE === "web" ? N : 0);

const ns = await benchNamespace(core, "bench-churn");
await nodes.add();
const port = await freePort();
const op = spawn(process.execPath, [...NODE_FLAGS, join(root, "operator/main.ts")], {
  env: {
    ...process.env,
    KUBECONFIG: kubeconfig,
    BERTH_WATCH_NAMESPACE: ns,
    BERTH_LEADER_ELECTION: "false",
    BERTH_OPERATOR_HEALTH_PORT: String(port),
    BERTH_BASE_DOMAIN: "apps.bench.local",
    BERTH_LOG_LEVEL: process.env.CHURN_LOG_LEVEL ?? "warn",
  },
  stdio: ["ignore", "inherit", "inherit"],
});
const exited = new Promise((r) => op.once("exit", r));
const samples: { t: number; phase: string; rss: number; heap: number; depth: number }[] = [];
/** The operator's counters at a point in time, with the time (ms of performance.now). */
const snapshot = async () => ({ at: performance.now(), counters: (await metrics(port)).counters });
const since = async (from: { at: number; counters: Map<string, number> }) => {
  const to = await snapshot();
  return { to, text: activity(from.counters, to.counters, (to.at - from.at) / 1000) };
};
let phase = "fill";
const t0 = performance.now();
const sampler = setInterval(() => {
  void metrics(port).then(
    (m) => {
      samples.push({ t: (performance.now() - t0) / 1000, phase, rss: rssMiB(op.pid!), heap: m.heapMiB, depth: m.depth });
    },
    () => undefined,
  );
}, SAMPLE_MS);
try {
  for (let i = 0; ; i++) {
    if ((await fetch(`http://127.0.0.1:${port}/readyz`).catch(() => undefined))?.ok) break;
    if (i > 600) throw new Error("the operator did not become ready");
    await sleep(100);
  }
  console.log(
    `operator churn: ${N} ${TYPE} Apps, then ${MINUTES} min of ${CHURN} changes/s (create, update, delete in equal parts), namespace ${ns}${nodes.count ? `, ${nodes.count} extra kwok nodes` : ""}`,
  );
  const names: string[] = Array.from({ length: N }, (_, i) => `c${i}`);
  let next = N;
  const tFill = performance.now();
  const fillStart = await snapshot();
  await pool(names, 8, (name) =>
    client.create({ apiVersion: API_VERSION, kind: "App", metadata: { name, namespace: ns }, spec: spec(name) }, "bench"),
  );
  const created = (performance.now() - tFill) / 1000;
  for (;;) {
    const p = await pending(ns);
    if (p === 0) break;
    await sleep(2000);
  }
  console.log(
    `fill: ${N} Apps created in ${created.toFixed(0)} s, all observed after ${((performance.now() - tFill) / 1000).toFixed(0)} s; operator RSS ${rssMiB(op.pid!).toFixed(0)} MiB`,
  );
  // Observed is the first reconcile of each App; the next ones follow its children (Deployment
  // rolled out, pods ready) until every App is active. The churn starts from that steady state.
  phase = "drain";
  const fillDrained = await drained(port, DRAIN_MS);
  const fillDone = await since(fillStart);
  console.log(
    `fill: queue ${fillDrained === undefined ? `NOT drained within ${DRAIN_MS / 60_000} min` : `drained ${fillDrained.toFixed(0)} s after that`}; ${fillDone.text}`,
  );
  // Nothing changes: the operator should write nothing (a periodic resync within the window reconciles without writes).
  phase = "idle";
  await sleep(IDLE_MS);
  const idle = await since(fillDone.to);
  console.log(`idle ${IDLE_MS / 1000} s: ${idle.text}`);

  phase = "churn";
  const churnStart = await snapshot();
  const tChurn = performance.now();
  const end = tChurn + MINUTES * 60_000;
  const tags = new Map<string, number>();
  let ops = 0,
    failed = 0,
    minute = 0;
  const counts = { create: 0, update: 0, delete: 0 };
  while (performance.now() < end) {
    const due = tChurn + (ops / CHURN) * 1000;
    const wait = due - performance.now();
    if (wait > 0) await sleep(wait);
    const kind = (["create", "update", "delete"] as const)[ops % 3]!;
    ops++;
    try {
      if (kind === "create") {
        const name = `c${next++}`;
        await client.create({ apiVersion: API_VERSION, kind: "App", metadata: { name, namespace: ns }, spec: spec(name) }, "bench");
        names.push(name);
      } else if (kind === "update") {
        const name = names[Math.floor(Math.random() * names.length)]!;
        const tag = (tags.get(name) ?? 1) + 1;
        tags.set(name, tag);
        await client.mergePatch(ref(ns, name), { spec: { image: `registry.invalid/churn:${tag}` } }, "bench");
      } else {
        const name = names.splice(Math.floor(Math.random() * names.length), 1)[0]!;
        await client.delete(ref(ns, name));
      }
      counts[kind]++;
    } catch {
      failed++;
    }
    const m = Math.floor((performance.now() - tChurn) / 60_000);
    if (m > minute) {
      minute = m;
      const s = samples.at(-1);
      if (s)
        console.log(
          `  churn min ${String(m).padStart(2)}: RSS ${s.rss.toFixed(0)} MiB, heap ${s.heap.toFixed(0)} MiB, queue depth ${s.depth}, ${ops} changes (${failed} failed)`,
        );
    }
  }
  const churnS = (performance.now() - tChurn) / 1000;
  phase = "settle";
  const tSettle = performance.now();
  for (;;) {
    const p = await pending(ns);
    if (p === 0) break;
    await sleep(2000);
  }
  const settle = (performance.now() - tSettle) / 1000;
  const settleDrained = await drained(port, DRAIN_MS);
  const churnDone = await since(churnStart);
  await sleep(SAMPLE_MS * 2);
  clearInterval(sampler);

  const churn = samples.filter((s) => s.phase === "churn");
  const report = (label: string, ys: number[], unit: string) => {
    const tr = trend(
      churn.map((s) => s.t / 60),
      ys,
    );
    console.log(
      `${label}: start ${ys[0]!.toFixed(1)}${unit}, end ${ys.at(-1)!.toFixed(1)}${unit}, max ${Math.max(...ys).toFixed(1)}${unit}, mean ${(ys.reduce((a, b) => a + b, 0) / ys.length).toFixed(1)}${unit}; slope ${tr.perMin.toFixed(2)}${unit}/min (${tr.growth.toFixed(1)}${unit} predicted over the churn): ${tr.verdict}`,
    );
  };
  console.log(
    `\nchurn: ${ops} changes in ${churnS.toFixed(0)} s (${(ops / churnS).toFixed(1)}/s; ${counts.create} creates, ${counts.update} updates, ${counts.delete} deletes, ${failed} failed); settled (every generation observed) ${settle.toFixed(0)} s after; operator CPU ${cpuSeconds(op.pid!).toFixed(0)} s in all`,
  );
  report(
    "operator RSS",
    churn.map((s) => s.rss),
    " MiB",
  );
  report(
    "operator V8 heap used",
    churn.map((s) => s.heap),
    " MiB",
  );
  report(
    "app queue depth",
    churn.map((s) => s.depth),
    "",
  );
  const half = churn.length >> 1;
  const mean = (xs: typeof churn) => xs.reduce((a, s) => a + s.depth, 0) / Math.max(1, xs.length);
  console.log(
    `app queue depth, mean over each half of the churn: ${mean(churn.slice(0, half)).toFixed(0)} → ${mean(churn.slice(half)).toFixed(0)}; samples at 0: ${churn.filter((s) => s.depth === 0).length} of ${churn.length}`,
  );
  const after = samples.filter((s) => s.phase === "settle").at(-1);
  console.log(
    `after settling: queue ${settleDrained === undefined ? `NOT drained within ${DRAIN_MS / 60_000} min` : `drained ${settleDrained.toFixed(0)} s after every generation was observed`}; depth ${after?.depth}, RSS ${after?.rss.toFixed(0)} MiB`,
  );
  console.log(`churn and settle: ${churnDone.text}`);
  console.log(
    `samples (s phase RSS/heap/depth): ${samples
      .filter((_, i) => i % Math.max(1, Math.floor(samples.length / 24)) === 0)
      .map((s) => `${s.t.toFixed(0)}${s.phase[0]} ${s.rss.toFixed(0)}/${s.heap.toFixed(0)}/${s.depth}`)
      .join(", ")}`,
  );
} catch (err) {
  console.error(`churn failed: ${err instanceof Error ? err.message : String(err)}`);
  process.exitCode = 1;
} finally {
  clearInterval(sampler);
  op.kill("SIGTERM");
  await exited;
  await dropNamespace(core, ns);
  await nodes.remove();
}
