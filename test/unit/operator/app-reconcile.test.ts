// The App reconciler's writes, against in-memory caches and a recording client: it reads its own
// writes before the caches show them (no second create, no repeated status), and a status change
// that only moves replica counts waits for the delay, or for the next transition, but is never lost.
// The same behaviour against the real API server is in test/integration/operator-app.test.ts.
import test from "ava";
import { pino } from "pino";
import type * as k8s from "@kubernetes/client-node";
import { API_VERSION, APP_LABEL } from "../../../crds/schemas.ts";
import type { Informer } from "../../../kube/informer.ts";
import { FakeInformer } from "../../helpers/fake-informer.ts";
import type { KubeObject, ObjectClient } from "../../../kube/objects.ts";
import { KubeApiError } from "../../../kube/transport.ts";
import { CHILD_KINDS, type ChildKind } from "../../../operator/app/builders.ts";
import { AppReconciler, type AppObject } from "../../../operator/app/reconcile.ts";

/** `exists`: kinds of which an object of the App's name exists on the server but not in the caches: ours (a lagging cache) or foreign. */
function world(
  exists: Partial<Record<ChildKind, "ours" | "foreign">> = {},
  opts: { appDeleted?: boolean; inWorkspace?: (namespace: string) => boolean } = {},
) {
  let rv = 100;
  let clock = Date.parse("2026-11-21T10:00:00Z");
  const calls: { verb: string; kind: string; obj: KubeObject }[] = [];
  const onServer = new Map<string, KubeObject>();
  const stamp = <T extends KubeObject>(o: T): T => ({
    ...o,
    metadata: { ...o.metadata, uid: o.metadata.uid ?? `uid-${o.kind}`, generation: 1, resourceVersion: String(++rv) },
  });
  const apps = new FakeInformer<AppObject>();
  const children = Object.fromEntries((Object.keys(CHILD_KINDS) as ChildKind[]).map((k) => [k, new FakeInformer<KubeObject>()])) as Record<
    ChildKind,
    FakeInformer<KubeObject>
  >;
  const secrets = new FakeInformer<KubeObject>();
  const podInformer = new FakeInformer<KubeObject>();
  const client = {
    apply: (o: KubeObject) => {
      calls.push({ verb: "apply", kind: o.kind!, obj: o });
      return Promise.resolve(stamp(o));
    },
    applyNew: (o: KubeObject) => {
      calls.push({ verb: "applyNew", kind: o.kind!, obj: o });
      const there = exists[o.kind as ChildKind];
      if (!there) return Promise.resolve(stamp(o));
      onServer.set(
        o.kind!,
        there === "ours" ? stamp(o) : stamp({ ...o, metadata: { ...o.metadata, ownerReferences: [], uid: "someone-else" } }),
      );
      return Promise.reject(new KubeApiError(409, { kind: "Status", code: 409, reason: "Conflict" }, `apply ${o.kind}`));
    },
    applyStatus: (_plural: string, o: AppObject) => {
      calls.push({ verb: "applyStatus", kind: "App", obj: o });
      if (opts.appDeleted)
        return Promise.reject(new KubeApiError(404, { kind: "Status", code: 404, reason: "NotFound" }, "apply apps/status"));
      const app = apps.get(o.metadata.namespace, o.metadata.name!)!;
      return Promise.resolve({ ...app, status: o.status, metadata: { ...app.metadata, resourceVersion: String(++rv) } });
    },
    get: (ref: { kind: string }) => Promise.resolve(onServer.get(ref.kind)),
    delete: () => Promise.resolve(true),
    mergePatch: () => Promise.reject(new Error("not expected")),
  } as unknown as ObjectClient;
  const events: { type: string; reason: string; kind: string }[] = [];
  const reconciler = new AppReconciler({
    events: { event: (o: KubeObject, type: string, reason: string) => events.push({ type, reason, kind: o.kind! }) },
    client,
    apps: apps as unknown as Informer<AppObject>,
    children: children as unknown as Record<ChildKind, Informer<KubeObject>>,
    secrets: secrets as unknown as Informer<KubeObject>,
    cfg: { baseDomain: "apps.test" },
    now: () => new Date(clock),
    countsDelayMs: 5000,
    pods: podInformer as unknown as Informer<KubeObject>,
    inWorkspace: opts.inWorkspace,
  });
  apps.put({
    apiVersion: API_VERSION,
    kind: "App",
    metadata: { name: "shop", namespace: "ns", uid: "app-uid", generation: 1, resourceVersion: String(++rv) },
    spec: { name: "Shop", slug: "shop", image: "r/shop:1", minReplicas: 3 },
  });
  return {
    apps,
    children,
    secrets,
    calls,
    events,
    reconcile: () =>
      reconciler.reconcile({ namespace: "ns", name: "shop" }, { signal: new AbortController().signal, log: pino({ level: "silent" }) }),
    tick: (ms: number) => {
      clock += ms;
    },
    writes: (verb: string) => calls.filter((c) => c.verb === verb),
    /** The caches catch up with every write so far. */
    catchUp: () => {
      for (const c of calls) {
        if (c.verb === "applyStatus") continue;
        const have = children[c.kind as ChildKind].get("ns", "shop");
        if (!have) children[c.kind as ChildKind].put(stamp(c.obj));
      }
      const last = calls.filter((c) => c.verb === "applyStatus").at(-1);
      if (last)
        apps.put({
          ...apps.get("ns", "shop")!,
          status: (last.obj as AppObject).status,
          metadata: { ...apps.get("ns", "shop")!.metadata, resourceVersion: String(++rv) },
        });
      return Promise.resolve();
    },
    /** A pod of the App whose container crashed `restarts` times and runs again since `startedAgoMs`. */
    crashedPod: (restarts: number, startedAgoMs: number) => {
      podInformer.put({
        apiVersion: "v1",
        kind: "Pod",
        metadata: { name: "shop-1", namespace: "ns", labels: { [APP_LABEL]: "shop" }, resourceVersion: String(++rv) },
        spec: { containers: [{ name: "app", image: "r/shop:1" }] },
        status: {
          containerStatuses: [
            {
              name: "app",
              image: "r/shop:1",
              imageID: "",
              ready: true,
              restartCount: restarts,
              state: { running: { startedAt: new Date(clock - startedAgoMs) } },
              lastState: { terminated: { exitCode: 1, reason: "Error" } },
            },
          ],
        },
      });
    },
    /** The deployment controller reports pods: `ready` of 3. */
    pods: (ready: number) => {
      const d = children.Deployment.get("ns", "shop")!;
      const status: k8s.V1DeploymentStatus = {
        observedGeneration: 1,
        replicas: 3,
        updatedReplicas: 3,
        readyReplicas: ready,
        availableReplicas: ready,
      };
      children.Deployment.put({ ...d, metadata: { ...d.metadata, resourceVersion: String(++rv) }, status });
    },
  };
}

const runtime = (c: { obj: KubeObject } | undefined) => (c?.obj as AppObject | undefined)?.status?.pipeline?.runtime;

test("a reconcile that runs before the caches show its writes creates nothing twice and repeats no status", async (t) => {
  const w = world();
  await w.reconcile();
  t.deepEqual(
    w
      .writes("applyNew")
      .map((c) => c.kind)
      .sort(),
    ["Deployment", "HorizontalPodAutoscaler", "Ingress", "Service"],
  );
  t.is(w.writes("applyStatus").length, 1);
  await w.reconcile(); // the caches still hold nothing of it
  t.is(w.writes("applyNew").length, 4);
  t.is(w.writes("apply").length, 0);
  t.is(w.writes("applyStatus").length, 1);
});

test("an App outside a workspace namespace is refused with NotInAWorkspace: no child is written there", async (t) => {
  const w = world({}, { inWorkspace: (ns) => ns !== "ns" });
  await w.reconcile();
  t.deepEqual(w.writes("applyNew"), [], "no workload, no route where the operator may not write");
  const status = (w.writes("applyStatus").at(-1)!.obj as AppObject).status!;
  t.is(status.phase, "failed");
  t.true(JSON.stringify(status.conditions).includes("NotInAWorkspace"));
  t.true(w.events.some((e) => e.type === "Warning" && e.reason === "NotInAWorkspace"));
  // the same App in a workspace namespace is run
  const ok = world({}, { inWorkspace: () => true });
  await ok.reconcile();
  t.true(ok.writes("applyNew").some((c) => c.kind === "Deployment"));
});

test("before its namespace's Secrets are listed, an App is looked at again later and nothing is written", async (t) => {
  const w = world();
  // an <app>-env Secret exists, but the cache of its namespace is not complete yet: read as
  // absent, the Deployment would lose the App's variables (and governance would rotate a key)
  w.secrets.unsynced.add("ns");
  const waiting = await w.reconcile();
  t.deepEqual(waiting, { requeueAfterMs: 2000 });
  t.deepEqual(w.calls, [], "nothing written, no status");
  w.secrets.unsynced.delete("ns");
  await w.reconcile();
  t.true(
    w.writes("applyNew").some((c) => c.kind === "Deployment"),
    "then converged",
  );
});

test("Events tell the App's transitions, not each child it creates; a reconcile that changes nothing tells nothing", async (t) => {
  const w = world();
  await w.reconcile();
  t.is(w.writes("applyNew").length, 4);
  t.deepEqual(
    w.events.map((e) => `${e.kind} ${e.type}/${e.reason}`),
    ["App Normal/RollingOut"],
    "4 children created, one story: the App rolls out (Built for a prebuilt image is not told)",
  );
  await w.catchUp();
  await w.reconcile();
  t.is(w.events.length, 1);
  w.pods(3);
  await w.reconcile();
  t.deepEqual(
    w.events.slice(1).map((e) => `${e.type}/${e.reason}`),
    ["Normal/RolloutComplete", "Normal/Available"],
  );
});

test("a change of replica counts only is written after the delay, a transition at once with the latest counts", async (t) => {
  const w = world();
  await w.reconcile();
  await w.catchUp();
  w.pods(1);
  const first = await w.reconcile();
  t.is(w.writes("applyStatus").length, 2, "starting → degraded is a transition");
  t.like(runtime(w.writes("applyStatus").at(-1)), { status: "degraded", readyReplicas: 1 });
  t.is(first?.requeueAfterMs, undefined, "no timed recheck while it rolls out: its Deployment and pods are watched");
  await w.catchUp();

  w.pods(2);
  const held = await w.reconcile();
  t.is(w.writes("applyStatus").length, 2, "1/3 → 2/3 waits");
  t.is(held?.requeueAfterMs, 5000, "and asks to be looked at again when the delay is over");
  w.tick(3000);
  t.is((await w.reconcile())?.requeueAfterMs, 2000);
  t.is(w.writes("applyStatus").length, 2);
  w.tick(2000);
  await w.reconcile();
  t.is(w.writes("applyStatus").length, 3, "written once the delay is over, though nothing else happened");
  t.like(runtime(w.writes("applyStatus").at(-1)), { readyReplicas: 2, totalReplicas: 3 });
  await w.catchUp();

  w.pods(3);
  await w.reconcile();
  t.is(w.writes("applyStatus").length, 4, "becoming active is written at once");
  const last = w.writes("applyStatus").at(-1)!.obj as AppObject;
  t.is(last.status?.phase, "active");
  t.like(last.status?.pipeline?.runtime, { status: "healthy", readyReplicas: 3, totalReplicas: 3 });
});

test("counts held back go out with the next transition", async (t) => {
  const w = world();
  await w.reconcile();
  await w.catchUp();
  w.pods(1);
  await w.reconcile();
  await w.catchUp();
  w.pods(2);
  await w.reconcile();
  t.is(w.writes("applyStatus").length, 2);
  w.tick(1000);
  w.pods(3);
  t.is(await w.reconcile(), undefined, "active: nothing left to look at");
  t.is(w.writes("applyStatus").length, 3);
  t.like(runtime(w.writes("applyStatus").at(-1)), { readyReplicas: 3, totalReplicas: 3 });
});

test("a create refused with 409 reads the object: ours (a cache lagging behind) is taken as converged, the next wave goes on", async (t) => {
  const w = world({ Service: "ours" });
  await w.reconcile();
  t.deepEqual(
    w
      .writes("applyNew")
      .map((c) => c.kind)
      .sort(),
    ["Deployment", "HorizontalPodAutoscaler", "Ingress", "Service"],
  );
  t.is(w.writes("apply").length, 0, "the Service on the server is already as desired");
  t.not((w.writes("applyStatus").at(-1)!.obj as AppObject).status?.phase, "failed");
});

test("a create refused with 409 by a foreign object: nothing is written to it, nothing refers to it, the App says why", async (t) => {
  const w = world({ Service: "foreign" });
  await w.reconcile();
  t.false(
    w.writes("applyNew").some((c) => c.kind === "Ingress"),
    "the Ingress would route to someone else's Service",
  );
  t.is(w.writes("apply").length, 0);
  const status = (w.writes("applyStatus").at(-1)!.obj as AppObject).status;
  t.is(status?.phase, "failed");
  t.regex(JSON.stringify(status), /Service ns\/shop already exists and is not owned by this App/);
});

test("the App's <app>-env Secret is mounted with the hash of its data, and a change of its data changes the Deployment; one the App does not own is never mounted", async (t) => {
  const template = (c: { obj: KubeObject } | undefined) => (c!.obj as k8s.V1Deployment).spec!.template;
  const env = (owner: string, data: Record<string, string>): KubeObject & { data: Record<string, string> } => ({
    apiVersion: "v1",
    kind: "Secret",
    metadata: {
      name: "shop-env",
      namespace: "ns",
      ownerReferences: [{ apiVersion: API_VERSION, kind: "App", name: "shop", uid: owner, controller: true }],
    },
    data,
  });
  const foreign = world();
  foreign.secrets.put(env("someone-else", { A: "MQ==" }));
  await foreign.reconcile();
  const plain = template(foreign.writes("applyNew").find((c) => c.kind === "Deployment"));
  t.is(plain.spec!.containers[0]!.envFrom, undefined);
  t.is(plain.metadata?.annotations, undefined);

  const w = world();
  w.secrets.put(env("app-uid", { A: "MQ==" }));
  await w.reconcile();
  const first = template(w.writes("applyNew").find((c) => c.kind === "Deployment"));
  t.deepEqual(first.spec!.containers[0]!.envFrom, [{ secretRef: { name: "shop-env", optional: true } }]);
  const hash = first.metadata?.annotations?.["berth.dev/env-hash"];
  t.regex(hash ?? "", /^[a-f0-9]{16}$/);
  await w.catchUp();
  w.secrets.put(env("app-uid", { A: "Mg==" }));
  await w.reconcile();
  const rolled = w.writes("apply").find((c) => c.kind === "Deployment");
  t.truthy(rolled, "the Deployment is applied again");
  t.not(template(rolled).metadata?.annotations?.["berth.dev/env-hash"], hash);
});

test("an App deleted between the cache read and its status write is not a failure: the reconcile ends, nothing is retried", async (t) => {
  const w = world({}, { appDeleted: true });
  // (the churn benchmark met it: a delete landing while the App's reconcile ran)
  await t.notThrowsAsync(w.reconcile());
  t.is(w.writes("applyStatus").length, 1, "the status write was tried once");
});

test("a container that crashed and runs again is a crash loop until it has run a minute; the App is looked at again then, not before", async (t) => {
  const w = world();
  await w.reconcile();
  await w.catchUp();
  w.pods(3);
  w.crashedPod(3, 10_000);
  const held = await w.reconcile();
  await w.catchUp();
  const status = (w.writes("applyStatus").at(-1)?.obj as AppObject).status!;
  t.is(status.phase, "failed", "running again for 10 s after 3 restarts: still a crash loop, not active");
  t.regex(status.conditions!.find((c) => c.type === "Ready")!.message, /restarted 3 times; it has been running again for 10 s/);
  t.is(held?.requeueAfterMs, 50_000 + 500, "looked at again when the minute is up");
  w.tick(50_500);
  const settled = await w.reconcile();
  await w.catchUp();
  t.is((w.writes("applyStatus").at(-1)?.obj as AppObject).status!.phase, "active", "up for a minute: started");
  t.is(settled?.requeueAfterMs, undefined, "and no timer any more");
});
