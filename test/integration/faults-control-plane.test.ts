// Fault tests (docs/reliability.md) of the control plane under the operator: kube-apiserver restarts, etcd
// compaction (watches answered 410 Gone), and a leader failover between two operator replicas.
//
// Isolation: these tests kill kube-apiserver and compact etcd, which would break every other test
// file running at the same time on the suite's control plane. So this file starts a control plane
// of its own (helpers/control-plane.ts: etcd, kube-apiserver and the garbage collector, from the
// binaries and flags of hack/cluster, on free ports) and points KUBECONFIG at it; the operator
// runs as the real process (`node operator/main.ts`) under the chart's ServiceAccount there.
import { readFileSync, writeFileSync } from "node:fs";
import test from "ava";
import * as yaml from "js-yaml";
import { API_VERSION, AppSpec } from "../../crds/schemas.ts";
import { KubeClient, type KubeObject } from "../../kube/client.ts";
import { buildChildren, CHILD_KINDS, type ChildKind } from "../../operator/app/builders.ts";
import { LEADER_ELECTION_LEASE } from "../../operator/main.ts";
import { dedicatedControlPlane, type DedicatedControlPlane } from "../helpers/control-plane.ts";
import { identity, RELEASE_NAMESPACE } from "../helpers/identities.ts";
import { eventually, kube, testNamespace } from "../helpers/kube.ts";
import { healthPortOf, logLines, spawnOperator, type NodeProcess } from "../helpers/processes.ts";
import { cuttableProxy, type CuttableProxy } from "../helpers/proxy.ts";

let cp: DedicatedControlPlane;
let client: KubeClient;
const running: NodeProcess[] = [];
const proxies: CuttableProxy[] = [];

test.before(async () => {
  cp = await dedicatedControlPlane();
  process.env.KUBECONFIG = cp.kubeconfig; // this file's process only: kube(), identity() and kubectl use it
  client = new KubeClient(kube().kc);
});
test.after.always(async () => {
  for (const p of running) await p.stop("SIGKILL");
  for (const p of proxies) await p.close();
  await cp?.stop();
});

type App = KubeObject & { spec: Record<string, unknown>; status?: { observedGeneration?: number } };
const appRef = (ns: string, name: string) => ({ apiVersion: API_VERSION, kind: "App", namespace: ns, name });
const spec = (name: string, tag = 1) => ({ name, slug: name, image: `registry.invalid/${name}:${tag}`, visibility: "public" });
const createApp = (ns: string, name: string, tag = 1) =>
  client.create({ apiVersion: API_VERSION, kind: "App", metadata: { name, namespace: ns }, spec: spec(name, tag) }, "faults");
const setImage = (ns: string, name: string, tag: number) =>
  client.mergePatch(appRef(ns, name), { spec: { image: `registry.invalid/${name}:${tag}` } }, "faults");
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function operator(ns: string, opts: { kubeconfig?: string; leaderElection?: boolean; identity?: string } = {}): Promise<NodeProcess> {
  const p = await spawnOperator({
    namespace: ns,
    leaderElection: opts.leaderElection ?? false,
    ...(opts.identity ? { identity: opts.identity } : {}),
    env: {
      BERTH_BASE_DOMAIN: "apps.faults.local",
      BERTH_OPERATOR_RESYNC_SECONDS: "10",
      ...(opts.kubeconfig ? { KUBECONFIG: opts.kubeconfig } : {}),
    },
  });
  running.push(p);
  return p;
}

/** Every object of the App child kinds in `ns`, as kind/name → object. */
async function children(ns: string): Promise<Map<string, KubeObject>> {
  const out = new Map<string, KubeObject>();
  for (const [kind, v] of Object.entries(CHILD_KINDS) as [ChildKind, { apiVersion: string }][]) {
    for (const o of (await client.list<KubeObject>(v.apiVersion, kind, ns)).items) out.set(`${kind}/${o.metadata.name}`, o);
  }
  return out;
}

/** What differs from "every App's children are exactly its spec's, and nothing else exists". */
async function divergence(ns: string): Promise<string[]> {
  const problems: string[] = [];
  const apps = (await client.list<App>(API_VERSION, "App", ns)).items;
  const want = new Set<string>();
  const have = await children(ns);
  for (const a of apps) {
    const name = a.metadata.name!;
    if (a.status?.observedGeneration !== a.metadata.generation)
      problems.push(`App ${name}: generation ${a.metadata.generation} not observed (${a.status?.observedGeneration})`);
    const s = AppSpec.parse(a.spec);
    for (const c of buildChildren(
      { name, namespace: ns, uid: a.metadata.uid! },
      s,
      {},
      { baseDomain: "apps.faults.local", edge: { controller: "traefik", forwardAuthUrl: "http://api.invalid/api/v1/forward-auth" } },
    )) {
      const key = `${c.kind}/${c.metadata.name}`;
      want.add(key);
      const live = have.get(key);
      if (!live) {
        problems.push(`${key} is missing`);
        continue;
      }
      if (live.metadata.ownerReferences?.find((r) => r.controller)?.uid !== a.metadata.uid)
        problems.push(`${key} is not controlled by App ${name}`);
      if (c.kind === "Deployment") {
        const image = (live as { spec?: { template?: { spec?: { containers?: { image?: string }[] } } } }).spec?.template?.spec
          ?.containers?.[0]?.image;
        if (image !== s.image) problems.push(`${key}: image ${image}, want ${s.image}`);
      }
    }
  }
  for (const key of have.keys()) if (!want.has(key)) problems.push(`${key} exists but no App wants it`);
  return problems;
}

async function converged(ns: string, what: string, timeoutMs = 120_000, op?: NodeProcess): Promise<void> {
  let last: string[] = [];
  await eventually(
    what,
    async () => {
      last = await divergence(ns);
      return last.length === 0;
    },
    timeoutMs,
    500,
  ).catch((err: unknown) => {
    throw new Error(`${(err as Error).message}\n  ${last.join("\n  ")}${op ? `\n--- operator ---\n${op.tail(20)}` : ""}`);
  });
}

/** Sum of a counter of the operator's /metrics, over the series whose labels match `labels`. */
async function metric(p: NodeProcess, name: string, labels: (l: string) => boolean = () => true): Promise<number> {
  const text = await (await fetch(`http://127.0.0.1:${healthPortOf(p)}/metrics`)).text();
  let sum = 0;
  for (const m of text.matchAll(new RegExp(`^${name}(?:\\{([^}]*)\\})? ([0-9.e+-]+)$`, "gm"))) if (labels(m[1] ?? "")) sum += Number(m[2]);
  return sum;
}
/** Requests that write anything but the Lease (the one write a follower makes). */
const writesBesidesLease = (p: NodeProcess) =>
  metric(p, "berth_kube_requests_total", (l) => /verb="(create|apply|patch|update|delete)"/.test(l) && !/resource="leases"/.test(l));

test.serial("kube-apiserver restarts: the operator's watches resume, and changes made right after and later are reconciled", async (t) => {
  t.timeout(8 * 60_000);
  const ns = await testNamespace(kube(), "fcp");
  const op = await operator(ns);
  for (const n of ["x1", "x2"]) await createApp(ns, n);
  await converged(ns, "the first Apps to converge", 120_000, op);

  for (let round = 1; round <= 2; round++) {
    await cp.stopApiServer("SIGKILL");
    await sleep(2000); // the operator's watches and requests fail meanwhile
    await cp.startApiServer();
    // at once, while the operator is still backing off: an update, a create, a delete
    await setImage(ns, "x1", 1 + round);
    await createApp(ns, `x${2 + round}`);
    await client.delete(appRef(ns, round === 1 ? "x2" : "x3"));
    await converged(ns, `the changes made right after restart ${round} to be reconciled`, 180_000, op);
  }
  // later changes still flow through the resumed watches
  await setImage(ns, "x4", 7);
  await converged(ns, "a later change to be reconciled", 120_000, op);
  const failures = logLines(op).filter((l) => l.msg === "watch failed; restarting");
  t.true(failures.length > 0, "the operator's watches failed while the API server was down (else nothing was tested)");
  t.is(op.child.exitCode, null, "the operator kept running");
});

test.serial("etcd compacted while the operator is cut off: its watches get 410 Gone, it relists, and nothing is missed", async (t) => {
  t.timeout(8 * 60_000);
  const ns = await testNamespace(kube(), "fcp");
  const flood = await testNamespace(kube(), "flood");
  // The operator reaches the API server through a proxy that can be cut.
  const proxy = await cuttableProxy(new URL(cp.server));
  proxies.push(proxy);
  const id = await identity("operator");
  const kc = yaml.load(readFileSync(id.kubeconfig, "utf8")) as { clusters: { cluster: { server: string } }[] };
  for (const c of kc.clusters) c.cluster.server = `https://127.0.0.1:${proxy.port}`;
  const kubeconfig = `${id.kubeconfig}-proxied`;
  writeFileSync(kubeconfig, yaml.dump(kc), { mode: 0o600 });
  const op = await operator(ns, { kubeconfig });
  for (const n of ["y1", "y2"]) await createApp(ns, n);
  await converged(ns, "the first Apps to converge", 120_000, op);

  proxy.cut();
  // What happens while it is cut off: an update, a create, a delete...
  await setImage(ns, "y1", 2);
  await createApp(ns, "y3");
  await client.delete(appRef(ns, "y2"));
  // ...a flood of writes to the kinds it watches (elsewhere), and the history compacted away.
  for (let i = 0; i < 20; i++) await createApp(flood, `z${i}`);
  for (let round = 2; round <= 10; round++) for (let i = 0; i < 20; i++) await setImage(flood, `z${i}`, round);
  const revision = await cp.compact();
  // The API server's watch cache keeps recent history in memory whatever etcd holds; restarting it
  // makes the cache start at the compacted revision, as after a long partition or a failover of
  // the API server: nothing older than `revision` can be served any more, by the cache or by etcd.
  await cp.stopApiServer("SIGTERM");
  await cp.startApiServer();
  t.log(`etcd compacted at revision ${revision}`);
  proxy.restore();

  await eventually(
    "the operator's App watch to be answered 410 Gone and relist",
    () => Promise.resolve(logLines(op).some((l) => l.msg === "watch expired (410 Gone); relisting" && l.resource === "apps")),
    120_000,
    500,
  ).catch((err: unknown) => {
    throw new Error(`${(err as Error).message}\n${op.tail(30)}`);
  });
  await converged(ns, "the changes made while the operator was cut off to be reconciled", 180_000, op);
  await setImage(ns, "y3", 5);
  await converged(ns, "a change after the relist to be reconciled", 120_000, op);
  t.is(op.child.exitCode, null, "the operator kept running");
});

test.serial(
  "two replicas: the leader is killed mid-reconcile, the other takes over within the lease time, and nothing is written twice",
  async (t) => {
    t.timeout(8 * 60_000);
    const ns = await testNamespace(kube(), "fcp");
    const a = await operator(ns, { leaderElection: true, identity: "replica-a" });
    const b = await operator(ns, { leaderElection: true, identity: "replica-b" });
    const leaseRef = { apiVersion: "coordination.k8s.io/v1", kind: "Lease", namespace: RELEASE_NAMESPACE, name: LEADER_ELECTION_LEASE };
    type Lease = KubeObject & {
      spec?: {
        holderIdentity?: string;
        leaseDurationSeconds?: number;
        renewTime?: string;
        acquireTime?: string;
        leaseTransitions?: number;
      };
    };
    const first = await eventually("a leader", async () => (await client.get<Lease>(leaseRef))?.spec?.holderIdentity, 60_000);
    const [leader, follower] = first === "replica-a" ? [a, b] : [b, a];
    t.log(`leader ${first}`);

    const names = Array.from({ length: 8 }, (_, i) => `w${i}`);
    for (const n of names.slice(0, 4)) await createApp(ns, n);
    await converged(ns, "the first Apps to converge under the leader", 120_000, leader);
    t.is(await writesBesidesLease(follower), 0, "the follower wrote nothing while the other led");

    // A burst of creates, and the leader killed while it works on them.
    for (const n of names.slice(4)) await createApp(ns, n);
    await sleep(300);
    const before = await client.get<Lease>(leaseRef);
    await leader.stop("SIGKILL");
    const duration = before?.spec?.leaseDurationSeconds ?? 15;
    // bounded: the Lease expires `duration` after its last renewal; the follower retries every 2 s (+20 %)
    const after = await eventually(
      `the follower to take the Lease within its duration (${duration} s) and a retry period`,
      async () => {
        const l = await client.get<Lease>(leaseRef);
        return l?.spec?.holderIdentity === (follower === a ? "replica-a" : "replica-b") ? l : undefined;
      },
      (duration + 15) * 1000,
      200,
    );
    t.is(after.spec?.leaseTransitions, (before?.spec?.leaseTransitions ?? 0) + 1, "one transition");
    t.log(
      `taken over ${(Date.parse(after.spec!.acquireTime!) - Date.parse(before!.spec!.renewTime!)) / 1000} s after the dead leader's last renewal (lease ${duration} s)`,
    );
    await converged(ns, "every App to converge under the new leader", 120_000, follower);

    // No double writes: once converged, the new leader's resyncs (every 10 s) write nothing, and no
    // App or child changes.
    const snapshot = async () => {
      const out = new Map<string, string>();
      for (const [k, o] of await children(ns)) out.set(k, o.metadata.resourceVersion!);
      for (const o of (await client.list<App>(API_VERSION, "App", ns)).items)
        out.set(`App/${o.metadata.name}`, o.metadata.resourceVersion!);
      return out;
    };
    const writes0 = await writesBesidesLease(follower);
    const reconciles0 = await metric(follower, "berth_reconcile_total", (l) => l.includes(`controller="app"`));
    const s0 = await snapshot();
    await eventually(
      "a full resync of the new leader",
      async () => (await metric(follower, "berth_reconcile_total", (l) => l.includes(`controller="app"`))) >= reconciles0 + names.length,
      60_000,
      500,
    );
    t.is(await writesBesidesLease(follower), writes0, "the new leader wrote nothing once converged");
    const s1 = await snapshot();
    // (this control plane runs no workload controllers: nothing but the operator writes these)
    for (const [k, rv] of s0) t.is(s1.get(k), rv, `${k} was not written again`);
    // and it reconciles what comes next
    await setImage(ns, "w0", 9);
    await converged(ns, "a change under the new leader", 120_000, follower);
  },
);
