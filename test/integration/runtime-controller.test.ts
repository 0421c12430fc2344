// The controller runtime against the real API server: a controller that copies each
// ConfigMap's data into an owned Secret (server-side apply) converges whatever happens to the
// child, never reconciles one key twice at once, retries errors with backoff, does not retry
// terminal errors, and resyncs.
import test from "ava";
import { Writable } from "node:stream";
import { pino } from "pino";
import { ListWatchInformer, type Informer, KubeClient, OPERATOR_FIELD_MANAGER, type KubeObject } from "../../kube/index.ts";
import {
  Controller,
  Metrics,
  TerminalError,
  specChanged,
  type ControllerOptions,
  type Reconciler,
  type Request,
} from "../../operator/runtime/index.ts";
import { deleteNamespace, eventually, kube, testNamespace, uniqueName } from "../helpers/kube.ts";

const k = kube();
const client = new KubeClient(k.kc);
let ns = "";
test.before(async () => {
  ns = await testNamespace(k, "rt-ctrl");
});
test.after.always(async () => {
  await deleteNamespace(k, ns);
});

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const until = (what: string, cond: () => boolean, timeoutMs?: number) => eventually(what, () => Promise.resolve(cond()), timeoutMs);
const b64 = (s: string) => Buffer.from(s).toString("base64");
type ConfigMap = KubeObject & { data?: Record<string, string> };

/** Log lines written by the controller, parsed. */
function captureLog() {
  const lines: Array<Record<string, unknown>> = [];
  const stream = new Writable({
    write(chunk: Buffer, _enc, cb) {
      lines.push(JSON.parse(chunk.toString()) as Record<string, unknown>);
      cb();
    },
  });
  return { log: pino({ level: "info" }, stream), lines };
}

interface Harness {
  label: string;
  configMaps: Informer<ConfigMap>;
  controller: Controller;
  metrics: Metrics;
  lines: Array<Record<string, unknown>>;
}

/** Informers over this test's ConfigMaps and Secrets (by label) and a started controller. */
async function harness(
  t: { teardown(fn: () => Promise<void>): void },
  reconciler: (h: { label: string; configMaps: Informer<ConfigMap> }) => Reconciler,
  opts: Partial<ControllerOptions> = {},
): Promise<Harness> {
  const label = uniqueName("l");
  const selector = { namespace: ns, labelSelector: `rt-test=${label}` };
  const configMaps = new ListWatchInformer<ConfigMap>(k.kc, { apiVersion: "v1", kind: "ConfigMap", plural: "configmaps", ...selector });
  const secrets = new ListWatchInformer<KubeObject>(k.kc, { apiVersion: "v1", kind: "Secret", plural: "secrets", ...selector });
  await Promise.all([configMaps.start(), secrets.start()]);
  const metrics = new Metrics();
  const { log, lines } = captureLog();
  const controller = new Controller({
    name: "copy",
    primary: configMaps,
    owned: [secrets],
    reconciler: reconciler({ label, configMaps }),
    metrics,
    log,
    ...opts,
  });
  controller.start();
  t.teardown(async () => {
    await controller.stop({ timeoutMs: 1000 });
    await Promise.all([configMaps.stop(), secrets.stop()]);
  });
  return { label, configMaps, controller, metrics, lines };
}

/** Copies a ConfigMap's data into the Secret `<name>-copy` it controls. */
function copier({ label, configMaps }: { label: string; configMaps: Informer<ConfigMap> }): Reconciler {
  return {
    async reconcile(req: Request) {
      const cm = configMaps.get(req.namespace, req.name);
      if (!cm) return; // the Secret goes with it: garbage collection follows the ownerReference
      await client.apply(
        {
          apiVersion: "v1",
          kind: "Secret",
          metadata: {
            name: `${req.name}-copy`,
            namespace: req.namespace,
            labels: { "rt-test": label },
            ownerReferences: [
              { apiVersion: "v1", kind: "ConfigMap", name: req.name, uid: cm.metadata.uid!, controller: true, blockOwnerDeletion: true },
            ],
          },
          data: Object.fromEntries(Object.entries(cm.data ?? {}).map(([key, v]) => [key, b64(v)])),
        },
        OPERATOR_FIELD_MANAGER,
      );
    },
  };
}

async function createConfigMap(label: string, name: string, data: Record<string, string>) {
  return k.core.createNamespacedConfigMap({ namespace: ns, body: { metadata: { name, labels: { "rt-test": label } }, data } });
}
const readSecret = (name: string) => k.core.readNamespacedSecret({ namespace: ns, name }).catch(() => undefined);
const secretHas = (name: string, data: Record<string, string>) => async () => {
  const s = await readSecret(name);
  return s &&
    Object.entries(data).every(([key, v]) => s.data?.[key] === b64(v)) &&
    Object.keys(s.data ?? {}).length === Object.keys(data).length
    ? s
    : undefined;
};
async function counter(metrics: Metrics, result: string): Promise<number> {
  return (await metrics.reconcileTotal.get()).values.find((v) => v.labels.result === result)?.value ?? 0;
}

test("creating, updating and deleting the child by hand all converge", async (t) => {
  const h = await harness(t, copier);
  const name = uniqueName("cm");
  const child = `${name}-copy`;
  const cm = await createConfigMap(h.label, name, { greeting: "hello" });

  const created = await eventually("the child to be created", secretHas(child, { greeting: "hello" }));
  t.deepEqual(
    created.metadata?.ownerReferences?.map((r) => [r.kind, r.name, r.uid, r.controller]),
    [["ConfigMap", name, cm.metadata!.uid, true]],
  );

  await k.core.patchNamespacedConfigMap({
    namespace: ns,
    name,
    body: [{ op: "replace", path: "/data", value: { greeting: "bonjour", extra: "1" } }],
  });
  await eventually("the child to follow the parent", secretHas(child, { greeting: "bonjour", extra: "1" }));

  // Someone edits the child by hand: the controller takes its field back.
  await k.core.patchNamespacedSecret({
    namespace: ns,
    name: child,
    body: [{ op: "replace", path: "/data/greeting", value: b64("tampered") }],
  });
  await eventually("the hand edit to be reverted", secretHas(child, { greeting: "bonjour", extra: "1" }));

  // Someone deletes the child: it comes back.
  const before = await readSecret(child);
  await k.core.deleteNamespacedSecret({ namespace: ns, name: child });
  const recreated = await eventually("the child to be recreated", async () => {
    const s = await secretHas(child, { greeting: "bonjour", extra: "1" })();
    return s && s.metadata?.uid !== before?.metadata?.uid ? s : undefined;
  });
  t.not(recreated.metadata?.uid, before?.metadata?.uid);

  // The parent goes: its child follows (ownerReference + garbage collection).
  await k.core.deleteNamespacedConfigMap({ namespace: ns, name });
  await eventually("the child to be collected", async () => (await readSecret(child)) === undefined, 60_000);
  t.true((await counter(h.metrics, "success")) >= 4);
  t.is(await counter(h.metrics, "error"), 0);
});

test("with concurrency > 1 one key is never reconciled twice at once", async (t) => {
  const active = new Set<string>();
  const runs = new Map<string, number>();
  let overlaps = 0;
  let maxParallel = 0;
  const h = await harness(
    t,
    () => ({
      async reconcile(req) {
        const key = `${req.namespace}/${req.name}`;
        if (active.has(key)) overlaps++;
        active.add(key);
        maxParallel = Math.max(maxParallel, active.size);
        runs.set(key, (runs.get(key) ?? 0) + 1);
        await sleep(25);
        active.delete(key);
      },
    }),
    { concurrency: 4 },
  );
  const names = [uniqueName("cm"), uniqueName("cm"), uniqueName("cm")];
  await Promise.all(names.map((n) => createConfigMap(h.label, n, { v: "0" })));
  // Hammer the same keys from every path at once: informer events, direct enqueues, requeues.
  const deadline = Date.now() + 2500;
  let i = 0;
  while (Date.now() < deadline) {
    for (const n of names) h.controller.enqueue({ namespace: ns, name: n });
    if (i % 5 === 0)
      await Promise.all(
        names.map((n) =>
          k.core.patchNamespacedConfigMap({ namespace: ns, name: n, body: [{ op: "replace", path: "/data/v", value: String(i) }] }),
        ),
      );
    h.controller.queue.addAfter(`${ns}/${names[i % 3]!}`, 5);
    i++;
    await sleep(5);
  }
  await until("the queue to drain", () => h.controller.queue.length === 0 && active.size === 0);
  t.is(overlaps, 0, "a key ran while it was already running");
  t.true(maxParallel > 1, `different keys ran in parallel (max ${maxParallel})`);
  for (const n of names) t.true((runs.get(`${ns}/${n}`) ?? 0) >= 10, `${n} ran ${runs.get(`${ns}/${n}`)} times`);
});

test("an error retries with growing backoff until success", async (t) => {
  const calls: number[] = [];
  const h = await harness(
    t,
    (ctx) => {
      const copy = copier(ctx);
      return {
        async reconcile(req, rctx) {
          calls.push(Date.now());
          if (calls.length <= 4) throw new Error(`transient failure ${calls.length}`);
          await copy.reconcile(req, rctx);
        },
      };
    },
    { baseDelayMs: 100 },
  );
  const name = uniqueName("cm");
  await createConfigMap(h.label, name, { a: "b" });
  await eventually("the child after retries", secretHas(`${name}-copy`, { a: "b" }));
  const gaps = calls.slice(1, 5).map((c, i) => c - calls[i]!);
  // 100, 200, 400, 800 ms: each at least its backoff, and growing.
  [100, 200, 400, 800].forEach((min, i) => t.true(gaps[i]! >= min - 5, `retry ${i + 1} after ${gaps[i]} ms, expected >= ${min}`));
  // the child is written inside the last reconcile, before it returns and the queue forgets the key
  await until("success forgets the failures", () => h.controller.queue.numRequeues(`${ns}/${name}`) === 0);
  t.is(await counter(h.metrics, "error"), 4);
  t.is((await h.metrics.reconcileErrors.get()).values[0]?.value, 4);
  t.true((await counter(h.metrics, "success")) >= 1);
  const errors = h.lines.filter((l) => l.level === 50);
  t.is(errors.length, 4);
  t.true(
    errors.every(
      (l) =>
        l.object === `${ns}/${name}` && l.controller === "copy" && (l.err as { message: string }).message.startsWith("transient failure"),
    ),
  );
});

test("a TerminalError is recorded and not retried", async (t) => {
  let calls = 0;
  const h = await harness(
    t,
    () => ({
      reconcile() {
        calls++;
        return Promise.reject(new TerminalError("spec can never work"));
      },
    }),
    { baseDelayMs: 20 },
  );
  const name = uniqueName("cm");
  await createConfigMap(h.label, name, { a: "b" });
  await until("the first reconcile", () => calls === 1);
  await sleep(1000);
  t.is(calls, 1, "not retried");
  t.is(await counter(h.metrics, "terminal"), 1);
  t.is(await counter(h.metrics, "error"), 0);
  t.is(h.controller.queue.numRequeues(`${ns}/${name}`), 0);
  t.true(h.lines.some((l) => l.level === 50 && l.object === `${ns}/${name}` && (l.err as { type: string }).type === "TerminalError"));
  // A new change to the object is looked at again.
  await k.core.patchNamespacedConfigMap({ namespace: ns, name, body: [{ op: "replace", path: "/data/a", value: "c" }] });
  await until("a reconcile after the change", () => calls === 2);
  t.pass();
});

test("requeueAfterMs looks at the key again later", async (t) => {
  const calls: number[] = [];
  const h = await harness(t, () => ({
    reconcile() {
      calls.push(Date.now());
      return Promise.resolve(calls.length < 3 ? { requeueAfterMs: 300 } : {});
    },
  }));
  await createConfigMap(h.label, uniqueName("cm"), {});
  await until("three reconciles", () => calls.length >= 3);
  await sleep(700);
  t.is(calls.length, 3, "no requeue once the reconciler stops asking");
  t.true(calls[1]! - calls[0]! >= 295 && calls[2]! - calls[1]! >= 295);
  t.is(await counter(h.metrics, "requeue"), 2);
  t.is(await counter(h.metrics, "success"), 1);
});

test("periodic resync reconciles every object again", async (t) => {
  const runs = new Map<string, number>();
  const h = await harness(
    t,
    () => ({
      reconcile(req) {
        runs.set(req.name, (runs.get(req.name) ?? 0) + 1);
        return Promise.resolve();
      },
    }),
    { resyncPeriodMs: 300 },
  );
  const names = [uniqueName("cm"), uniqueName("cm")];
  await Promise.all(names.map((n) => createConfigMap(h.label, n, {})));
  await until("several resyncs of each object", () => names.every((n) => (runs.get(n) ?? 0) >= 4), 10_000);
  t.pass();
});

test("stop waits for in-flight reconciles, then aborts them after the timeout", async (t) => {
  let finished = 0;
  let aborted = 0;
  const h = await harness(t, () => ({
    async reconcile(_req, { signal }) {
      const slow = _req.name.startsWith("slow");
      await new Promise<void>((resolve) => {
        const onAbort = () => {
          clearTimeout(timer);
          aborted++;
          resolve();
        };
        const timer = setTimeout(
          () => {
            signal.removeEventListener("abort", onAbort);
            resolve();
          },
          slow ? 60_000 : 300,
        );
        signal.addEventListener("abort", onAbort, { once: true });
      });
      if (!signal.aborted) finished++;
    },
  }));
  await createConfigMap(h.label, uniqueName("fast"), {});
  await until("the reconcile to start", () => h.controller.queue.length === 0 && h.configMaps.list().length === 1);
  await sleep(50);
  await h.controller.stop({ timeoutMs: 2000 });
  t.is(finished, 1, "the in-flight reconcile finished");
  t.is(aborted, 0);

  h.controller.start();
  await createConfigMap(h.label, uniqueName("slow"), {});
  await until("the slow reconcile to start", () => h.configMaps.list().length === 2);
  await sleep(400);
  const started = Date.now();
  await h.controller.stop({ timeoutMs: 200 });
  t.true(Date.now() - started < 2000);
  t.is(aborted, 1, "the slow reconcile was aborted");
});

test("an update predicate (specChanged) skips status-only updates and lets the rest through", async (t) => {
  // A LoadBalancer Service no cloud controller serves: its status is written here, as an HPA's or
  // an Ingress's is by their controllers, and nothing else touches it.
  const label = uniqueName("l");
  const services = new ListWatchInformer<KubeObject>(k.kc, {
    apiVersion: "v1",
    kind: "Service",
    plural: "services",
    namespace: ns,
    labelSelector: `rt-test=${label}`,
  });
  await services.start();
  const metrics = new Metrics();
  const runs: string[] = [];
  const controller = new Controller({
    name: "svc",
    primary: services,
    updates: specChanged,
    metrics,
    log: captureLog().log,
    reconciler: {
      reconcile(req) {
        runs.push(req.name);
        return Promise.resolve();
      },
    },
  });
  controller.start();
  t.teardown(async () => {
    await controller.stop({ timeoutMs: 1000 });
    await services.stop();
  });
  const events = async (result: string) =>
    (await metrics.watchEvents.get()).values.find((v) => v.labels.kind === "Service" && v.labels.result === result)?.value ?? 0;

  const name = uniqueName("svc");
  await k.core.createNamespacedService({
    namespace: ns,
    body: {
      metadata: { name, labels: { "rt-test": label } },
      spec: { type: "LoadBalancer", allocateLoadBalancerNodePorts: false, selector: { app: name }, ports: [{ port: 80 }] },
    },
  });
  await until("the create to be reconciled", () => runs.length === 1);

  await k.core.patchNamespacedServiceStatus({
    namespace: ns,
    name,
    body: [{ op: "add", path: "/status/loadBalancer/ingress", value: [{ ip: "192.0.2.10" }] }],
  });
  await eventually("the status update to arrive and be filtered", async () => (await events("filtered")) === 1);
  t.deepEqual(runs, [name], "a status-only update reconciles nothing");

  await k.core.patchNamespacedService({
    namespace: ns,
    name,
    body: [{ op: "add", path: "/metadata/annotations", value: { "example.com/changed": "1" } }],
  });
  await until("the annotation change to be reconciled", () => runs.length === 2);
  t.is(await events("filtered"), 1);
  t.true((await events("enqueued")) >= 2, "the create and the annotation change were enqueued");
});
