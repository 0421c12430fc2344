// An informer with dropManagedFields caches objects without metadata.managedFields, from the
// initial list and from watch events alike; without it the cache keeps them.
import test from "ava";
import { ListWatchInformer } from "../../kube/informer.ts";
import type { KubeObject } from "../../kube/client.ts";
import { deleteNamespace, eventually, kube, testNamespace } from "../helpers/kube.ts";

const k = kube();
let ns = "";
test.before(async () => {
  ns = await testNamespace(k, "trim");
});
test.after.always(async () => {
  await deleteNamespace(k, ns);
});

test("managedFields are dropped from listed and watched objects only when asked", async (t) => {
  await k.core.createNamespacedConfigMap({ namespace: ns, body: { metadata: { name: "listed" }, data: { a: "1" } } });
  const opts = { apiVersion: "v1", kind: "ConfigMap", plural: "configmaps", namespace: ns };
  const trimmed = new ListWatchInformer<KubeObject>(k.kc, { ...opts, dropManagedFields: true });
  const full = new ListWatchInformer<KubeObject>(k.kc, opts);
  await Promise.all([trimmed.start(), full.start()]);
  t.teardown(async () => {
    await trimmed.stop();
    await full.stop();
  });

  await k.core.createNamespacedConfigMap({ namespace: ns, body: { metadata: { name: "watched" }, data: { b: "2" } } });
  await eventually("both caches to see the watched object", () => Promise.resolve(trimmed.get(ns, "watched") && full.get(ns, "watched")));
  for (const name of ["listed", "watched"]) {
    t.is(trimmed.get(ns, name)?.metadata.managedFields, undefined, `${name} trimmed`);
    t.true((full.get(ns, name)?.metadata.managedFields?.length ?? 0) > 0, `${name} kept`);
    t.truthy(trimmed.get(ns, name)?.metadata.resourceVersion);
  }
});
