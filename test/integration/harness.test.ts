// The local control plane behaves like a cluster: kwok makes pods Ready and Jobs complete, the
// controller-manager garbage-collects children and finishes namespace deletion.
import test from "ava";
import { deleteNamespace, eventually, kube, testNamespace, uniqueName } from "../helpers/kube.ts";

const k = kube();
let ns = "";
test.before(async () => {
  ns = await testNamespace(k, "harness");
});
test.after.always(async () => {
  await deleteNamespace(k, ns);
});

const podTemplate = (app: string) => ({
  metadata: { labels: { app } },
  spec: { containers: [{ name: "main", image: "registry.invalid/app:1" }] },
});

test("a Deployment's pods become Ready through kwok", async (t) => {
  const name = uniqueName("web");
  await k.apps.createNamespacedDeployment({
    namespace: ns,
    body: {
      metadata: { name },
      spec: { replicas: 3, selector: { matchLabels: { app: name } }, template: podTemplate(name) },
    },
  });
  const d = await eventually(
    "3 ready replicas",
    async () => {
      const d = await k.apps.readNamespacedDeployment({ name, namespace: ns });
      return d.status?.readyReplicas === 3 ? d : undefined;
    },
    60_000,
  );
  t.is(d.status?.availableReplicas, 3);
  const pods = await k.core.listNamespacedPod({ namespace: ns, labelSelector: `app=${name}` });
  t.is(pods.items.length, 3);
  t.true(pods.items.every((p) => p.spec?.nodeName?.startsWith("kwok-node") && p.status?.phase === "Running"));
});

test("a Job completes", async (t) => {
  const name = uniqueName("job");
  await k.batch.createNamespacedJob({
    namespace: ns,
    body: {
      metadata: { name },
      spec: {
        backoffLimit: 0,
        template: { spec: { restartPolicy: "Never", containers: [{ name: "main", image: "registry.invalid/job:1" }] } },
      },
    },
  });
  const job = await eventually(
    "the Job to complete",
    async () => {
      const j = await k.batch.readNamespacedJob({ name, namespace: ns });
      return j.status?.succeeded === 1 ? j : undefined;
    },
    60_000,
  );
  t.truthy(job.status?.completionTime);
});

test("deleting an owner garbage-collects its children", async (t) => {
  const owner = await k.core.createNamespacedConfigMap({ namespace: ns, body: { metadata: { name: uniqueName("owner") } } });
  const child = await k.core.createNamespacedSecret({
    namespace: ns,
    body: {
      metadata: {
        name: uniqueName("child"),
        ownerReferences: [{ apiVersion: "v1", kind: "ConfigMap", name: owner.metadata!.name!, uid: owner.metadata!.uid! }],
      },
    },
  });
  await k.core.deleteNamespacedConfigMap({ name: owner.metadata!.name!, namespace: ns });
  await eventually(
    "the child to be collected",
    async () => {
      try {
        await k.core.readNamespacedSecret({ name: child.metadata!.name!, namespace: ns });
        return false;
      } catch (err) {
        return (err as { code?: number }).code === 404;
      }
    },
    60_000,
  );
  t.pass();
});

test("deleting a namespace finishes", async (t) => {
  const name = await testNamespace(k, "gone");
  await k.core.createNamespacedConfigMap({ namespace: name, body: { metadata: { name: "x" } } });
  await k.core.deleteNamespace({ name });
  await eventually(
    "the namespace to disappear",
    async () => {
      try {
        await k.core.readNamespace({ name });
        return false;
      } catch (err) {
        return (err as { code?: number }).code === 404;
      }
    },
    60_000,
  );
  t.pass();
});
