// The release controller is the only writer of a Release's status: it records how a deploying
// release's rollout ended from the App's workload, as the App's own status tells it (the same
// reading, kit/rollout.ts), and supersedes the release it replaced. Pure parts, then the
// reconciler against in-memory caches.
import test from "ava";
import { pino } from "pino";
import type * as k8s from "@kubernetes/client-node";
import { API_VERSION, APP_LABEL, AppSpec, type ReleasePhase, type ReleaseStatus } from "../../../crds/schemas.ts";
import type { Informer } from "../../../kube/informer.ts";
import { FakeInformer } from "../../helpers/fake-informer.ts";
import type { KubeObject, ObjectClient } from "../../../kube/objects.ts";
import { computeStatus } from "../../../operator/app/status.ts";
import type { AppObject, ReleaseObject } from "../../../operator/kit/objects.ts";
import { deployingReleasesOf } from "../../../operator/release/controller.ts";
import { ReleaseReconciler } from "../../../operator/release/reconcile.ts";
import { rolloutStep, supersedeStep, type WorkloadView } from "../../../operator/release/status.ts";

const NOW = new Date("2026-03-01T12:00:00Z");
const IMG = (n: number) => `reg/apps/ns/web@sha256:${String(n).repeat(64)}`;

function rel(sequence: number, phase: ReleasePhase, status: Partial<ReleaseStatus> = {}): ReleaseObject {
  return {
    apiVersion: API_VERSION,
    kind: "Release",
    metadata: { name: `web-${sequence}`, namespace: "ns", uid: `r-${sequence}`, generation: 1, resourceVersion: "1" },
    spec: { appRef: { name: "web" }, sequence, trigger: "push" },
    status: { phase, ...(phase === "deploying" || phase === "succeeded" ? { image: IMG(sequence) } : {}), ...status },
  };
}

const app = (spec: Record<string, unknown> = {}): AppObject => ({
  apiVersion: API_VERSION,
  kind: "App",
  metadata: { name: "web", namespace: "ns", uid: "app-uid", generation: 1 },
  spec: { name: "Web", slug: "web", gitRepoUrl: "https://git.example/r.git", ...spec },
});

const owner = { apiVersion: API_VERSION, kind: "App", name: "web", uid: "app-uid", controller: true };

function deployment(
  image: string,
  st: Partial<k8s.V1DeploymentStatus> = {},
  opts: { generation?: number; owned?: boolean } = {},
): k8s.V1Deployment & KubeObject {
  const generation = opts.generation ?? 2;
  return {
    apiVersion: "apps/v1",
    kind: "Deployment",
    metadata: {
      name: "web",
      namespace: "ns",
      generation,
      labels: { [APP_LABEL]: "web" },
      ownerReferences: opts.owned === false ? [] : [owner],
    },
    spec: { replicas: 1, selector: {}, template: { spec: { containers: [{ name: "app", image }] } } },
    status: { observedGeneration: generation, replicas: 1, updatedReplicas: 1, availableReplicas: 1, readyReplicas: 1, ...st },
  };
}

const pullFailing = (image: string): k8s.V1Pod => ({
  metadata: { name: "web-abc", namespace: "ns", labels: { [APP_LABEL]: "web" } },
  spec: { containers: [{ name: "app", image }] },
  status: {
    containerStatuses: [
      {
        name: "app",
        image,
        imageID: "",
        ready: false,
        restartCount: 0,
        state: { waiting: { reason: "ErrImagePull", message: "not found" } },
      },
    ],
  },
});

test("a serving release succeeds once the App's Deployment runs its image and is rolled out", (t) => {
  const r2 = rel(2, "deploying");
  const step = rolloutStep(r2, [rel(1, "succeeded"), r2], { app: app(), deployment: deployment(IMG(2)) }, NOW);
  t.deepEqual(step, {
    change: { phase: "succeeded", deployedAt: NOW.toISOString(), finishedAt: NOW.toISOString() },
    reason: "Deployed",
    message: `Release web-2 serves ${IMG(2)}`,
  });
});

test("no step while the rollout runs, before the App controller applied the image, or where the release does not run", (t) => {
  const r2 = rel(2, "deploying");
  const siblings = [rel(1, "succeeded"), r2];
  const cases: [string, WorkloadView][] = [
    ["the Deployment still runs the previous image (rolled out)", { app: app(), deployment: deployment(IMG(1)) }],
    ["not observed yet", { app: app(), deployment: { ...deployment(IMG(2)), status: { observedGeneration: 1 } } }],
    ["new pods not ready", { app: app(), deployment: deployment(IMG(2), { updatedReplicas: 1, availableReplicas: 0, readyReplicas: 0 }) }],
    ["no Deployment", { app: app() }],
    ["a Deployment that is not the App's", { app: app(), deployment: deployment(IMG(2), {}, { owned: false }) }],
    ["the App is suspended", { app: app({ suspended: true }), deployment: deployment(IMG(2)) }],
    ["a prebuilt spec.image wins over releases", { app: app({ image: "r/other:1" }), deployment: deployment(IMG(2)) }],
    ["an invalid App spec", { app: app({ minReplicas: -1 }), deployment: deployment(IMG(2)) }],
  ];
  for (const [what, w] of cases) t.is(rolloutStep(r2, siblings, w, NOW), undefined, what);
  const older = rel(1, "deploying");
  t.is(
    rolloutStep(older, [older, rel(2, "deploying")], { app: app(), deployment: deployment(IMG(1)) }, NOW),
    undefined,
    "not the serving one",
  );
  t.is(rolloutStep(rel(2, "building"), siblings, { app: app(), deployment: deployment(IMG(2)) }, NOW), undefined, "not deploying");
});

test("a release whose pods cannot start, or that does not progress in time, fails with that reason", (t) => {
  const r2 = rel(2, "deploying");
  const pulling = rolloutStep(
    r2,
    [r2],
    { app: app(), deployment: deployment(IMG(2), { availableReplicas: 0, readyReplicas: 0 }), pods: [pullFailing(IMG(2))] },
    NOW,
  );
  t.is(pulling?.reason, "DeployFailed");
  t.like(pulling?.change, { phase: "failed", finishedAt: NOW.toISOString(), failure: { step: "deploy", reason: "ErrImagePull" } });
  t.regex(pulling!.message, /Pod web-abc container app is ErrImagePull: not found/);
  const deadline = deployment(IMG(2), {
    availableReplicas: 0,
    conditions: [{ type: "Progressing", status: "False", reason: "ProgressDeadlineExceeded" }],
  });
  t.like(rolloutStep(r2, [r2], { app: app(), deployment: deadline }, NOW)?.change, {
    phase: "failed",
    failure: { step: "deploy", reason: "ProgressDeadlineExceeded", message: "The rollout did not progress in time" },
  });
});

test("a cron App's release succeeds once its CronJob runs the image", (t) => {
  const r2 = rel(2, "deploying");
  const cronJob = (image: string) =>
    ({
      apiVersion: "batch/v1",
      kind: "CronJob",
      metadata: { name: "web", namespace: "ns", ownerReferences: [owner] },
      spec: { schedule: "@daily", jobTemplate: { spec: { template: { spec: { containers: [{ name: "app", image }] } } } } },
    }) as k8s.V1CronJob & KubeObject;
  const cron = app({ type: "cron", schedule: "@daily" });
  t.is(rolloutStep(r2, [r2], { app: cron, cronJob: cronJob(IMG(2)) }, NOW)?.change.phase, "succeeded");
  t.is(rolloutStep(r2, [r2], { app: cron, cronJob: cronJob(IMG(1)) }, NOW), undefined);
});

test("the release's outcome is the App's: succeeded exactly when the App's Deployed is True, failed when the App fails", (t) => {
  const r2 = rel(2, "deploying");
  const workloads: WorkloadView[] = [
    { app: app(), deployment: deployment(IMG(2)) },
    { app: app(), deployment: deployment(IMG(2), { availableReplicas: 0, readyReplicas: 0 }) },
    { app: app(), deployment: deployment(IMG(2), { availableReplicas: 0, readyReplicas: 0 }), pods: [pullFailing(IMG(2))] },
    { app: app({ minReplicas: 2 }), deployment: deployment(IMG(2)) },
    {
      app: app(),
      deployment: deployment(IMG(2), { conditions: [{ type: "Progressing", status: "False", reason: "ProgressDeadlineExceeded" }] }),
    },
  ];
  for (const [i, w] of workloads.entries()) {
    const spec = AppSpec.parse({ ...(w.app.spec as object), image: IMG(2) });
    const status = computeStatus({
      generation: 1,
      spec,
      old: undefined,
      now: NOW,
      cfg: { baseDomain: "apps.test" },
      deployment: w.deployment,
      pods: w.pods,
    });
    const deployed = (status.conditions ?? []).find((c) => c.type === "Deployed");
    if (!deployed) return t.fail(`case ${i}: no Deployed condition`);
    const step = rolloutStep(r2, [r2], w, NOW);
    if (deployed.status === "True") t.is(step?.change.phase, "succeeded", `case ${i}`);
    else if (status.phase === "failed") {
      t.is(step?.change.phase, "failed", `case ${i}`);
      t.like(step?.change.failure, { reason: deployed.reason, message: deployed.message }, `case ${i}`);
    } else t.is(step, undefined, `case ${i}`);
  }
});

test("a succeeded release is superseded once another succeeded release serves; not while the new one deploys", (t) => {
  t.deepEqual(supersedeStep(rel(1, "succeeded"), rel(2, "succeeded")), {
    change: { phase: "superseded" },
    reason: "Superseded",
    message: "Release web-2 took over",
  });
  t.is(supersedeStep(rel(1, "succeeded"), rel(2, "deploying")), undefined);
  t.is(supersedeStep(rel(2, "succeeded"), rel(2, "succeeded")), undefined, "the serving one itself");
  t.is(supersedeStep(rel(1, "failed"), rel(2, "succeeded")), undefined);
});

test("the App's workload and pods wake only its deploying releases", (t) => {
  const releases = { list: () => [rel(1, "succeeded"), rel(2, "deploying"), rel(3, "building")] } as unknown as Informer<ReleaseObject>;
  const map = deployingReleasesOf(releases);
  t.deepEqual(map(deployment(IMG(2))), [{ namespace: "ns", name: "web-2" }]);
  t.deepEqual(map({ metadata: { name: "x", namespace: "ns" } }), [], "no App label: a build pod");
});

function releaseWorld(releases: ReleaseObject[], workload: KubeObject[]) {
  let rv = 10;
  const written: { name: string; status: ReleaseStatus }[] = [];
  const events: { reason: string; type: string; name: string }[] = [];
  const informers = {
    releases: new FakeInformer<ReleaseObject>(releases),
    apps: new FakeInformer<AppObject>([app()]),
    jobs: new FakeInformer<KubeObject>(),
    pods: new FakeInformer<KubeObject>(),
    deployments: new FakeInformer<KubeObject>(workload),
    cronJobs: new FakeInformer<KubeObject>(),
  };
  const client = {
    applyStatus: (_plural: string, o: ReleaseObject) => {
      written.push({ name: o.metadata.name!, status: o.status! });
      const stored = informers.releases.get("ns", o.metadata.name!)!;
      return Promise.resolve({ ...stored, status: o.status, metadata: { ...stored.metadata, resourceVersion: String(++rv) } });
    },
  } as unknown as ObjectClient;
  const reconciler = new ReleaseReconciler({
    client,
    releases: informers.releases as unknown as Informer<ReleaseObject>,
    apps: informers.apps as unknown as Informer<AppObject>,
    jobs: informers.jobs as unknown as Informer<KubeObject>,
    pods: informers.pods as unknown as Informer<KubeObject>,
    deployments: informers.deployments as unknown as Informer<KubeObject>,
    cronJobs: informers.cronJobs as unknown as Informer<KubeObject>,
    placement: {},
    now: () => NOW,
    events: { event: (o: KubeObject, type: string, reason: string) => events.push({ reason, type, name: o.metadata.name! }) },
  });
  return {
    written,
    events,
    informers,
    reconcile: (name: string) =>
      reconciler.reconcile({ namespace: "ns", name }, { signal: new AbortController().signal, log: pino({ level: "silent" }) }),
  };
}

test("the release controller records the rollout's end and supersedes the release it replaced, in one reconcile; then it writes nothing", async (t) => {
  const w = releaseWorld([rel(1, "succeeded"), rel(2, "deploying")], [deployment(IMG(2))]);
  await w.reconcile("web-2");
  t.deepEqual(
    w.written.map((x) => [x.name, x.status.phase]),
    [
      ["web-2", "succeeded"],
      ["web-1", "superseded"],
    ],
  );
  t.like(w.written[0]!.status, { image: IMG(2), deployedAt: NOW.toISOString(), observedGeneration: 1 });
  t.deepEqual(
    w.events.map((e) => [e.name, e.type, e.reason]),
    [
      ["web-2", "Normal", "Deployed"],
      ["web-1", "Normal", "Superseded"],
    ],
  );
  // The same reconciles again, before and after the caches show the writes: nothing more.
  await w.reconcile("web-2");
  await w.reconcile("web-1");
  for (const [i, x] of w.written.entries()) {
    const stored = w.informers.releases.get("ns", x.name)!;
    w.informers.releases.put({ ...stored, status: x.status, metadata: { ...stored.metadata, resourceVersion: String(11 + i) } });
  }
  await w.reconcile("web-2");
  await w.reconcile("web-1");
  t.is(w.written.length, 2);
  t.is(w.events.length, 2);
});

test("a deploying release waits while its rollout runs: no write, no Event", async (t) => {
  const w = releaseWorld([rel(1, "succeeded"), rel(2, "deploying")], [deployment(IMG(1))]);
  await w.reconcile("web-2");
  await w.reconcile("web-1");
  t.deepEqual(w.written, []);
  t.deepEqual(w.events, []);
});
