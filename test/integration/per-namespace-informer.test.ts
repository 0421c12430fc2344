// PerNamespaceInformer (kube) against the real API server: Secrets of the namespaces a label
// selects, followed as namespaces gain and lose the label, under the operator's own identity (the
// chart's RBAC), which may list Secrets only where a RoleBinding grants it. A selected namespace
// without the binding is refused and does not hold the others.
import test from "ava";
import * as k8s from "@kubernetes/client-node";
import { loadKubeConfig } from "../../kube/client.ts";
import {
  ListWatchInformer,
  PerNamespaceInformer,
  type Informer,
  type InformerEvent,
  type InformerLogger,
  type KubeObject,
} from "../../kube/index.ts";
import { bindOperatorWorkspaceRole, identity } from "../helpers/identities.ts";
import { deleteNamespace, eventually, kube, testNamespace, uniqueName } from "../helpers/kube.ts";

const k = kube();
/** Each run selects its own namespaces: a label key no other test uses. */
const SELECT = `per-ns-test-${uniqueName("s")}`;
const SECRET_LABEL = { "app.kubernetes.io/managed-by": "berth" };

async function namespaceWithSecret(prefix: string, selected: boolean, bound: boolean): Promise<string> {
  const ns = await testNamespace(k, prefix, selected ? { [SELECT]: "yes" } : {});
  await k.core.createNamespacedSecret({ namespace: ns, body: { metadata: { name: `in-${prefix}`, labels: SECRET_LABEL } } });
  await k.core.createNamespacedSecret({ namespace: ns, body: { metadata: { name: `unlabelled-${prefix}` } } });
  if (bound) await bindOperatorWorkspaceRole(ns);
  return ns;
}

/** Berth's Secrets (label-selected) of `where`, under the operator's own identity; the first lists waited for 3 s. */
async function berthSecrets(where: { follow: Informer<KubeObject> } | { namespaces: string[] }, log?: InformerLogger) {
  const kc = loadKubeConfig((await identity("operator")).kubeconfig);
  const informer = new PerNamespaceInformer<KubeObject>(
    kc,
    { apiVersion: "v1", kind: "Secret", plural: "secrets", labelSelector: "app.kubernetes.io/managed-by=berth", ...where },
    log,
    { firstListsWaitMs: 3_000 },
  );
  return { kc, informer };
}

test("Secrets of the selected, bound namespaces only; namespaces followed as they come and go", async (t) => {
  const a = await namespaceWithSecret("pna", true, true);
  const b = await namespaceWithSecret("pnb", true, true);
  const outside = await namespaceWithSecret("pno", false, true);
  const unbound = await namespaceWithSecret("pnu", true, false);
  t.teardown(() => Promise.all([a, b, outside, unbound].map((n) => deleteNamespace(k, n))).then(() => undefined));
  const warnings: string[] = [];
  // the namespaces this run selects, as the operator follows the workspace namespaces
  const selected = new ListWatchInformer<KubeObject>(loadKubeConfig((await identity("operator")).kubeconfig), {
    apiVersion: "v1",
    kind: "Namespace",
    plural: "namespaces",
    labelSelector: SELECT,
  });
  t.teardown(() => selected.stop());
  const { kc, informer } = await berthSecrets({ follow: selected }, { warn: (o, msg) => warnings.push(`${msg} ${JSON.stringify(o)}`) });
  const events: Array<[InformerEvent, string]> = [];
  informer.on((event, obj) => events.push([event, obj.metadata.name!]));
  t.teardown(() => informer.stop());
  await eventually("the operator's bindings to take effect", async () => {
    const core = kc.makeApiClient(k8s.CoreV1Api);
    return (await core.listNamespacedSecret({ namespace: b }).catch(() => undefined)) !== undefined;
  });

  await informer.start();
  t.true(informer.synced);
  t.deepEqual(informer.namespaces, [a, b, unbound].sort(), "one informer per selected namespace");
  const names = () =>
    informer
      .list()
      .map((s) => s.metadata.name)
      .sort();
  t.deepEqual(names(), ["in-pna", "in-pnb"], "labelled Secrets of the bound namespaces; none of the others");
  t.is(informer.get(a, "in-pna")?.metadata.namespace, a);
  t.is(informer.get(outside, "in-pno"), undefined, "an unselected namespace is not watched");
  t.deepEqual(
    informer.list(b).map((s) => s.metadata.name),
    ["in-pnb"],
  );
  t.true(informer.syncedIn(a), "a followed namespace, listed");
  t.false(informer.syncedIn(unbound), "a followed namespace whose list is refused: its objects are not known absent");
  t.true(informer.syncedIn("kube-system"), "a namespace not followed: nothing of it is watched");
  t.true(
    warnings.some((w) => w.includes(unbound)),
    "the namespace without the binding was refused (and named) without holding the start",
  );

  // a namespace that gains the label is followed; its Secrets arrive as add events
  await k.core.patchNamespace(
    { name: outside, body: { metadata: { labels: { [SELECT]: "yes" } } } },
    k8s.setHeaderOptions("Content-Type", k8s.PatchStrategy.MergePatch),
  );
  await eventually("the newly selected namespace's Secret", () => Promise.resolve(informer.get(outside, "in-pno")));
  t.true(events.some(([e, n]) => e === "add" && n === "in-pno"));

  // a Secret created later in a followed namespace arrives too
  await k.core.createNamespacedSecret({ namespace: a, body: { metadata: { name: "later", labels: SECRET_LABEL } } });
  await eventually("a later Secret", () => Promise.resolve(informer.get(a, "later")));

  // a namespace that loses the label is dropped
  await k.core.patchNamespace(
    { name: b, body: { metadata: { labels: { [SELECT]: null } } } },
    k8s.setHeaderOptions("Content-Type", k8s.PatchStrategy.MergePatch),
  );
  await eventually("the unselected namespace to be dropped", () => Promise.resolve(!informer.namespaces.includes(b)));
  t.is(informer.get(b, "in-pnb"), undefined);
});

test("a fixed list of namespaces: one that does not exist yet, or is not bound yet, holds nothing and is followed once it is", async (t) => {
  const bound = await namespaceWithSecret("pnf", false, true);
  const later = uniqueName("pn-later");
  t.teardown(() => Promise.all([bound, later].map((n) => deleteNamespace(k, n))).then(() => undefined));
  const { kc, informer } = await berthSecrets({ namespaces: [bound, later] });
  t.teardown(() => informer.stop());
  await eventually(
    "the binding to take effect",
    async () =>
      (await kc
        .makeApiClient(k8s.CoreV1Api)
        .listNamespacedSecret({ namespace: bound })
        .catch(() => undefined)) !== undefined,
  );
  await informer.start(); // returns although `later` is refused (no binding, no namespace)
  t.true(informer.synced);
  t.true(informer.syncedIn(bound));
  t.false(informer.syncedIn(later), "its objects are not known absent");
  t.deepEqual(
    informer.list().map((s) => s.metadata.name),
    ["in-pnf"],
  );
  // the namespace is made and bound (as the API makes a workspace): its Secrets arrive
  await k.core.createNamespace({ body: { metadata: { name: later } } });
  await k.core.createNamespacedSecret({ namespace: later, body: { metadata: { name: "late", labels: SECRET_LABEL } } });
  await bindOperatorWorkspaceRole(later);
  await eventually("the later namespace's Secret", () => Promise.resolve(informer.get(later, "late")), 60_000);
  t.true(informer.syncedIn(later));
});
