// The Manager and the health server end to end: probes and metrics over HTTP, controllers
// that run only in the elected replica, and a graceful stop that hands over at once.
import test from "ava";
import * as k8s from "@kubernetes/client-node";
import { pino } from "pino";
import { KubeClient, OPERATOR_FIELD_MANAGER, type KubeObject } from "../../kube/index.ts";
import { HealthServer, Manager, Metrics, type Reconciler } from "../../operator/runtime/index.ts";
import { deleteNamespace, eventually, kube, testNamespace, uniqueName } from "../helpers/kube.ts";

const k = kube();
const client = new KubeClient(k.kc);
const leases = k.kc.makeApiClient(k8s.CoordinationV1Api);
const log = pino({ level: "silent" });
let ns = "";
test.before(async () => {
  ns = await testNamespace(k, "rt-manager");
});
test.after.always(async () => {
  await deleteNamespace(k, ns);
});

const until = (what: string, cond: () => boolean, timeoutMs?: number) => eventually(what, () => Promise.resolve(cond()), timeoutMs, 20);
const get = async (port: number, path: string, method = "GET") => {
  const res = await fetch(`http://127.0.0.1:${port}${path}`, { method });
  return { status: res.status, type: res.headers.get("content-type") ?? "", body: await res.text() };
};
/** The value of one sample in Prometheus text, e.g. sample(text, 'berth_leader{identity="a"}'). */
const sample = (text: string, series: string): number | undefined => {
  const line = text.split("\n").find((l) => l.startsWith(`${series} `));
  return line === undefined ? undefined : Number(line.slice(series.length + 1));
};

test("the health server serves liveness, readiness with the failing checks, and metrics", async (t) => {
  const metrics = new Metrics();
  let cacheReady = false;
  const health = new HealthServer({
    port: 0,
    metrics,
    readiness: [
      { name: "cache", check: () => cacheReady },
      { name: "database", check: () => Promise.resolve(true) },
      { name: "broken", check: () => Promise.reject(new Error("boom")) },
    ],
  });
  const { port } = await health.start();
  t.teardown(() => health.stop());
  t.true(port > 0);

  t.is((await get(port, "/healthz")).status, 200);
  const notReady = await get(port, "/readyz");
  t.is(notReady.status, 503);
  t.regex(notReady.body, /\[-\]cache failed/);
  t.regex(notReady.body, /\[\+\]database ok/);
  t.regex(notReady.body, /readyz check failed: cache, broken/);

  cacheReady = true;
  const stillBroken = await get(port, "/readyz");
  t.is(stillBroken.status, 503);
  t.false(stillBroken.body.includes("[-]cache"));

  metrics.reconcileTotal.inc({ controller: "x", result: "success" }, 3);
  const m = await get(port, "/metrics");
  t.is(m.status, 200);
  t.true(m.type.startsWith("text/plain"));
  t.is(sample(m.body, 'berth_reconcile_total{controller="x",result="success"}'), 3);
  t.regex(m.body, /^process_cpu_user_seconds_total /m, "default process metrics on the same registry");
  t.is((await get(port, "/nope")).status, 404);
  t.is((await get(port, "/healthz", "POST")).status, 405);

  await health.stop();
  await t.throwsAsync(get(port, "/healthz"));
});

test("a health server whose checks all pass is ready", async (t) => {
  const health = new HealthServer({ port: 0, metrics: new Metrics(), readiness: [{ name: "a", check: () => true }] });
  const { port } = await health.start();
  t.teardown(() => health.stop());
  const r = await get(port, "/readyz");
  t.is(r.status, 200);
  t.regex(r.body, /\[\+\]a ok/);
});

/** A Manager with one controller that copies ConfigMaps (by label) into owned Secrets. */
function copyManager(label: string, leaderElection: ConstructorParameters<typeof Manager>[0]["leaderElection"]) {
  const metrics = new Metrics();
  const manager = new Manager({ kc: k.kc, log, metrics, health: { port: 0 }, leaderElection });
  const selector = { namespace: ns, labelSelector: `rt-test=${label}` };
  const configMaps = manager.informer<KubeObject & { data?: Record<string, string> }>({
    apiVersion: "v1",
    kind: "ConfigMap",
    plural: "configmaps",
    ...selector,
  });
  const secrets = manager.informer({ apiVersion: "v1", kind: "Secret", plural: "secrets", ...selector });
  const reconciled: string[] = [];
  const reconciler: Reconciler = {
    async reconcile(req) {
      reconciled.push(req.name);
      const cm = configMaps.get(req.namespace, req.name);
      if (!cm) return;
      await client.apply(
        {
          apiVersion: "v1",
          kind: "Secret",
          metadata: {
            name: `${req.name}-copy`,
            namespace: req.namespace,
            labels: { "rt-test": label },
            ownerReferences: [{ apiVersion: "v1", kind: "ConfigMap", name: req.name, uid: cm.metadata.uid!, controller: true }],
          },
          stringData: cm.data ?? {},
        },
        OPERATOR_FIELD_MANAGER,
      );
    },
  };
  const controller = manager.addController({ name: "copy", primary: configMaps, owned: [secrets], reconciler });
  return { manager, metrics, controller, configMaps, secrets, reconciled };
}

const createCm = (name: string, label: string) =>
  k.core.createNamespacedConfigMap({ namespace: ns, body: { metadata: { name, labels: { "rt-test": label } }, data: { k: name } } });
const secretExists = (name: string) => () =>
  k.core.readNamespacedSecret({ namespace: ns, name }).then(
    () => true,
    () => false,
  );

test("only the elected manager reconciles; its metrics count it; a graceful stop hands over at once", async (t) => {
  const label = uniqueName("l");
  const lease = uniqueName("lease");
  const election = (identity: string) => ({
    namespace: ns,
    name: lease,
    identity,
    leaseDurationSeconds: 15,
    renewDeadlineSeconds: 10,
    retryPeriodSeconds: 0.2,
  });
  const a = copyManager(label, election("a"));
  const b = copyManager(label, election("b"));
  t.teardown(async () => {
    await Promise.all([a.manager.stop(), b.manager.stop()]);
  });
  await createCm(uniqueName("before"), label);

  await a.manager.start();
  t.true(a.configMaps.synced && a.secrets.synced, "start() resolves with the caches synced");
  await until("a to lead", () => a.manager.isLeader);
  await b.manager.start();
  const first = uniqueName("first");
  await createCm(first, label);
  await eventually("the child of the first ConfigMap", secretExists(`${first}-copy`));
  t.false(b.manager.isLeader);
  t.deepEqual(b.reconciled, [], "the follower reconciles nothing");

  const aPort = a.manager.healthPort!;
  for (const port of [aPort, b.manager.healthPort!]) {
    t.is((await get(port, "/healthz")).status, 200);
    t.is((await get(port, "/readyz")).status, 200, "followers are ready too: they serve probes and keep warm caches");
  }
  const reconciles = async () => (await a.metrics.reconcileTotal.get()).values.reduce((n, v) => n + v.value, 0);
  // Read the scrape while no reconcile is finishing, so that it can be compared with the counters.
  const { text, total } = await eventually("a quiet scrape", async () => {
    const before = await reconciles();
    const text = (await get(aPort, "/metrics")).body;
    return a.controller.queue.length === 0 && (await reconciles()) === before ? { text, total: before } : undefined;
  });
  t.true(total >= 2, `reconciles counted: ${total}`);
  t.is(sample(text, 'berth_reconcile_total{controller="copy",result="success"}'), total);
  t.is(sample(text, 'berth_reconcile_duration_seconds_count{controller="copy"}'), total);
  t.is(sample(text, 'berth_reconcile_total{controller="copy",result="error"}'), undefined, "no errors");
  t.true(sample(text, 'berth_workqueue_adds_total{controller="copy"}')! >= 2);
  t.is(sample(text, 'berth_workqueue_depth{controller="copy"}'), 0);
  t.is(sample(text, 'berth_leader{identity="a"}'), 1);
  t.is(sample((await get(b.manager.healthPort!, "/metrics")).body, 'berth_leader{identity="b"}'), 0);

  const stoppedAt = Date.now();
  await a.manager.stop();
  await until("b to lead", () => b.manager.isLeader, 5000);
  t.true(Date.now() - stoppedAt < 3000, "the released Lease is taken without waiting for expiry");
  await t.throwsAsync(get(aPort, "/healthz"), undefined, "a's health server is closed");
  const second = uniqueName("second");
  await createCm(second, label);
  await eventually("the new leader to reconcile", secretExists(`${second}-copy`));
  t.true(b.reconciled.includes(second));

  await b.manager.stop();
  const l = await leases.readNamespacedLease({ namespace: ns, name: lease });
  t.falsy(l.spec?.holderIdentity, "the last leader released the Lease on stop");
});

test("without leader election controllers run at once; informers are shared; registration ends at start", async (t) => {
  const label = uniqueName("l");
  const { manager, configMaps } = copyManager(label, false);
  t.teardown(() => manager.stop());
  t.is(
    manager.informer({ apiVersion: "v1", kind: "ConfigMap", plural: "configmaps", namespace: ns, labelSelector: `rt-test=${label}` }),
    configMaps,
    "one informer per resource and selector",
  );
  t.not(manager.informer({ apiVersion: "v1", kind: "ConfigMap", plural: "configmaps", namespace: ns }), configMaps);
  await manager.start();
  t.true(manager.isLeader);
  const name = uniqueName("cm");
  await createCm(name, label);
  await eventually("the child", secretExists(`${name}-copy`));
  t.throws(() => manager.addController({ name: "late", primary: configMaps, reconciler: { reconcile: () => Promise.resolve() } }), {
    message: /before start/,
  });
  t.throws(() => manager.informer({ apiVersion: "v1", kind: "Pod", plural: "pods", namespace: ns }), { message: /before start/ });
});
