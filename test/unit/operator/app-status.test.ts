// An App's status as a pure function of what was observed.
import test from "ava";
import type * as k8s from "@kubernetes/client-node";
import { AppSpec, type AppSpecInput } from "../../../crds/schemas.ts";
import { computeStatus, decideStatusWrite, onlyCountsChanged, statusEqual, statusEvents } from "../../../operator/app/status.ts";
import { CRASH_STABLE_MS, podFailure, podWaiting, rolloutState } from "../../../operator/kit/rollout.ts";

const cfg = { baseDomain: "apps.example.com" };
const now = new Date("2026-11-21T10:00:00Z");
const later = new Date("2026-11-21T10:05:00Z");
const spec = (s: Partial<AppSpecInput> = {}) => AppSpec.parse({ name: "Shop", slug: "shop", image: "r/shop:1", ...s });
const dep = (replicas: number, st: k8s.V1DeploymentStatus, generation = 2): k8s.V1Deployment => ({
  metadata: { generation },
  spec: { replicas, selector: {}, template: {} },
  status: { observedGeneration: generation, ...st },
});
const cond = (s: ReturnType<typeof computeStatus>, type: string) => s.conditions?.find((c) => c.type === type);

test("a new App with only a Git repository is stopped and says it waits for a build", (t) => {
  const s = computeStatus({
    generation: 1,
    spec: spec({ image: undefined, gitRepoUrl: "https://g.example.com/a.git" }),
    old: undefined,
    now,
    cfg,
  });
  t.is(s.phase, "stopped");
  t.is(cond(s, "Built")?.reason, "WaitingForBuild");
  t.is(cond(s, "Ready")?.status, "False");
  t.is(s.pipeline?.build?.status, "pending");
  t.is(s.observedGeneration, 1);
});

test("an App with no source at all is stopped", (t) => {
  const s = computeStatus({ generation: 1, spec: spec({ image: undefined }), old: undefined, now, cfg });
  t.is(s.phase, "stopped");
  t.is(cond(s, "Ready")?.reason, "NoSource");
});

const phases: [string, k8s.V1Deployment | undefined, "active" | "deploying" | "failed", "True" | "False"][] = [
  ["no Deployment yet", undefined, "deploying", "False"],
  [
    "controller has not observed the new generation",
    dep(2, { replicas: 2, updatedReplicas: 2, readyReplicas: 2, availableReplicas: 2, observedGeneration: 1 }),
    "deploying",
    "False",
  ],
  ["pods not yet available", dep(2, { replicas: 2, updatedReplicas: 2, readyReplicas: 1, availableReplicas: 1 }), "deploying", "False"],
  ["old pods still terminating", dep(2, { replicas: 3, updatedReplicas: 2, readyReplicas: 3, availableReplicas: 3 }), "deploying", "False"],
  ["rolled out and ready", dep(2, { replicas: 2, updatedReplicas: 2, readyReplicas: 2, availableReplicas: 2 }), "active", "True"],
  [
    "progress deadline exceeded",
    dep(2, { replicas: 2, updatedReplicas: 1, conditions: [{ type: "Progressing", status: "False", reason: "ProgressDeadlineExceeded" }] }),
    "failed",
    "False",
  ],
];
for (const [what, d, phase, ready] of phases) {
  test(`phase when ${what}: ${phase}`, (t) => {
    const s = computeStatus({
      generation: 3,
      spec: spec({ minReplicas: 2 }),
      old: undefined,
      deployment: d,
      deploymentId: "shop-abc",
      now,
      cfg,
    });
    t.is(s.phase, phase);
    t.is(cond(s, "Ready")?.status, ready);
    t.is(s.url, "https://shop.apps.example.com");
    t.is(s.latestDeployment?.id, "shop-abc");
  });
}

test("a suspended App is disabled and keeps its latest deployment", (t) => {
  const old = computeStatus({
    generation: 1,
    spec: spec(),
    old: undefined,
    deployment: dep(1, { replicas: 1, updatedReplicas: 1, readyReplicas: 1, availableReplicas: 1 }),
    deploymentId: "shop-1",
    now,
    cfg,
  });
  const s = computeStatus({
    generation: 2,
    spec: spec({ suspended: true }),
    old,
    deployment: dep(0, { replicas: 0 }),
    deploymentId: "shop-1",
    now: later,
    cfg,
  });
  t.is(s.phase, "disabled");
  t.is(cond(s, "Ready")?.reason, "Suspended");
  t.deepEqual(s.latestDeployment, old.latestDeployment);
});

test("lastTransitionTime moves only when a condition's status changes", (t) => {
  const deploying = computeStatus({ generation: 1, spec: spec(), old: undefined, deployment: undefined, deploymentId: "d1", now, cfg });
  const still = computeStatus({ generation: 1, spec: spec(), old: deploying, deployment: undefined, deploymentId: "d1", now: later, cfg });
  t.is(cond(still, "Ready")?.lastTransitionTime, now.toISOString());
  t.true(statusEqual(deploying, still), "nothing changed, so nothing is written");
  const ready = computeStatus({
    generation: 1,
    spec: spec(),
    old: still,
    deployment: dep(1, { replicas: 1, updatedReplicas: 1, readyReplicas: 1, availableReplicas: 1 }, 1),
    deploymentId: "d1",
    now: later,
    cfg,
  });
  t.is(cond(ready, "Ready")?.lastTransitionTime, later.toISOString());
  t.is(cond(ready, "Built")?.lastTransitionTime, now.toISOString());
  t.is(ready.pipeline?.deploy?.deployedAt, later.toISOString());
  t.is(ready.latestDeployment?.createdAt, now.toISOString(), "the same release keeps its creation time");
});

test("a new release gets a new latestDeployment", (t) => {
  const a = computeStatus({ generation: 1, spec: spec(), old: undefined, deploymentId: "d1", now, cfg });
  const b = computeStatus({ generation: 2, spec: spec({ image: "r/shop:2" }), old: a, deploymentId: "d2", now: later, cfg });
  t.like(b.latestDeployment, { id: "d2", status: "in_progress", image: "r/shop:2", createdAt: later.toISOString() });
});

test("cron Apps are active once their CronJob exists", (t) => {
  const s = computeStatus({
    generation: 1,
    spec: spec({ type: "cron", schedule: "@hourly" }),
    old: undefined,
    cronJob: { spec: { schedule: "@hourly", jobTemplate: {} } },
    deploymentId: "c1",
    now,
    cfg,
  });
  t.is(s.phase, "active");
  t.is(s.url, undefined);
});

test("an invalid spec fails the App with the reason", (t) => {
  const s = computeStatus({ generation: 4, spec: undefined, invalid: "spec.x: bad", old: undefined, now, cfg });
  t.is(s.phase, "failed");
  t.like(cond(s, "Ready"), { status: "False", reason: "InvalidSpec", message: "spec.x: bad", observedGeneration: 4 });
});

test("rolloutState follows kubectl rollout status", (t) => {
  t.is(rolloutState(undefined), "in_progress");
  t.is(rolloutState(dep(0, { replicas: 0 })), "succeeded");
});

test("GovernanceReady is reported when governance applies, without changing the phase", (t) => {
  const d = dep(1, { replicas: 1, updatedReplicas: 1, readyReplicas: 1, availableReplicas: 1 });
  const s = computeStatus({
    generation: 2,
    spec: spec(),
    old: undefined,
    deployment: d,
    deploymentId: "x",
    now,
    cfg,
    governance: { ready: true, reason: "Provisioned", message: "ok" },
  });
  t.is(s.phase, "active");
  t.like(cond(s, "GovernanceReady"), { status: "True", reason: "Provisioned" });
  const none = computeStatus({ generation: 2, spec: spec(), old: undefined, deployment: d, deploymentId: "x", now, cfg });
  t.is(cond(none, "GovernanceReady"), undefined);
});

// A scale-up from 1 to 3 replicas seen step by step: generation 2 observed, pods becoming ready.
const scaling = (ready: number, total: number, old?: ReturnType<typeof computeStatus>) =>
  computeStatus({
    generation: 2,
    spec: spec({ minReplicas: 3 }),
    old,
    deployment: dep(3, { replicas: total, updatedReplicas: total, readyReplicas: ready, availableReplicas: ready }),
    deploymentId: "d1",
    now,
    cfg,
  });

test("onlyCountsChanged: replica counts and the messages quoting them, nothing else", (t) => {
  const one = scaling(1, 3);
  const two = scaling(2, 3, one);
  t.is(one.phase, "deploying");
  t.is(two.phase, "deploying");
  t.false(statusEqual(one, two));
  t.true(onlyCountsChanged(one, two), "1/3 → 2/3 ready");
  const all = scaling(3, 3, two);
  t.is(all.phase, "active");
  t.false(onlyCountsChanged(two, all), "becoming active is a transition");
  t.false(onlyCountsChanged(undefined, one), "a first status is written at once");
  const starting = scaling(0, 3);
  t.is(starting.pipeline?.runtime?.status, "starting");
  t.false(onlyCountsChanged(starting, one), "starting → degraded is a pipeline state, not a count");
  const failed = computeStatus({ generation: 2, spec: undefined, invalid: "Service x already exists", old: one, now, cfg });
  const otherReason = computeStatus({ generation: 2, spec: undefined, invalid: "Ingress x already exists", old: failed, now, cfg });
  t.false(onlyCountsChanged(failed, otherReason), "a message that is not about counts is not held back");
});

test("decideStatusWrite: transitions at once, counts-only changes held back for the delay, then written", (t) => {
  const one = scaling(1, 3),
    two = scaling(2, 3, one),
    all = scaling(3, 3, two);
  t.deepEqual(decideStatusWrite(one, one, undefined, 0, 5000), { write: false }, "nothing changed");
  t.deepEqual(decideStatusWrite(one, all, undefined, 0, 5000), { write: true }, "a phase change goes out at once");
  t.deepEqual(decideStatusWrite(one, two, undefined, 1000, 5000), { write: false, pendingSince: 1000, waitMs: 5000 });
  t.deepEqual(
    decideStatusWrite(one, two, 1000, 4000, 5000),
    { write: false, pendingSince: 1000, waitMs: 2000 },
    "the wait runs from the first sighting",
  );
  t.deepEqual(decideStatusWrite(one, two, 1000, 6000, 5000), { write: true }, "written once the delay is over");
  t.deepEqual(decideStatusWrite(one, all, 1000, 2000, 5000), { write: true }, "a transition meanwhile carries the counts along");
  t.deepEqual(decideStatusWrite(one, two, undefined, 1000, 0), { write: true }, "delay 0 writes every change");
});

// ---- Events told by status transitions (statusEvents) ----

const at = "2026-11-23T10:00:00Z";
const c = (type: string, status: "True" | "False", reason: string, message = `${type} ${reason}`) => ({
  type,
  status,
  reason,
  message,
  lastTransitionTime: at,
});

test("statusEvents: a first status tells each condition once, Warnings for failures, no event for a prebuilt image", (t) => {
  const next = {
    conditions: [
      c("Built", "True", "PrebuiltImage"),
      c("Deployed", "False", "RollingOut"),
      c("Ready", "False", "RollingOut"),
      c("GovernanceReady", "False", "ProvisioningFailed", "API down"),
    ],
  };
  t.deepEqual(statusEvents(undefined, next), [
    { type: "Warning", reason: "ProvisioningFailed", message: "API down" },
    { type: "Normal", reason: "RollingOut", message: "Deployed RollingOut" },
  ]);
});

test("statusEvents: only transitions are told (status or reason), not message or count changes", (t) => {
  const prev = { conditions: [c("Deployed", "False", "RollingOut", "1/3"), c("Ready", "False", "RollingOut", "1/3")] };
  t.deepEqual(
    statusEvents(prev, { conditions: [c("Deployed", "False", "RollingOut", "2/3"), c("Ready", "False", "RollingOut", "2/3")] }),
    [],
  );
  t.deepEqual(
    statusEvents(prev, { conditions: [c("Deployed", "True", "RolloutComplete", "done"), c("Ready", "True", "Available", "3/3")] }),
    [
      { type: "Normal", reason: "RolloutComplete", message: "done" },
      { type: "Normal", reason: "Available", message: "3/3" },
    ],
  );
  t.deepEqual(statusEvents(prev, { conditions: [c("Ready", "False", "ObjectInTheWay", "Service x already exists")] }), [
    { type: "Warning", reason: "ObjectInTheWay", message: "Service x already exists" },
  ]);
});

// ---- a release whose pods cannot start (podFailure) ----

const pod = (name: string, image: string, waiting?: { reason: string; message?: string }, restartCount = 0): k8s.V1Pod => ({
  metadata: { name },
  spec: { containers: [{ name: "app", image }] },
  status: {
    containerStatuses: [{ name: "app", image, imageID: "", ready: false, restartCount, ...(waiting ? { state: { waiting } } : {}) }],
  },
});

test("podFailure: pulls that fail and crash loops of the App's image are failures, with the pod, the reason and what to do", (t) => {
  const pull = podFailure(
    [pod("shop-1", "r/shop:1", { reason: "ImagePullBackOff", message: 'Back-off pulling image "r/shop:1"' })],
    "r/shop:1",
  );
  t.is(pull?.reason, "ImagePullBackOff");
  t.regex(
    pull!.message,
    /^Pod shop-1 container app is ImagePullBackOff: Back-off pulling image "r\/shop:1"\. the image cannot be pulled: check its name/,
  );
  t.is(podFailure([pod("shop-1", "r/shop:1", { reason: "CrashLoopBackOff" }, 3)], "r/shop:1")?.reason, "CrashLoopBackOff");
  t.is(podFailure([pod("shop-1", "r/shop:1", { reason: "InvalidImageName" })], "r/shop:1")?.reason, "InvalidImageName");
});

test("podFailure: a pod still starting, an old release's pod, or a crash loop before any restart is no failure", (t) => {
  t.is(podFailure([pod("shop-1", "r/shop:1", { reason: "ContainerCreating" })], "r/shop:1"), undefined);
  t.is(podFailure([pod("shop-1", "r/shop:0", { reason: "ImagePullBackOff" })], "r/shop:1"), undefined, "the previous release");
  t.is(podFailure([pod("shop-1", "r/shop:1", { reason: "CrashLoopBackOff" }, 0)], "r/shop:1"), undefined);
  t.is(
    podFailure(
      [{ ...pod("shop-1", "r/shop:1", { reason: "ErrImagePull" }), metadata: { name: "shop-1", deletionTimestamp: now } }],
      "r/shop:1",
    ),
    undefined,
    "terminating",
  );
  t.is(podFailure(undefined, "r/shop:1"), undefined);
});

test("a release whose pods cannot pull fails at once with the pods' reason; the Deployment's progress deadline is not awaited", (t) => {
  const s = computeStatus({
    generation: 2,
    spec: spec(),
    old: undefined,
    now,
    cfg,
    deployment: dep(1, { observedGeneration: 2, replicas: 1, updatedReplicas: 1, readyReplicas: 0, availableReplicas: 0 }),
    pods: [pod("shop-1", "r/shop:1", { reason: "ErrImagePull", message: "not found" })],
  });
  t.is(s.phase, "failed");
  t.like(cond(s, "Ready"), { status: "False", reason: "ErrImagePull" });
  t.like(cond(s, "Deployed"), { status: "False", reason: "ErrImagePull" });
  t.is(s.latestDeployment?.status, "failed");
  t.deepEqual(statusEvents(undefined, s).find((e) => e.reason === "ErrImagePull")?.type, "Warning");
  // Once the pods run, the same release is active.
  const fixed = computeStatus({
    generation: 2,
    spec: spec(),
    old: s,
    now: later,
    cfg,
    deployment: dep(1, { observedGeneration: 2, replicas: 1, updatedReplicas: 1, readyReplicas: 1, availableReplicas: 1 }),
    pods: [pod("shop-1", "r/shop:1")],
  });
  t.is(fixed.phase, "active");
});

// ---- a release whose pods wait for the scheduler (podWaiting) ----

const SCHEDULER = "0/2 nodes are available: 1 Insufficient cpu, 1 node(s) didn't match Pod's node affinity/selector.";
const pending = (name: string, image: string, scheduled?: Partial<k8s.V1PodCondition>): k8s.V1Pod => ({
  metadata: { name },
  spec: { containers: [{ name: "app", image }] },
  status: {
    phase: "Pending",
    conditions: [{ type: "PodScheduled", status: "False", reason: "Unschedulable", message: SCHEDULER, ...scheduled }],
  },
});

test("podWaiting: a pod of the App's image the scheduler cannot place, with the scheduler's reason; nothing for placed, old, terminating or merely new pods", (t) => {
  t.deepEqual(podWaiting([pending("shop-2", "r/shop:1")], "r/shop:1"), {
    reason: "Unschedulable",
    message: `Pod shop-2 is waiting for a node with room for it: ${SCHEDULER}`,
  });
  t.is(podWaiting([pending("shop-2", "r/shop:0")], "r/shop:1"), undefined, "the previous release's pod");
  t.is(
    podWaiting([{ ...pending("shop-2", "r/shop:1"), metadata: { name: "shop-2", deletionTimestamp: now } }], "r/shop:1"),
    undefined,
    "terminating",
  );
  t.is(
    podWaiting([pending("shop-2", "r/shop:1", { status: "True", reason: undefined, message: undefined })], "r/shop:1"),
    undefined,
    "scheduled",
  );
  t.is(podWaiting([pending("shop-2", "r/shop:1", { reason: "SchedulingGated" })], "r/shop:1"), undefined, "gated, not refused");
  t.is(
    podWaiting(
      [{ ...pending("shop-2", "r/shop:1"), spec: { nodeName: "n1", containers: [{ name: "app", image: "r/shop:1" }] } }],
      "r/shop:1",
    ),
    undefined,
    "bound to a node",
  );
  t.is(podWaiting([pod("shop-1", "r/shop:1")], "r/shop:1"), undefined, "no conditions yet");
  t.is(podWaiting(undefined, "r/shop:1"), undefined);
});

test("a rollout whose new pod waits for the scheduler says why, as a Warning, and stays deploying; once placed and ready the App is active", (t) => {
  const rolling = dep(1, { observedGeneration: 2, replicas: 2, updatedReplicas: 1, readyReplicas: 1, availableReplicas: 1 });
  const before = computeStatus({
    generation: 2,
    spec: spec(),
    old: undefined,
    now,
    cfg,
    deployment: rolling,
    pods: [pod("shop-1", "r/shop:0")],
  });
  t.like(cond(before, "Deployed"), { status: "False", reason: "RollingOut", message: "Rolling out: 1/1 replicas ready" });
  const s = computeStatus({
    generation: 2,
    spec: spec(),
    old: before,
    now,
    cfg,
    deployment: rolling,
    pods: [pod("shop-1", "r/shop:0"), pending("shop-2", "r/shop:1")],
  });
  t.is(s.phase, "deploying");
  t.like(cond(s, "Deployed"), {
    status: "False",
    reason: "Unschedulable",
    message: `Rolling out: 1/1 replicas ready. Pod shop-2 is waiting for a node with room for it: ${SCHEDULER}`,
  });
  t.like(cond(s, "Ready"), { status: "False", reason: "Unschedulable" });
  t.is(s.pipeline?.deploy?.status, "in_progress");
  t.deepEqual(statusEvents(before, s), [{ type: "Warning", reason: "Unschedulable", message: cond(s, "Deployed")!.message }]);
  t.false(onlyCountsChanged(before, s), "a transition: written at once");
  const placed = computeStatus({
    generation: 2,
    spec: spec(),
    old: s,
    now: later,
    cfg,
    deployment: dep(1, { observedGeneration: 2, replicas: 1, updatedReplicas: 1, readyReplicas: 1, availableReplicas: 1 }),
    pods: [pod("shop-2", "r/shop:1")],
  });
  t.is(placed.phase, "active");
  t.like(cond(placed, "Deployed"), { status: "True", reason: "RolloutComplete" });
});

test("a rollout whose pods the cluster refuses (the workspace's quota) says why, as a Warning, and stays deploying", (t) => {
  const QUOTA = 'pods "shop-7d9-x" is forbidden: exceeded quota: berth-workspace, requested: pods=1, used: pods=200, limited: pods=200';
  const refused = dep(1, {
    observedGeneration: 2,
    replicas: 0,
    updatedReplicas: 0,
    readyReplicas: 0,
    availableReplicas: 0,
    conditions: [{ type: "ReplicaFailure", status: "True", reason: "FailedCreate", message: QUOTA }],
  });
  const before = computeStatus({
    generation: 2,
    spec: spec(),
    old: undefined,
    now,
    cfg,
    deployment: dep(1, { observedGeneration: 2, replicas: 0, updatedReplicas: 0 }),
    pods: [],
  });
  const s = computeStatus({ generation: 2, spec: spec(), old: before, now, cfg, deployment: refused, pods: [] });
  t.is(s.phase, "deploying");
  t.like(cond(s, "Deployed"), { status: "False", reason: "PodsRefused" });
  t.regex(cond(s, "Ready")!.message, /The cluster refuses to create its pods: .*exceeded quota: berth-workspace/);
  t.deepEqual(statusEvents(before, s), [{ type: "Warning", reason: "PodsRefused", message: cond(s, "Deployed")!.message }]);
});

test("podFailure: between back-offs a crashing container (terminated or running, not ready, restarted twice) is still a crash loop", (t) => {
  const between: k8s.V1Pod = {
    metadata: { name: "w-1" },
    spec: { containers: [{ name: "app", image: "r/shop:1" }] },
    status: {
      containerStatuses: [
        {
          name: "app",
          image: "r/shop:1",
          imageID: "",
          ready: false,
          restartCount: 3,
          state: { terminated: { exitCode: 0, reason: "Completed" } },
        },
      ],
    },
  };
  const f = podFailure([between], "r/shop:1");
  t.is(f?.reason, "CrashLoopBackOff");
  t.regex(f!.message, /exited with code 0 \(Completed\) and was restarted 3 times/);
  const recovered = {
    ...between,
    status: { containerStatuses: [{ ...between.status!.containerStatuses![0]!, ready: true, state: { running: {} } }] },
  };
  t.is(podFailure([recovered], "r/shop:1"), undefined, "a container that came back and is ready");
});

test("podFailure with the time: a container that crashed and runs again (even ready, as a worker without a probe) is a crash loop for a minute, then started", (t) => {
  const running = (startedAgoMs: number, restartCount = 3): k8s.V1Pod => ({
    metadata: { name: "w-1" },
    spec: { containers: [{ name: "app", image: "r/shop:1" }] },
    status: {
      containerStatuses: [
        {
          name: "app",
          image: "r/shop:1",
          imageID: "",
          ready: true,
          restartCount,
          state: { running: { startedAt: new Date(now.getTime() - startedAgoMs) } },
          lastState: { terminated: { exitCode: 1, reason: "Error" } },
        },
      ],
    },
  });
  const f = podFailure([running(5_000)], "r/shop:1", now);
  t.is(f?.reason, "CrashLoopBackOff");
  t.regex(f!.message, /exited with code 1 \(Error\) and was restarted 3 times; it has been running again for 5 s/);
  t.deepEqual(f?.until, new Date(now.getTime() + CRASH_STABLE_MS - 5_000));
  t.is(podFailure([running(CRASH_STABLE_MS)], "r/shop:1", now), undefined, "up for a minute: started");
  t.is(podFailure([running(5_000, 1)], "r/shop:1", now), undefined, "one restart is no crash loop");
  t.is(podFailure([running(5_000)], "r/shop:1"), undefined, "without the time, a ready container is no failure (as before)");
  const ready = { observedGeneration: 2, replicas: 1, updatedReplicas: 1, readyReplicas: 1, availableReplicas: 1 };
  const s = computeStatus({ generation: 2, spec: spec(), old: undefined, now, cfg, deployment: dep(1, ready), pods: [running(5_000)] });
  t.is(s.phase, "failed", "the rollout looks complete, but its container is crash-looping");
  t.like(cond(s, "Ready"), { status: "False", reason: "CrashLoopBackOff" });
  const later2 = computeStatus({
    generation: 2,
    spec: spec(),
    old: s,
    now: new Date(now.getTime() + CRASH_STABLE_MS),
    cfg,
    deployment: dep(1, ready),
    pods: [running(5_000 + CRASH_STABLE_MS)],
  });
  t.is(later2.phase, "active");
});
