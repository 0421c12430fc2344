// Benchmark of deployments from Git, run by hand against a cluster with the real node:
//   BERTH_REAL_NODE=1 ./hack/cluster up && eval "$(BERTH_REAL_NODE=1 ./hack/cluster env)"
//   (BERTH_BENCH_POLICIES=1: every namespace of both sides under a workspace's NetworkPolicies;
//   BERTH_BENCH_PULL_CREDENTIALS=1: both sides' images under apps/<namespace>/, pulled with the
//   namespace's own credential, as the operator writes it, instead of anonymously from bench/)
//   node hack/bench/deploys.ts [--apps 10] [--rounds 3]
// Push-to-serving of Git Apps (a Dockerfile on berth/node) for one App and for N pushed at once,
// each round in a fresh namespace, alternating which goes first:
// 1. floor: what a person does by hand: `git clone` + checkout of the commit, the same `buildctl
//    build` (same frontend, same push to the local registry), then the Deployment, Service and
//    Ingress the operator would write, applied directly, until the ingress answers;
// 2. berth: the App and its Release created as the API creates them, the operator (a separate
//    process, the builder image in a build Job on the real node) carrying it to serving.
// Each side builds its own content (a random line), so neither rides on the other's BuildKit cache
// beyond the base image. Per deploy: the total, and Berth's steps from the Release's status and
// the build's result and log (queue, the build pod's start, clone, build+push, the pod's exit seen
// by the operator, rollout). Prints Berth's overhead (berth - floor of the same round, paired by
// rank) at p50 and p99 (goal: under 2 s), and where the machine's CPU went: busy time per side,
// Berth's extra by process and its extra API writes. Installs Berth's CRDs first (the cluster has none).
import { execFile, spawn } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { request } from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseArgs, promisify } from "node:util";
import * as k8s from "@kubernetes/client-node";
import { RELEASE_LABEL, RELEASE_STEP_LABEL } from "../../crds/release.ts";
import { API_VERSION, APP_LABEL, AppSpec } from "../../crds/schemas.ts";
import { KubeClient, OPERATOR_FIELD_MANAGER, loadKubeConfig, type KubeObject } from "../../kube/client.ts";
import { buildChildren } from "../../operator/app/builders.ts";
import { REGISTRY_PULL_SECRET, registryPullSecret } from "../../operator/kit/registry-pull.ts";
import { readRegistryKey } from "../../kube/registry-credentials.ts";
import { benchNamespace, dropNamespace } from "./namespaces.ts";
import { need, placement } from "./on-node.ts";
import { cpuByProcessName, cpuSeconds, machineTicks } from "./proc.ts";
import { quantile } from "./series.ts";
import { buildBerthImages } from "../berth-images.ts";
import { IMAGES } from "../images.ts";
import { binPath } from "../lib/pinned.ts";
import { buildkitClientSecret, readBuildkitClient } from "../lib/buildkit-tls.ts";

const run = promisify(execFile);
const { values } = parseArgs({ options: { apps: { type: "string", default: "10" }, rounds: { type: "string", default: "3" } } });
const N = Number(values.apps);
const ROUNDS = Number(values.rounds);
const INGRESS = new URL(need("BERTH_INGRESS_URL"));
const REGISTRY = need("BERTH_REGISTRY");
const BUILDKIT = need("BERTH_BUILDKIT_ADDR");
const BUILDKIT_CLUSTER = need("BERTH_BUILDKIT_CLUSTER_ADDR");
const GIT = need("BERTH_GIT_URL");
const GIT_CLUSTER = need("BERTH_GIT_CLUSTER_URL");
const root = join(import.meta.dirname, "../..");
const kubeconfig = need("KUBECONFIG");
const kc = loadKubeConfig(kubeconfig);
const client = new KubeClient(kc);
const core = kc.makeApiClient(k8s.CoreV1Api);
const batch = kc.makeApiClient(k8s.BatchV1Api);
const DOMAIN = "deploys.bench.local";
const BASE = `${REGISTRY}/${IMAGES.node.name}:${IMAGES.node.tag}`;
const work = mkdtempSync(join(tmpdir(), "berth-bench-deploys-"));
// BERTH_BENCH_PULL_CREDENTIALS=1: images under apps/ (the token service grants them only to their
// namespace's credential), both sides pulling with it (docs/images.md "Pull credentials")
const PULL =
  process.env.BERTH_BENCH_PULL_CREDENTIALS === "1"
    ? { registry: REGISTRY, key: readRegistryKey(need("BERTH_REGISTRY_AUTH_KEY_FILE")) }
    : undefined;
const PREFIX = PULL ? "apps" : "bench";

/** The API server's count of writes so far, by verb, resource and subresource (and the code when not 2xx); reads and watches left out. */
async function apiWrites(): Promise<Map<string, number>> {
  const { stdout } = await run(binPath("kubectl"), ["--kubeconfig", kubeconfig, "get", "--raw", "/metrics"], {
    maxBuffer: 256 * 1024 * 1024,
  });
  const out = new Map<string, number>();
  for (const line of stdout.split("\n")) {
    if (!line.startsWith("apiserver_request_total{")) continue;
    const label = (k: string) => new RegExp(`[{,]${k}="([^"]*)"`).exec(line)?.[1] ?? "";
    const verb = label("verb"),
      sub = label("subresource"),
      code = label("code");
    if (["GET", "LIST", "WATCH"].includes(verb)) continue;
    const key = `${verb} ${label("resource")}${sub ? `/${sub}` : ""}${code.startsWith("2") ? "" : ` ${code}`}`;
    out.set(key, (out.get(key) ?? 0) + Number(line.slice(line.lastIndexOf(" ") + 1)));
  }
  return out;
}
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** A repository with a Dockerfile serving `marker`, pushed to the Git server; resolves its commit. */
async function repo(name: string, marker: string): Promise<string> {
  const dir = join(work, name);
  await run("git", ["init", "-q", "-b", "main", dir]);
  writeFileSync(
    join(dir, "server.js"),
    `require("node:http").createServer((q, s) => s.end(${JSON.stringify(`${marker}\n`)})).listen(Number(process.env.PORT));\nprocess.on("SIGTERM", () => process.exit(0));\n`,
  );
  writeFileSync(join(dir, "Dockerfile"), `FROM ${BASE}\nCOPY server.js /app/server.js\nCMD ["node", "/app/server.js"]\n`);
  const git = (...a: string[]) => run("git", ["-c", "user.email=b@berth.local", "-c", "user.name=bench", ...a], { cwd: dir });
  await git("add", ".");
  await git("commit", "-qm", marker);
  await git("push", "-q", `${GIT}/${name}.git`, "main");
  return (await git("rev-parse", "HEAD")).stdout.trim();
}

function answer(host: string): Promise<string> {
  return new Promise((resolve) => {
    const req = request({ host: INGRESS.hostname, port: INGRESS.port, path: "/", headers: { Host: host }, timeout: 5000 }, (res) => {
      let t = "";
      res
        .setEncoding("utf8")
        .on("data", (d: string) => {
          t += d;
        })
        .on("end", () => resolve(res.statusCode === 200 ? t : ""));
    });
    req.on("timeout", () => req.destroy()).on("error", () => resolve(""));
    req.end();
  });
}

async function serving(host: string, marker: string, t0: number): Promise<number> {
  const deadline = t0 + 15 * 60_000;
  while (Date.now() < deadline) {
    if ((await answer(host)) === `${marker}\n`) return Date.now() - t0;
    await sleep(100);
  }
  throw new Error(`${host} did not serve ${marker} in 15 minutes`);
}

interface Sample {
  total: number;
  steps?: Record<string, number>;
}

/** When a pod was first seen, bound to the node, seen running and seen ready (this process's clock). */
interface PodTime {
  uid?: string;
  added: number;
  bound?: number;
  running?: number;
  ready?: number;
}
interface PodTimes {
  build(release: string): PodTime | undefined;
  app(app: string): PodTime | undefined;
  stop(): void;
}

/**
 * Watches a namespace's pods: a build pod's start splits between the job controller, the
 * scheduler and the node; a rollout's between the Deployment's pod, the node, the pod's probes and
 * the ingress.
 */
async function podTimes(ns: string): Promise<PodTimes> {
  const seen = new Map<string, PodTime>();
  const watch = await new k8s.Watch(kc).watch(
    `/api/v1/namespaces/${ns}/pods`,
    {},
    (_type: string, p: k8s.V1Pod) => {
      const l = p.metadata?.labels ?? {};
      const key = l[RELEASE_STEP_LABEL] === "build" ? `build/${l[RELEASE_LABEL]}` : l[APP_LABEL] ? `app/${l[APP_LABEL]}` : undefined;
      if (!key || (seen.has(key) && p.metadata?.uid !== seen.get(key)!.uid)) return; // the first pod of each
      const now = Date.now();
      const e: PodTime = seen.get(key) ?? { uid: p.metadata?.uid, added: now };
      seen.set(key, e);
      if (p.spec?.nodeName && !e.bound) e.bound = now;
      if (p.status?.containerStatuses?.[0]?.state?.running && !e.running) e.running = now;
      if (p.status?.conditions?.some((c) => c.type === "Ready" && c.status === "True") && !e.ready) e.ready = now;
    },
    () => undefined,
  );
  return { build: (r) => seen.get(`build/${r}`), app: (a) => seen.get(`app/${a}`), stop: () => watch.abort() };
}

/** A rollout's steps from its start (`from`, ms after t0) to serving at `total`. */
function rolloutSteps(p: PodTime | undefined, from: number, rel: (x?: number) => number, total: number): Record<string, number> {
  return {
    "(to pod": rel(p?.added) - from,
    "pod to running": rel(p?.running) - rel(p?.added),
    "to ready": rel(p?.ready) - rel(p?.running),
    "to serving)": total - rel(p?.ready),
  };
}

async function floor(n: number): Promise<Sample[]> {
  const ns = await benchNamespace(core, "floor", kc);
  // the person's side writes the namespace's pull credential by hand (the operator does on Berth's)
  if (PULL) await client.apply(registryPullSecret(ns, PULL), "bench");
  const pods = await podTimes(ns);
  try {
    const shas = await Promise.all(
      Array.from({ length: n }, async (_, i) => {
        const marker = `floor ${ns} ${i} ${Math.random()}`;
        return { sha: await repo(`${ns}-f${i}`, marker), marker };
      }),
    );
    return await Promise.all(
      shas.map(async ({ sha, marker: m }, i) => {
        const t0 = Date.now();
        const dir = join(work, `${ns}-clone-${i}`);
        await run("git", ["init", "-q", dir]);
        await run("git", ["fetch", "-q", "--depth", "1", `${GIT}/${ns}-f${i}.git`, sha], { cwd: dir });
        await run("git", ["checkout", "-q", "FETCH_HEAD"], { cwd: dir });
        const tClone = Date.now();
        const image = `${REGISTRY}/${PREFIX}/${ns}/f${i}`;
        const meta = join(dir, "..", `${ns}-meta-${i}.json`);
        await run(
          binPath("buildctl"),
          [
            "--addr",
            BUILDKIT,
            "build",
            "--frontend",
            "dockerfile.v0",
            "--local",
            `context=${dir}`,
            "--local",
            `dockerfile=${dir}`,
            "--output",
            `type=image,name=${image}:${sha.slice(0, 12)},push=true,registry.insecure=true,oci-mediatypes=true`,
            "--metadata-file",
            meta,
          ],
          { maxBuffer: 64 * 1024 * 1024 },
        );
        const digest = (JSON.parse(readFileSync(meta, "utf8")) as Record<string, string>)["containerimage.digest"]!;
        const tBuild = Date.now();
        const s = AppSpec.parse({
          name: `f${i}`,
          slug: `${ns}-f${i}`,
          image: `${image}@${digest}`,
          cpuLimitMillicores: 100,
          memoryLimitMi: 96,
          visibility: "public",
        });
        const pulling = PULL ? { imagePullSecrets: [REGISTRY_PULL_SECRET] } : {};
        const objs = buildChildren(
          { name: `f${i}`, namespace: ns, uid: "none" },
          s,
          {},
          { baseDomain: DOMAIN, ...placement, ...pulling },
        ).map((o) => ({
          ...o,
          metadata: { ...o.metadata, ownerReferences: [] },
        }));
        for (const o of objs) await client.apply(o, OPERATOR_FIELD_MANAGER);
        const total = await serving(`${s.slug}.${DOMAIN}`, m, t0);
        const rel = (x?: number) => (x ? x - t0 : NaN);
        return {
          total,
          steps: {
            clone: tClone - t0,
            "build+push": tBuild - tClone,
            rollout: t0 + total - tBuild,
            ...rolloutSteps(pods.app(`f${i}`), tBuild - t0, rel, total),
          },
        };
      }),
    );
  } finally {
    pods.stop();
    await dropNamespace(core, ns);
  }
}

type Release = {
  status?: { phase?: string; buildStartedAt?: string; buildFinishedAt?: string; deployStartedAt?: string; deployedAt?: string };
};

/**
 * With buildkitd asking for a client certificate (hack's, BERTH_BUILDKIT_TLS_DIR), the operator's
 * mutual TLS as an installation has it: the original Secret in berth-system, which the operator
 * reads before each build and copies into the bench's namespace.
 */
async function buildkitTls(): Promise<Record<string, string>> {
  const dir = process.env.BERTH_BUILDKIT_TLS_DIR;
  if (!dir) return {};
  await client.apply({ apiVersion: "v1", kind: "Namespace", metadata: { name: "berth-system" } }, "bench");
  await client.apply(buildkitClientSecret("berth-system", readBuildkitClient(dir)), "bench");
  return { BERTH_BUILDKIT_TLS: "true", BERTH_NAMESPACE: "berth-system" };
}

async function berth(n: number, builderImage: string): Promise<Sample[]> {
  const ns = await benchNamespace(core, "berth", kc);
  const tls = await buildkitTls();
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
      BERTH_BUILDER_IMAGE: builderImage,
      BERTH_BUILDKIT_HOST: BUILDKIT_CLUSTER,
      BERTH_BUILD_REGISTRY: REGISTRY,
      BERTH_BUILD_REGISTRY_INSECURE: "true",
      BERTH_BUILD_REPOSITORY_PREFIX: PREFIX,
      ...(PULL ? { BERTH_REGISTRY_AUTH_KEY_FILE: need("BERTH_REGISTRY_AUTH_KEY_FILE") } : {}),
      ...tls,
    },
    stdio: ["ignore", "inherit", "inherit"],
  });
  let pods: PodTimes | undefined;
  try {
    const shas = await Promise.all(
      Array.from({ length: n }, async (_, i) => {
        const marker = `berth ${ns} ${i} ${Math.random()}`;
        return { sha: await repo(`${ns}-b${i}`, marker), marker };
      }),
    );
    pods = await podTimes(ns);
    await sleep(3000); // the operator's caches synced
    return await Promise.all(
      shas.map(async ({ sha, marker: m }, i) => {
        const name = `b${i}`;
        const t0 = Date.now();
        // What the API does on a push delivery: the App exists; a Release of the commit.
        const app = await client.create<KubeObject>(
          {
            apiVersion: API_VERSION,
            kind: "App",
            metadata: { name, namespace: ns },
            spec: {
              name,
              slug: `${ns}-${name}`,
              gitRepoUrl: `${GIT_CLUSTER}/${ns}-b${i}.git`,
              cpuLimitMillicores: 100,
              memoryLimitMi: 96,
              visibility: "public",
            },
          },
          "bench",
        );
        await client.create(
          {
            apiVersion: API_VERSION,
            kind: "Release",
            metadata: {
              name: `${name}-1`,
              namespace: ns,
              labels: { [APP_LABEL]: name },
              ownerReferences: [{ apiVersion: API_VERSION, kind: "App", name, uid: app.metadata.uid!, controller: false }],
            },
            spec: {
              appRef: { name },
              sequence: 1,
              trigger: "push",
              git: { repoUrl: `${GIT_CLUSTER}/${ns}-b${i}.git`, branch: "main", commitSha: sha, commitMessage: m },
            },
          },
          "bench",
        );
        const total = await serving(`${ns}-${name}.${DOMAIN}`, m, t0);
        const r = (await client.get<Release & { metadata: Record<string, unknown> }>({
          apiVersion: API_VERSION,
          kind: "Release",
          namespace: ns,
          name: `${name}-1`,
        }))!;
        const pod = (await core.listNamespacedPod({ namespace: ns, labelSelector: `${RELEASE_LABEL}=${name}-1` })).items[0];
        const result = JSON.parse(pod?.status?.containerStatuses?.[0]?.state?.terminated?.message ?? "{}") as {
          cloneMs?: number;
          buildMs?: number;
        };
        const at = (x?: string) => (x ? Date.parse(x) - t0 : NaN);
        const s = r.status ?? {};
        // The build program's first and last log lines, as the container runtime stamped them: the
        // Job's life splits into the pod's start (Job created to the program's first line) and the
        // exit seen (its last line to the operator's record of the outcome).
        const log = pod ? await core.readNamespacedPodLog({ namespace: ns, name: pod.metadata!.name!, timestamps: true }) : "";
        const stamps = log
          .split("\n")
          .filter(Boolean)
          .map((l) => Date.parse(l.slice(0, l.indexOf(" "))) - t0);
        const w = pods!.build(`${name}-1`);
        const a = pods!.app(name);
        const rel = (x?: number) => (x ? x - t0 : NaN);
        return {
          total,
          steps: {
            "queue (create to Job)": at(s.buildStartedAt),
            "pod start": (stamps[0] ?? NaN) - at(s.buildStartedAt),
            "(Job to pod": rel(w?.added) - at(s.buildStartedAt),
            "to bound": rel(w?.bound) - rel(w?.added),
            "to running": rel(w?.running) - rel(w?.bound),
            "to first line)": (stamps[0] ?? NaN) - rel(w?.running),
            clone: result.cloneMs ?? NaN,
            "build+push": result.buildMs ?? NaN,
            "exit seen": at(s.buildFinishedAt) - (stamps.at(-1) ?? NaN),
            rollout: total - at(s.buildFinishedAt),
            ...rolloutSteps(a, at(s.buildFinishedAt), rel, total),
          },
        };
      }),
    );
  } finally {
    pods?.stop();
    console.log(`  berth  the operator's CPU over the round: ${op.pid ? Math.round(cpuSeconds(op.pid) * 1000) : NaN} ms (${n} deploy(s))`);
    op.kill("SIGTERM");
    await batch.deleteCollectionNamespacedJob({ namespace: ns }).catch(() => undefined);
    await dropNamespace(core, ns);
  }
}

for (const args of [
  ["apply", "--server-side", "--force-conflicts", "-f", join(root, "crds/generated")],
  ["wait", "--for", "condition=Established", "--timeout=60s", "-f", join(root, "crds/generated")],
]) {
  await run(binPath("kubectl"), ["--kubeconfig", kubeconfig, ...args]);
}
const [builder] = await buildBerthImages({ registry: REGISTRY, addr: BUILDKIT, components: ["builder"], log: () => {} });
const show = (label: string, xs: Sample[]) => {
  const keys = Object.keys(xs[0]?.steps ?? {});
  console.log(
    `  ${label.padEnd(6)} total p50 ${quantile(
      xs.map((x) => x.total),
      0.5,
    )} ms p99 ${quantile(
      xs.map((x) => x.total),
      0.99,
    )} ms | ${keys
      .map(
        (k) =>
          `${k} p50 ${Math.round(
            quantile(
              xs.map((x) => x.steps![k]!),
              0.5,
            ),
          )}`,
      )
      .join(", ")}`,
  );
};
try {
  for (const n of [1, N]) {
    const overheads: number[] = [];
    for (let r = 1; r <= ROUNDS; r++) {
      let f: Sample[], b: Sample[];
      // The machine's CPU each side used (the whole node: control plane, runtime, BuildKit, Berth)
      const cpu = { floor: 0, berth: 0 };
      // and where: by process, and the API server's writes
      const byName = { floor: new Map<string, number>(), berth: new Map<string, number>() };
      const writes = { floor: new Map<string, number>(), berth: new Map<string, number>() };
      const measured = async <T>(side: keyof typeof cpu, fn: () => Promise<T>) => {
        const c0 = machineTicks().busy,
          p0 = cpuByProcessName(),
          w0 = await apiWrites();
        const out = await fn();
        cpu[side] = (machineTicks().busy - c0) * 10;
        for (const [name, s] of cpuByProcessName()) byName[side].set(name, s - (p0.get(name) ?? 0));
        for (const [k, v] of await apiWrites()) writes[side].set(k, v - (w0.get(k) ?? 0));
        return out;
      };
      if (r % 2) {
        f = await measured("floor", () => floor(n));
        b = await measured("berth", () => berth(n, builder!.reference));
      } else {
        b = await measured("berth", () => berth(n, builder!.reference));
        f = await measured("floor", () => floor(n));
      }
      const fs = [...f].sort((a, c) => a.total - c.total),
        bs = [...b].sort((a, c) => a.total - c.total);
      overheads.push(...bs.map((x, i) => x.total - fs[i]!.total));
      console.log(`${n} app(s), round ${r}:`);
      show("floor", f);
      show("berth", b);
      console.log(
        `  CPU busy on the machine (all cores): floor ${Math.round(cpu.floor)} ms, berth ${Math.round(cpu.berth)} ms; berth's extra per deploy ${Math.round((cpu.berth - cpu.floor) / n)} ms`,
      );
      const extra = <K>(m: { floor: Map<K, number>; berth: Map<K, number> }, scale: number, min: number) =>
        [...new Set([...m.floor.keys(), ...m.berth.keys()])]
          .map((k) => [k, (((m.berth.get(k) ?? 0) - (m.floor.get(k) ?? 0)) * scale) / n] as const)
          .filter(([, v]) => Math.abs(v) >= min)
          .sort((a, c) => c[1] - a[1]);
      const byProcess = extra(byName, 1000, 10),
        byWrite = extra(writes, 1, 0.5);
      console.log(
        `  berth's extra CPU per deploy by process (ms; a process counts the children it reaped): ${byProcess.map(([k, v]) => `${k} ${Math.round(v)}`).join(", ")}`,
      );
      console.log(
        `  berth's extra API writes per deploy: ${byWrite.reduce((a, [, v]) => a + v, 0).toFixed(1)} (${byWrite.map(([k, v]) => `${k} ${v.toFixed(1)}`).join(", ")})`,
      );
    }
    const p99 = quantile(overheads, 0.99);
    console.log(
      `${n} app(s): Berth's overhead per deploy (berth - floor, paired by rank): p50 ${quantile(overheads, 0.5)} ms, p99 ${p99} ms (goal < 2000 ms: ${p99 < 2000 ? "MET" : "MISSED"})`,
    );
  }
} finally {
  rmSync(work, { recursive: true, force: true });
}
