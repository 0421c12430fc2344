// specChanged: which updates of a watched object are worth a reconcile when its status is never read.
import test from "ava";
import { specChanged } from "../../../operator/runtime/controller.ts";
import type { KubeObject } from "../../../kube/objects.ts";

type Obj = KubeObject & { spec?: unknown; status?: unknown };
const hpa = (over: { metadata?: Partial<KubeObject["metadata"]>; spec?: unknown; status?: unknown } = {}): Obj => ({
  apiVersion: "autoscaling/v2",
  kind: "HorizontalPodAutoscaler",
  metadata: {
    name: "web",
    namespace: "ws-a",
    resourceVersion: "10",
    generation: 1,
    labels: { "app.kubernetes.io/managed-by": "berth" },
    annotations: { "berth.dev/hash": "abc" },
    ownerReferences: [{ apiVersion: "berth.dev/v1alpha1", kind: "App", name: "web", uid: "u1", controller: true }],
    ...over.metadata,
  },
  spec: over.spec ?? { minReplicas: 1, maxReplicas: 2 },
  status: over.status ?? { currentReplicas: 1, conditions: [{ type: "AbleToScale", status: "True" }] },
});

test("an update of the status, resourceVersion or managedFields alone is not worth a reconcile", (t) => {
  const old = hpa();
  t.false(
    specChanged(
      old,
      hpa({ metadata: { resourceVersion: "11" }, status: { currentReplicas: 2, conditions: [{ type: "AbleToScale", status: "False" }] } }),
    ),
  );
  t.false(
    specChanged(
      old,
      hpa({ metadata: { resourceVersion: "12", managedFields: [{ manager: "kube-controller-manager", operation: "Update" }] } }),
    ),
  );
  t.false(specChanged(old, { ...hpa({ metadata: { resourceVersion: "13" } }), status: undefined }));
});

test("a change of spec, labels, annotations, owners, finalizers or deletion is", (t) => {
  const old = hpa();
  const changes: Array<[string, Obj]> = [
    ["spec", hpa({ spec: { minReplicas: 1, maxReplicas: 3 } })],
    ["generation", hpa({ metadata: { generation: 2 } })],
    ["a label", hpa({ metadata: { labels: {} } })],
    ["an annotation", hpa({ metadata: { annotations: { "berth.dev/hash": "def" } } })],
    ["owner references", hpa({ metadata: { ownerReferences: [] } })],
    ["finalizers", hpa({ metadata: { finalizers: ["example.com/keep"] } })],
    ["deletion", hpa({ metadata: { deletionTimestamp: new Date("2026-11-25T00:00:00Z") } })],
  ];
  for (const [what, obj] of changes) t.true(specChanged(old, { ...obj, metadata: { ...obj.metadata, resourceVersion: "99" } }), what);
});

test("it reads neither object's fields in place (the cache's objects stay whole)", (t) => {
  const old = hpa(),
    obj = hpa({ metadata: { resourceVersion: "11" }, status: { currentReplicas: 3 } });
  specChanged(old, obj);
  t.is(obj.metadata.resourceVersion, "11");
  t.deepEqual(obj.status, { currentReplicas: 3 });
});
