// Benchmark of Apps on the real node, run by hand against a cluster with the real node:
//   BERTH_REAL_NODE=1 ./hack/cluster up && eval "$(BERTH_REAL_NODE=1 ./hack/cluster env)"
//   (BERTH_BENCH_POLICIES=1: every namespace of both sides under a workspace's NetworkPolicies)
//   node hack/bench/realnode.ts [--apps 20] [--rounds 3]
// Per round (alternating which goes first), in a fresh namespace each:
// 1. floor:  the children the operator would write for N Apps of the sample image (Deployment,
//            Service, Ingress, HPA from the operator's own builders), applied directly;
// 2. berth:  N App objects created at once, the operator (a separate process) reconciling them.
// For each App: the time from its create to the first 200 answered through the ingress with its
// host (what a user calls serving). Prints p50/p99 of both and the ratio berth/floor (goal: p99
// within 1.3x). Governance is off for both (no API): provisioning is measured by the governance
// benches. Then the memory of the whole local platform at rest (goal: under 2.5 GiB).
import { spawn } from "node:child_process";
import { execFileSync } from "node:child_process";
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { request } from "node:http";
import { join } from "node:path";
import { parseArgs } from "node:util";
import * as k8s from "@kubernetes/client-node";
import { API_VERSION, AppSpec } from "../../crds/schemas.ts";
import { KubeClient, OPERATOR_FIELD_MANAGER, loadKubeConfig } from "../../kube/client.ts";
import { buildChildren } from "../../operator/app/builders.ts";
import { benchNamespace, dropNamespace } from "./namespaces.ts";
import { need, placement } from "./on-node.ts";
import { quantile } from "./series.ts";

const { values } = parseArgs({ options: { apps: { type: "string", default: "20" }, rounds: { type: "string", default: "3" } } });
const N = Number(values.apps);
const ROUNDS = Number(values.rounds);
const INGRESS = new URL(need("BERTH_INGRESS_URL"));
const REGISTRY = need("BERTH_REGISTRY");
const root = join(import.meta.dirname, "../..");
const kubeconfig = need("KUBECONFIG");
const kc = loadKubeConfig(kubeconfig);
const client = new KubeClient(kc);
const core = kc.makeApiClient(k8s.CoreV1Api);
const DOMAIN = "apps.bench.local";
const cfg = { baseDomain: DOMAIN, ...placement };

const sample =
  process.env.BERTH_SAMPLE_IMAGE ??
  execFileSync(process.execPath, [join(root, "hack/images.ts"), "build-sample", "--registry", REGISTRY], { encoding: "utf8" })
    .trim()
    .split("\n")
    .at(-1)!;
const spec = (ns: string, i: number) => ({
  name: `Bench ${i}`,
  slug: `${ns}-b${i}`,
  image: sample,
  cpuLimitMillicores: 50,
  memoryLimitMi: 96,
  visibility: "public" as const,
});

function status(host: string): Promise<number> {
  return new Promise((resolve) => {
    const req = request({ host: INGRESS.hostname, port: INGRESS.port, path: "/healthz", headers: { Host: host }, timeout: 5000 }, (res) => {
      res.resume();
      resolve(res.statusCode ?? 0);
    });
    req.on("timeout", () => req.destroy()).on("error", () => resolve(0));
    req.end();
  });
}

async function serving(host: string, t0: number): Promise<number> {
  const deadline = t0 + 10 * 60_000;
  while (Date.now() < deadline) {
    if ((await status(host)) === 200) return Date.now() - t0;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`${host} was not served in 10 minutes`);
}

async function floor(): Promise<number[]> {
  const ns = await benchNamespace(core, "floor", kc);
  try {
    return await Promise.all(
      Array.from({ length: N }, async (_, i) => {
        const s = AppSpec.parse(spec(ns, i));
        const t0 = Date.now();
        // The objects the operator would write, without an App to own them (owner references dropped).
        const objs = buildChildren({ name: `b${i}`, namespace: ns, uid: "none" }, s, {}, cfg).map((o) => ({
          ...o,
          metadata: { ...o.metadata, ownerReferences: [] },
        }));
        for (const o of objs) await client.apply(o, OPERATOR_FIELD_MANAGER);
        return serving(`${s.slug}.${DOMAIN}`, t0);
      }),
    );
  } finally {
    await dropNamespace(core, ns);
  }
}

async function berth(): Promise<number[]> {
  const ns = await benchNamespace(core, "berth", kc);
  const op = spawn(process.execPath, [join(root, "operator/main.ts")], {
    env: {
      PATH: process.env.PATH,
      KUBECONFIG: kubeconfig,
      BERTH_WATCH_NAMESPACE: ns,
      BERTH_LEADER_ELECTION: "false",
      BERTH_OPERATOR_HEALTH_PORT: "0",
      BERTH_BASE_DOMAIN: DOMAIN,
      BERTH_LOG_LEVEL: "warn",
      BERTH_WORKLOAD_NODE_SELECTOR: JSON.stringify(placement.nodeSelector),
      BERTH_WORKLOAD_TOLERATIONS: JSON.stringify(placement.tolerations),
    },
    stdio: ["ignore", "inherit", "inherit"],
  });
  try {
    await new Promise((r) => setTimeout(r, 3000)); // caches synced
    return await Promise.all(
      Array.from({ length: N }, async (_, i) => {
        const s = spec(ns, i);
        const t0 = Date.now();
        await client.create({ apiVersion: API_VERSION, kind: "App", metadata: { name: `b${i}`, namespace: ns }, spec: s }, "bench");
        return serving(`${s.slug}.${DOMAIN}`, t0);
      }),
    );
  } finally {
    op.kill("SIGTERM");
    await dropNamespace(core, ns);
  }
}

/** RSS (MiB) of a process and all its descendants. */
function treeRss(pid: number, children: Map<number, number[]>): number {
  let kb: number;
  try {
    kb = Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, "utf8"))?.[1] ?? 0);
  } catch {
    return 0;
  }
  return kb / 1024 + (children.get(pid) ?? []).reduce((s, c) => s + treeRss(c, children), 0);
}

function platformMemory(): { parts: Record<string, number>; total: number } {
  const local = process.env.BERTH_LOCAL ?? join(root, ".local");
  const dir = join(local, "cluster");
  const children = new Map<number, number[]>();
  const procs: { pid: number; cmd: string }[] = [];
  for (const p of readdirSync("/proc")) {
    if (!/^\d+$/.test(p)) continue;
    try {
      const ppid = Number(/PPid:\s+(\d+)/.exec(readFileSync(`/proc/${p}/status`, "utf8"))?.[1]);
      children.set(ppid, [...(children.get(ppid) ?? []), Number(p)]);
      procs.push({ pid: Number(p), cmd: readFileSync(`/proc/${p}/cmdline`, "utf8") });
    } catch {
      /* gone */
    }
  }
  const parts: Record<string, number> = {};
  for (const f of readdirSync(dir).filter((x) => x.endsWith(".pid"))) {
    const pid = Number(readFileSync(join(dir, f), "utf8"));
    parts[f.replace(/\.pid$/, "")] = treeRss(pid, children);
  }
  // containerd's shims leave their parent: they and the pods under them are found by the socket.
  const sock = readFileSync(join(dir, "node", "containerd.toml"), "utf8").match(/address = "([^"]+)"/)?.[1];
  parts["shims and pods"] = procs
    .filter((p) => sock && p.cmd.includes("containerd-shim") && p.cmd.includes(sock.replace(/\/containerd\.sock$/, "")))
    .reduce((s, p) => s + treeRss(p.pid, children), 0);
  const pg = existsSync(join(local, "postgres.pid")) ? Number(readFileSync(join(local, "postgres.pid"), "utf8")) : undefined;
  if (pg) parts.postgres = treeRss(pg, children);
  return { parts, total: Object.values(parts).reduce((a, b) => a + b, 0) };
}

const rows: { round: number; floor: number[]; berth: number[] }[] = [];
for (let r = 1; r <= ROUNDS; r++) {
  // Alternate which goes first, so that neither always meets a machine still busy with the other.
  let f: number[], b: number[];
  if (r % 2) {
    f = await floor();
    b = await berth();
  } else {
    b = await berth();
    f = await floor();
  }
  rows.push({ round: r, floor: f, berth: b });
  console.log(
    `round ${r}: floor p50 ${quantile(f, 0.5)} ms p99 ${quantile(f, 0.99)} ms | berth p50 ${quantile(b, 0.5)} ms p99 ${quantile(b, 0.99)} ms | ratio p99 ${(quantile(b, 0.99) / quantile(f, 0.99)).toFixed(2)}`,
  );
}
const ratios = rows.map((x) => quantile(x.berth, 0.99) / quantile(x.floor, 0.99)).sort((a, b) => a - b);
const median = ratios[Math.floor(ratios.length / 2)]!;
console.log(
  `create->serving, ${N} Apps of ${sample}: p99 ratio berth/floor, median of ${ROUNDS} rounds: ${median.toFixed(2)} (goal <= 1.3: ${median <= 1.3 ? "MET" : "MISSED"})`,
);
await new Promise((r) => setTimeout(r, 20_000)); // at rest
const mem = platformMemory();
for (const [k, v] of Object.entries(mem.parts).sort((a, b) => b[1] - a[1]))
  console.log(`  ${k.padEnd(24)} ${v.toFixed(0).padStart(6)} MiB`);
console.log(
  `memory of the local platform at rest: ${(mem.total / 1024).toFixed(2)} GiB (goal < 2.5 GiB: ${mem.total < 2.5 * 1024 ? "MET" : "MISSED"})`,
);
