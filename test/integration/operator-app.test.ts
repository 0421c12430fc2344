// The App operator against the real API server with kwok: Apps become workloads that become Ready,
// changes reach the children, drift is repaired, restarts converge without duplicates, and an
// idle operator writes nothing.
import test from "ava";
import type * as k8s from "@kubernetes/client-node";
import { API_VERSION } from "../../crds/schemas.ts";
import { KubeClient, type KubeObject } from "../../kube/client.ts";
import type { RunningOperator } from "../../operator/main.ts";
import { startTestOperator } from "../helpers/operator.ts";
import { deleteNamespace, eventually, kube, testNamespace } from "../helpers/kube.ts";

const k = kube();
const client = new KubeClient(k.kc);
let ns = "";
let op: RunningOperator | undefined;

const start = () =>
  startTestOperator({ namespace: ns, env: { BERTH_OPERATOR_RESYNC_SECONDS: "10", BERTH_BASE_DOMAIN: "apps.test.local" } });

test.before(async () => {
  ns = await testNamespace(k, "opapp");
  op = await start();
});
test.after.always(async () => {
  await op?.stop();
  await deleteNamespace(k, ns);
});

type App = KubeObject & {
  spec: Record<string, unknown>;
  status?: {
    phase?: string;
    conditions?: { type: string; status: string }[];
    url?: string;
    observedGeneration?: number;
    pipeline?: { runtime?: { status: string; readyReplicas: number; totalReplicas: number } };
  };
};
const ref = (name: string) => ({ apiVersion: API_VERSION, kind: "App", namespace: ns, name });
const getApp = (name: string) => client.get<App>(ref(name));
const createApp = (name: string, spec: Record<string, unknown>) =>
  client.create({ apiVersion: API_VERSION, kind: "App", metadata: { name, namespace: ns }, spec }, "test");
const patchApp = (name: string, spec: Record<string, unknown>) => client.mergePatch(ref(name), { spec }, "test");
const child = <T>(kind: string, apiVersion: string, name: string) =>
  client.get<KubeObject>({ apiVersion, kind, namespace: ns, name }) as Promise<T | undefined>;
const deployment = (name: string) => child<k8s.V1Deployment>("Deployment", "apps/v1", name);

const eventsOf = async (name: string) =>
  (await k.core.listNamespacedEvent({ namespace: ns, fieldSelector: `involvedObject.kind=App,involvedObject.name=${name}` })).items;

async function phase(name: string, want: string, timeoutMs = 60_000): Promise<App> {
  return eventually(
    `App ${name} to be ${want}`,
    async () => {
      const a = await getApp(name);
      return a?.status?.phase === want && a.status.observedGeneration === a.metadata.generation ? a : undefined;
    },
    timeoutMs,
  );
}

test.serial("a web App becomes a Deployment, Service, Ingress and HPA, and goes active when pods are Ready", async (t) => {
  await createApp("shop", {
    name: "Shop",
    slug: "shop",
    image: "registry.invalid/shop:1",
    minReplicas: 2,
    maxReplicas: 5,
    cpuTargetUtilization: 70,
  });
  const app = await phase("shop", "active");
  t.is(app.status?.url, "https://shop.apps.test.local");
  t.is(app.status?.conditions?.find((c) => c.type === "Ready")?.status, "True");
  const d = await deployment("shop");
  t.is(d?.status?.readyReplicas, 2);
  t.truthy(await child("Service", "v1", "shop"));
  const ing = await child<k8s.V1Ingress>("Ingress", "networking.k8s.io/v1", "shop");
  t.is(ing?.spec?.rules?.[0]?.host, "shop.apps.test.local");
  const hpa = await child<k8s.V2HorizontalPodAutoscaler>("HorizontalPodAutoscaler", "autoscaling/v2", "shop");
  t.like(hpa?.spec, { minReplicas: 2, maxReplicas: 5 });
  // Children are created by a create-only server-side apply: the operator's fields are an Apply
  // (a POST would record an Update, whose fields a later apply could never drop).
  for (const c of [d, ing, hpa] as KubeObject[]) {
    const mine = (c.metadata.managedFields ?? []).filter((m) => m.manager === "berth-operator");
    t.deepEqual(
      mine.map((m) => m.operation),
      ["Apply"],
      `${c.kind ?? "child"} fields are the operator's Apply`,
    );
  }
  // `kubectl describe app shop` tells the story.
  const told = await eventually("the Events of shop", async () => {
    const reasons = (await eventsOf("shop")).map((e) => `${e.type}/${e.reason}: ${e.message}`);
    return reasons.some((r) => r.startsWith("Normal/Available")) ? reasons : undefined;
  });
  // One Event per transition (operator/kit/events.ts), none per child created.
  t.false(
    told.some((r) => r.startsWith("Normal/Created")),
    told.join("\n"),
  );
  for (const reason of ["RollingOut", "RolloutComplete"])
    t.true(
      told.some((r) => r.startsWith(`Normal/${reason}`)),
      told.join("\n"),
    );
});

test.serial("changing replicas and limits reaches the children", async (t) => {
  await patchApp("shop", { minReplicas: 3, maxReplicas: 6, cpuLimitMillicores: 1000, memoryLimitMi: 1024 });
  await phase("shop", "active");
  const d = await eventually("3 ready replicas", async () => {
    const d = await deployment("shop");
    return d?.status?.readyReplicas === 3 ? d : undefined;
  });
  t.deepEqual(d.spec?.template.spec?.containers[0]?.resources?.limits, { cpu: "1", memory: "1Gi" });
  // Replica counts may be held back briefly, but never past the transition that follows them.
  const app = await phase("shop", "active");
  t.like(app.status?.pipeline?.runtime, { status: "healthy", readyReplicas: 3, totalReplicas: 3 });
  const hpa = await child<k8s.V2HorizontalPodAutoscaler>("HorizontalPodAutoscaler", "autoscaling/v2", "shop");
  t.like(hpa?.spec, { minReplicas: 3, maxReplicas: 6 });
});

test.serial("an idle operator writes nothing (no hot loop, resync included)", async (t) => {
  await phase("shop", "active");
  // The deployment and HPA controllers keep updating status on their own; what must not move is
  // everything the operator writes: the App, the Deployment's spec, the Service and the Ingress.
  const snapshot = async () => {
    const [app, d, svc, ing] = await Promise.all([
      getApp("shop"),
      deployment("shop"),
      child<KubeObject>("Service", "v1", "shop"),
      child<KubeObject>("Ingress", "networking.k8s.io/v1", "shop"),
    ]);
    return {
      app: app?.metadata.resourceVersion,
      deploymentGeneration: d?.metadata?.generation,
      svc: svc?.metadata.resourceVersion,
      ing: ing?.metadata.resourceVersion,
    };
  };
  await new Promise((r) => setTimeout(r, 2000));
  const before = await snapshot();
  const windowStart = Date.now();
  await new Promise((r) => setTimeout(r, 12_000)); // longer than the 10 s resync
  t.deepEqual(await snapshot(), before);
  const d = await deployment("shop");
  const operatorWrites = (d?.metadata?.managedFields ?? []).filter(
    (m) => m.manager === "berth-operator" && new Date(m.time!).getTime() > windowStart,
  );
  t.deepEqual(operatorWrites, []);
});

test.serial("a child deleted or edited by hand is restored", async (t) => {
  await k.core.deleteNamespacedService({ name: "shop", namespace: ns });
  await k.apps.patchNamespacedDeployment({
    name: "shop",
    namespace: ns,
    body: [{ op: "replace", path: "/spec/template/spec/containers/0/image", value: "evil:1" }],
  });
  await eventually("the Service to come back", () => child("Service", "v1", "shop"));
  const d = await eventually("the image to be restored", async () => {
    const d = await deployment("shop");
    return d?.spec?.template.spec?.containers[0]?.image === "registry.invalid/shop:1" ? d : undefined;
  });
  t.truthy(d);
});

test.serial("soft delete scales to zero and removes routing; resume restores it", async (t) => {
  await patchApp("shop", { suspended: true });
  await phase("shop", "disabled");
  await eventually(
    "no Service, Ingress or HPA",
    async () =>
      !(await child("Service", "v1", "shop")) &&
      !(await child("Ingress", "networking.k8s.io/v1", "shop")) &&
      !(await child("HorizontalPodAutoscaler", "autoscaling/v2", "shop")),
  );
  t.is((await deployment("shop"))?.spec?.replicas, 0);
  await patchApp("shop", { suspended: false });
  await phase("shop", "active");
  t.truthy(await child("Ingress", "networking.k8s.io/v1", "shop"));
  t.is((await deployment("shop"))?.status?.readyReplicas, 3);
});

test.serial("a restarted operator converges with no duplicate children", async (t) => {
  await op!.stop();
  await patchApp("shop", { image: "registry.invalid/shop:2" });
  await createApp("worker", { name: "Worker", slug: "worker", type: "worker", image: "registry.invalid/worker:1" });
  op = await start();
  await phase("shop", "active");
  await phase("worker", "active");
  const deps = await k.apps.listNamespacedDeployment({ namespace: ns });
  t.deepEqual(deps.items.map((d) => d.metadata!.name).sort(), ["shop", "worker"]);
  t.is(deps.items.find((d) => d.metadata!.name === "shop")?.spec?.template.spec?.containers[0]?.image, "registry.invalid/shop:2");
  t.falsy(await child("Service", "v1", "worker"), "workers are not routed");
});

test.serial("a cron App becomes a CronJob", async (t) => {
  await createApp("nightly", { name: "Nightly", slug: "nightly", type: "cron", schedule: "0 3 * * *", image: "registry.invalid/n:1" });
  await phase("nightly", "active");
  const cj = await child<k8s.V1CronJob>("CronJob", "batch/v1", "nightly");
  t.is(cj?.spec?.schedule, "0 3 * * *");
});

test.serial("a field dropped from the desired state is removed from the child", async (t) => {
  await createApp("flip", { name: "Flip", slug: "flip", image: "registry.invalid/flip:1" });
  await phase("flip", "active");
  const before = (await deployment("flip"))?.spec?.template.spec?.containers[0];
  t.is(before?.ports?.[0]?.name, "http");
  t.truthy(before?.readinessProbe);
  t.truthy(before?.startupProbe);
  // A worker is not served: no port, no probes, no Service, no Ingress.
  await patchApp("flip", { type: "worker" });
  await phase("flip", "active");
  const after = await eventually("the port and probe to go", async () => {
    const c = (await deployment("flip"))?.spec?.template.spec?.containers[0];
    return c && !c.ports && !c.readinessProbe && !c.startupProbe ? c : undefined;
  });
  t.is(after.image, "registry.invalid/flip:1");
  t.falsy(await child("Service", "v1", "flip"));
  t.falsy(await child("Ingress", "networking.k8s.io/v1", "flip"));
});

test.serial("an App with only a Git repository waits for a build and creates nothing", async (t) => {
  await createApp("fromgit", { name: "From Git", slug: "fromgit", gitRepoUrl: "https://git.example.com/a.git" });
  const app = await phase("fromgit", "stopped");
  t.is(app.status?.conditions?.find((c) => c.type === "Built")?.status, "False");
  t.falsy(await deployment("fromgit"));
});

test.serial("an App never takes over an object it does not own", async (t) => {
  await k.core.createNamespacedService({ namespace: ns, body: { metadata: { name: "taken" }, spec: { ports: [{ port: 1 }] } } });
  await createApp("taken", { name: "Taken", slug: "taken", image: "registry.invalid/t:1" });
  const app = await phase("taken", "failed");
  t.regex(JSON.stringify(app.status?.conditions), /not owned by this App/);
  const svc = await k.core.readNamespacedService({ name: "taken", namespace: ns });
  t.deepEqual(svc.metadata?.ownerReferences ?? [], []);
  t.false(
    (svc.metadata?.managedFields ?? []).some((m) => m.manager === "berth-operator"),
    "the operator wrote nothing to it",
  );
  t.falsy(await child("Ingress", "networking.k8s.io/v1", "taken"), "no Ingress routes to a Service that is not the App's");
  const warning = await eventually("a Warning Event", async () => (await eventsOf("taken")).find((e) => e.type === "Warning"));
  t.like(warning, { reason: "ObjectInTheWay", message: `Service ${ns}/taken already exists and is not owned by this App` });
});

test.serial("a foreign Deployment is refused, and no autoscaler is pointed at it", async (t) => {
  await k.apps.createNamespacedDeployment({
    namespace: ns,
    body: {
      metadata: { name: "squat" },
      spec: {
        replicas: 1,
        selector: { matchLabels: { x: "squat" } },
        template: { metadata: { labels: { x: "squat" } }, spec: { containers: [{ name: "c", image: "registry.invalid/squat:1" }] } },
      },
    },
  });
  await createApp("squat", { name: "Squat", slug: "squat", image: "registry.invalid/s:1", minReplicas: 1, maxReplicas: 3 });
  const app = await phase("squat", "failed");
  t.regex(JSON.stringify(app.status?.conditions), /Deployment .*squat already exists and is not owned by this App/);
  const d = await deployment("squat");
  t.deepEqual(d?.metadata?.ownerReferences ?? [], []);
  t.is(d?.spec?.template.spec?.containers[0]?.image, "registry.invalid/squat:1");
  t.falsy(await child("HorizontalPodAutoscaler", "autoscaling/v2", "squat"));
});

test.serial("a same-named object labelled as Berth's but not owned by the App is refused too", async (t) => {
  // In the operator's cache (it carries the label), so the refusal needs no request at all.
  await k.core.createNamespacedService({
    namespace: ns,
    body: { metadata: { name: "lookalike", labels: { "app.kubernetes.io/managed-by": "berth" } }, spec: { ports: [{ port: 1 }] } },
  });
  await eventually("the operator to cache it", () =>
    Promise.resolve(
      op!.manager
        .informer<KubeObject>({
          apiVersion: "v1",
          kind: "Service",
          plural: "services",
          labelSelector: "app.kubernetes.io/managed-by=berth",
          dropManagedFields: true,
          namespace: ns,
        })
        .get(ns, "lookalike") !== undefined,
    ),
  );
  await createApp("lookalike", { name: "Lookalike", slug: "lookalike", image: "registry.invalid/l:1" });
  const app = await phase("lookalike", "failed");
  t.regex(JSON.stringify(app.status?.conditions), /Service .*lookalike already exists and is not owned by this App/);
  t.deepEqual((await k.core.readNamespacedService({ name: "lookalike", namespace: ns })).metadata?.ownerReferences ?? [], []);
  t.falsy(await deployment("lookalike"), "nothing is created when the cache already shows the conflict");
});

test.serial("deleting an App removes everything it owns", async (t) => {
  await client.delete(ref("shop"));
  await eventually(
    "children of shop to be collected",
    async () =>
      !(await deployment("shop")) &&
      !(await child("Service", "v1", "shop")) &&
      !(await child("Ingress", "networking.k8s.io/v1", "shop")) &&
      !(await child("HorizontalPodAutoscaler", "autoscaling/v2", "shop")),
    60_000,
  );
  await eventually(
    "pods of shop to go",
    async () => (await k.core.listNamespacedPod({ namespace: ns, labelSelector: "berth.dev/app=shop" })).items.length === 0,
    60_000,
  );
  t.is(
    (await k.apps.listNamespacedReplicaSet({ namespace: ns, labelSelector: "berth.dev/app=shop" })).items.filter(
      (r) => !r.metadata?.deletionTimestamp,
    ).length,
    0,
  );
});

// A host belongs to the first App that holds it (crds/app.ts "Hosts"). The API refuses a second
// one; kubectl does not go through the API, so the operator settles it.
test.serial("an App applied with another App's host is not routed (HostTaken); it is once the holder goes", async (t) => {
  const ingress = (name: string) => child<k8s.V1Ingress>("Ingress", "networking.k8s.io/v1", name);
  await createApp("holder", { name: "Holder", slug: "dup", image: "registry.invalid/shop:1" });
  await phase("holder", "active");
  await createApp("squatter", { name: "Squatter", slug: "dup", image: "registry.invalid/shop:1" });
  const refused = await phase("squatter", "failed");
  t.like(
    refused.status?.conditions?.find((c) => c.type === "Ready"),
    { status: "False", reason: "HostTaken" },
  );
  t.is(await ingress("squatter"), undefined, "no second Ingress for dup.apps.test.local");
  t.is((await ingress("holder"))?.spec?.rules?.[0]?.host, "dup.apps.test.local");
  const told = await eventually("the squatter's Warning", async () =>
    (await eventsOf("squatter")).find((e) => e.type === "Warning" && e.reason === "HostTaken"),
  );
  t.regex(told.message ?? "", /dup\.apps\.test\.local is held by an App created before this one/);
  // The rule is who came first, not a blanket refusal: once the holder is gone, the same App is routed.
  await client.delete(ref("holder"));
  await phase("squatter", "active");
  t.is((await eventually("the squatter's Ingress", () => ingress("squatter")))?.spec?.rules?.[0]?.host, "dup.apps.test.local");
  await client.delete(ref("squatter"));
});

test.serial("an App with a reserved slug is never routed (HostReserved)", async (t) => {
  await createApp("www-site", { name: "WWW", slug: "www", image: "registry.invalid/shop:1" });
  const refused = await phase("www-site", "failed");
  t.like(
    refused.status?.conditions?.find((c) => c.type === "Ready"),
    { status: "False", reason: "HostReserved" },
  );
  t.is(await child("Ingress", "networking.k8s.io/v1", "www-site"), undefined);
  t.is(await deployment("www-site"), undefined);
  await client.delete(ref("www-site"));
});
