// The controller's resync: every object of the primary again each period, in slices spread over
// the period (at most one a second), never the whole cache at once.
import test from "ava";
import { pino } from "pino";
import type { Informer, KubeObject } from "../../../kube/index.ts";
import { Controller, Metrics } from "../../../operator/runtime/index.ts";

/** Just enough of an Informer for a controller's primary: a fixed list and no events. */
function fixedInformer(names: string[]): Informer<KubeObject> {
  const objects = names.map((name): KubeObject => ({ metadata: { name, namespace: "ns", resourceVersion: "1" } }));
  return {
    options: { apiVersion: "v1", kind: "ConfigMap", plural: "configmaps" },
    list: () => objects,
    on: () => () => undefined,
  } as unknown as Informer<KubeObject>;
}

test("a resync enqueues its objects in slices over the period, not all at once", async (t) => {
  t.timeout(30_000);
  const names = ["a", "b", "c", "d", "e", "f"];
  const metrics = new Metrics();
  const adds = async () => (await metrics.workqueueAdds.get()).values[0]?.value ?? 0;
  /** Each reconcile: the key and how many keys had been added to the queue by then. */
  const runs: Array<{ name: string; added: number }> = [];
  let cycleDone: () => void = () => undefined;
  const cycle = new Promise<void>((resolve) => {
    cycleDone = resolve;
  });
  // A 3 s period (3.0-3.3 s with its jitter) over 6 objects: 3 slices of 2, about a second apart.
  const controller = new Controller({
    name: "resync",
    primary: fixedInformer(names),
    resyncPeriodMs: 3000,
    concurrency: 1,
    metrics,
    log: pino({ level: "silent" }),
    reconciler: {
      async reconcile(req) {
        runs.push({ name: req.name, added: await adds() });
        if (runs.length === 12) cycleDone();
      },
    },
  });
  controller.start();
  t.teardown(() => controller.stop({ timeoutMs: 1000 }));
  await cycle;

  t.deepEqual(
    runs.slice(0, 6).map((r) => r.name),
    names,
    "start() reconciles every cached object",
  );
  const resync = runs.slice(6);
  t.deepEqual(
    resync.map((r) => r.name),
    names,
    "the resync reconciles each object again, in the list's order",
  );
  // Had the whole cache been enqueued at once, every resync reconcile would see 12 adds.
  t.deepEqual(
    resync.map((r) => r.added),
    [8, 8, 10, 10, 12, 12],
    "each slice of two is enqueued only after the one before it ran",
  );
});
