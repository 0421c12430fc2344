// Leader election on a real coordination.k8s.io Lease: one leader at a time, a fast hand-over
// on graceful stop (the Lease is released), and a leader that loses its Lease (stolen, or it
// cannot renew) stops leading before anyone else starts.
import test from "ava";
import * as k8s from "@kubernetes/client-node";
import { pino } from "pino";
import { LeaderElector, type LeaderElectionOptions } from "../../operator/runtime/index.ts";
import { deleteNamespace, eventually, kube, testNamespace, uniqueName } from "../helpers/kube.ts";
import { cuttableProxy as cutProxy } from "../helpers/proxy.ts";

const k = kube();
const leases = k.kc.makeApiClient(k8s.CoordinationV1Api);
const log = pino({ level: "silent" });
let ns = "";
test.before(async () => {
  ns = await testNamespace(k, "rt-leader");
});
test.after.always(async () => {
  await deleteNamespace(k, ns);
});

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const until = (what: string, cond: () => boolean, timeoutMs?: number) => eventually(what, () => Promise.resolve(cond()), timeoutMs, 20);

interface Candidate {
  elector: LeaderElector;
  identity: string;
  events: Array<{ at: number; what: "started" | "stopped" | "work-done" }>;
  run: Promise<void>;
}

function candidate(
  t: { teardown(fn: () => Promise<void>): void },
  kc: k8s.KubeConfig,
  opts: Omit<LeaderElectionOptions, "namespace" | "identity">,
): Candidate {
  const identity = uniqueName("id");
  const elector = new LeaderElector(kc, { namespace: ns, identity, ...opts }, log);
  const events: Candidate["events"] = [];
  const run = elector.run({
    onStartedLeading: async (signal) => {
      events.push({ at: Date.now(), what: "started" });
      await new Promise((resolve) => signal.addEventListener("abort", resolve, { once: true }));
      await sleep(100); // leading work winding down
      events.push({ at: Date.now(), what: "work-done" });
    },
    onStoppedLeading: () => {
      events.push({ at: Date.now(), what: "stopped" });
    },
  });
  t.teardown(() => elector.stop());
  return { elector, identity, events, run };
}

const readLease = (name: string) => leases.readNamespacedLease({ namespace: ns, name });
/**
 * The Lease, read again when a read goes unanswered for two seconds: a read the API server never
 * answered was seen in full runs on a loaded machine, and must fail the test, not hang it.
 */
async function readLeaseSoon(name: string): Promise<Awaited<ReturnType<typeof readLease>>> {
  for (let attempt = 1; ; attempt++) {
    const l = await Promise.race([readLease(name), sleep(2000).then(() => undefined)]);
    if (l) return l;
    if (attempt === 5) throw new Error(`the Lease ${name} could not be read in 5 attempts`);
  }
}
const fast = { leaseDurationSeconds: 3, renewDeadlineSeconds: 2, retryPeriodSeconds: 0.2 };

test("of two electors on one Lease exactly one leads", async (t) => {
  const name = uniqueName("lease");
  const a = candidate(t, k.kc, { name, ...fast });
  const b = candidate(t, k.kc, { name, ...fast });
  await until("a leader", () => a.elector.isLeader || b.elector.isLeader);
  const leader = a.elector.isLeader ? a : b;
  for (let i = 0; i < 40; i++) {
    t.true(a.elector.isLeader !== b.elector.isLeader, "exactly one leader");
    t.true(leader.elector.isLeader, "leadership is stable");
    await sleep(50);
  }
  const lease = await readLeaseSoon(name);
  t.is(lease.spec?.holderIdentity, leader.identity);
  t.is(lease.spec?.leaseDurationSeconds, 3);
  t.true(Date.now() - new Date(lease.spec!.renewTime as unknown as string).getTime() < 2000, "the leader renews");
  t.is([...a.events, ...b.events].filter((e) => e.what === "started").length, 1);
});

test("stopping the leader releases the Lease and the other takes over at once", async (t) => {
  const name = uniqueName("lease");
  const opts = { name, leaseDurationSeconds: 15, renewDeadlineSeconds: 10, retryPeriodSeconds: 0.2 };
  const a = candidate(t, k.kc, opts);
  await until("a to lead", () => a.elector.isLeader);
  const b = candidate(t, k.kc, opts);
  await sleep(500);
  t.false(b.elector.isLeader);

  const stoppedAt = Date.now();
  await a.elector.stop();
  await a.run;
  t.deepEqual(
    a.events.map((e) => e.what),
    ["started", "work-done", "stopped"],
    "the leading work ended before run() returned",
  );
  await until("b to lead", () => b.elector.isLeader, 5000);
  const took = Date.now() - stoppedAt;
  t.true(took < 3000, `hand-over took ${took} ms; without release it would take the 15 s lease duration`);
  t.is((await readLeaseSoon(name)).spec?.holderIdentity, b.identity);
  t.true(b.events[0]!.at >= a.events[1]!.at, "the successor started after the old leader's work was done");
});

test("a leader whose Lease is taken by another holder stops leading, and campaigns again", async (t) => {
  const name = uniqueName("lease");
  const a = candidate(t, k.kc, { name, ...fast });
  await until("a to lead", () => a.elector.isLeader);

  const lease = await readLeaseSoon(name);
  const now = new k8s.V1MicroTime();
  lease.spec = { ...lease.spec, holderIdentity: "thief", acquireTime: now, renewTime: now, leaseDurationSeconds: 30 };
  await leases.replaceNamespacedLease({ namespace: ns, name, body: lease });

  await until("a to step down", () => !a.elector.isLeader, 2000);
  await until("onStoppedLeading", () => a.events.some((e) => e.what === "stopped"), 2000);
  await sleep(600);
  t.false(a.elector.isLeader, "does not take a Lease that is held and not expired");
  t.is((await readLeaseSoon(name)).spec?.holderIdentity, "thief");

  // The thief releases: a becomes leader again.
  const held = await readLeaseSoon(name);
  held.spec = { ...held.spec, holderIdentity: undefined };
  await leases.replaceNamespacedLease({ namespace: ns, name, body: held });
  await until("a to lead again", () => a.elector.isLeader, 3000);
  t.is((await readLeaseSoon(name)).spec?.holderIdentity, a.identity);
  t.is(a.events.filter((e) => e.what === "started").length, 2);
});

/** The API server behind a proxy that can be cut (helpers/proxy.ts), and a kubeconfig through it. */
async function cuttableProxy(t: { teardown(fn: () => Promise<void>): void }) {
  const proxy = await cutProxy(new URL(k.kc.getCurrentCluster()!.server));
  t.teardown(() => proxy.close());
  const config = JSON.parse(k.kc.exportConfig()) as { clusters: Array<{ cluster: { server: string } }> };
  for (const c of config.clusters) c.cluster.server = `https://127.0.0.1:${proxy.port}`;
  const kc = new k8s.KubeConfig();
  kc.loadFromString(JSON.stringify(config));
  return { kc, cut: () => proxy.cut(), restore: () => proxy.restore() };
}

test("stop() while the Lease is being taken starts no leading work, releases the Lease and returns", async (t) => {
  const name = uniqueName("lease");
  const a = candidate(t, k.kc, { name, ...fast });
  // run() has sent its first read of the Lease; the stop comes before the Lease is taken
  const stopped = await Promise.race([a.elector.stop().then(() => "returned"), sleep(10_000).then(() => "hung")]);
  t.is(stopped, "returned", "stop() waited for leading work that could never see its signal");
  t.deepEqual(a.events, [], "no leading work started");
  t.false(a.elector.isLeader);
  const lease = await readLeaseSoon(name).catch(() => undefined);
  t.not(lease?.spec?.holderIdentity, a.identity, "the Lease is not left held");
});

test("a leader that cannot renew steps down within renewDeadline, before another takes the expired Lease", async (t) => {
  const name = uniqueName("lease");
  const proxy = await cuttableProxy(t);
  const a = candidate(t, proxy.kc, { name, ...fast });
  await until("a to lead", () => a.elector.isLeader);
  const b = candidate(t, k.kc, { name, ...fast });
  await sleep(500);
  t.false(b.elector.isLeader);

  // a's last renewal that reached the API server, watched from outside: the Lease expires from it.
  let aLastRenew = 0;
  let watching = true;
  // each read is given up after a second: a read the API server never answers (seen once in a full
  // run) must cost one sample, not hang the test past every deadline it checks
  const watchRenewals = (async () => {
    while (watching) {
      const l = await Promise.race([readLease(name).catch(() => undefined), sleep(1000).then(() => undefined)]);
      if (l?.spec?.holderIdentity === a.identity && l.spec.renewTime)
        aLastRenew = Math.max(aLastRenew, new Date(l.spec.renewTime).getTime());
      await sleep(50);
    }
  })();
  await sleep(300);
  const cutAt = Date.now();
  proxy.cut();
  await until("a to step down", () => !a.elector.isLeader, 5000);
  await until("b to take the expired Lease", () => b.elector.isLeader, 8000);
  watching = false;
  await watchRenewals;
  const aStopped = a.events.find((e) => e.what === "stopped")!.at;
  const bStarted = b.events.find((e) => e.what === "started")!.at;
  t.true(aStopped - cutAt >= 1500 && aStopped - cutAt < 3500, `a stepped down ${aStopped - cutAt} ms after the cut (renewDeadline 2 s)`);
  t.true(aStopped < bStarted, "never two leaders: a stopped before b started");
  t.true(
    aLastRenew > 0 && bStarted >= aLastRenew + fast.leaseDurationSeconds * 1000 - 50,
    `b waited for the lease to expire: it started ${bStarted - aLastRenew} ms after a's last renewal (lease ${fast.leaseDurationSeconds} s)`,
  );

  proxy.restore();
  await sleep(1000);
  t.false(a.elector.isLeader, "a stays a follower once it can reach the API again");
  t.is((await readLeaseSoon(name)).spec?.holderIdentity, b.identity);
});
