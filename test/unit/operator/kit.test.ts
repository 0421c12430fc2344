// operator/kit/: what the controllers share. Status is written only when it differs from the
// stored one; Events follow one policy (a transition a user acts on or is told about, never a
// child object created or pruned); one pod security baseline for every pod.
import test from "ava";
import type { KubeObject, ObjectClient } from "../../../kube/objects.ts";
import type { Informer } from "../../../kube/informer.ts";
import { ReadYourWritesCache } from "../../../kube/read-your-writes.ts";
import { LIFECYCLE_EVENTS, recordLifecycle } from "../../../operator/kit/events.ts";
import { restrictedContainer, restrictedPod } from "../../../operator/kit/pod.ts";
import { applyStatusIfChanged, statusUnchanged } from "../../../operator/kit/status.ts";
import { statusEvents } from "../../../operator/app/status.ts";
import { domainEvents } from "../../../operator/domain/status.ts";

const stored = (status: unknown): KubeObject & { status?: unknown } => ({
  apiVersion: "berth.dev/v1alpha1",
  kind: "Release",
  metadata: { name: "web-1", namespace: "ns", resourceVersion: "5" },
  status,
});

function cacheWith(obj: KubeObject) {
  const writes: KubeObject[] = [];
  const client = {
    applyStatus: (_plural: string, o: KubeObject) => {
      writes.push(o);
      return Promise.resolve({ ...obj, ...o, metadata: { ...obj.metadata, resourceVersion: "6" } });
    },
  } as unknown as ObjectClient;
  const informer = { get: () => obj, list: () => [obj], on: () => () => undefined } as unknown as Informer<KubeObject>;
  return { writes, cache: new ReadYourWritesCache(client, "berth-operator").track("Release", informer) };
}

test("compare before apply: a status equal to the stored one (in any key order) is not written; one that differs is", async (t) => {
  const obj = stored({ phase: "succeeded", observedGeneration: 1, image: "r/x:1" });
  const { cache, writes } = cacheWith(obj);
  t.is(await applyStatusIfChanged(cache, "releases", obj, { image: "r/x:1", phase: "succeeded", observedGeneration: 1 }), undefined);
  t.is(writes.length, 0);
  const written = await applyStatusIfChanged(cache, "releases", obj, { image: "r/x:1", phase: "superseded", observedGeneration: 1 });
  t.is(writes.length, 1);
  t.deepEqual(writes[0], {
    apiVersion: "berth.dev/v1alpha1",
    kind: "Release",
    metadata: { name: "web-1", namespace: "ns" },
    status: { image: "r/x:1", phase: "superseded", observedGeneration: 1 },
  });
  t.is(written?.metadata.resourceVersion, "6");
});

test("statusUnchanged: no stored status equals an empty one; a field added, removed or changed is a change", (t) => {
  t.true(statusUnchanged(undefined, {}));
  t.true(statusUnchanged({ a: 1, b: [1, 2] }, { b: [1, 2], a: 1 }));
  t.false(statusUnchanged(undefined, { a: 1 }));
  t.false(statusUnchanged({ a: 1 }, { a: 1, b: 2 }));
  t.false(statusUnchanged({ a: 1, b: 2 }, { a: 1 }));
  t.false(statusUnchanged({ b: [1, 2] }, { b: [2, 1] }));
});

test("the Event policy: lifecycle steps only, failures as Warnings, nothing per child object", (t) => {
  for (const reason of ["Created", "Deleted", "Pruned", "Applied", "Updated"]) t.false(reason in LIFECYCLE_EVENTS, reason);
  t.deepEqual(
    Object.entries(LIFECYCLE_EVENTS)
      .filter(([, type]) => type === "Warning")
      .map(([reason]) => reason)
      .sort(),
    ["BuildFailed", "DeployFailed", "ReconcileError", "ReleaseFailed"],
  );
  const recorded: string[] = [];
  const recorder = { event: (_o: KubeObject, type: string, reason: string) => recorded.push(`${type}/${reason}`) };
  recordLifecycle(recorder, stored(undefined), "DeployFailed", "x");
  recordLifecycle(recorder, stored(undefined), "Deployed", "y");
  recordLifecycle(undefined, stored(undefined), "Deployed", "nobody listens");
  t.deepEqual(recorded, ["Warning/DeployFailed", "Normal/Deployed"]);
});

test("the Event policy: a status that does not change tells nothing; a condition's transition is told once", (t) => {
  const cond = (type: string, status: "True" | "False", reason: string, message = "m") => ({
    type,
    status,
    reason,
    message,
    lastTransitionTime: "2026-01-01T00:00:00Z",
  });
  const rolling = {
    phase: "deploying" as const,
    conditions: [cond("Deployed", "False", "RollingOut", "1/3"), cond("Ready", "False", "RollingOut")],
  };
  t.deepEqual(statusEvents(rolling, rolling), []);
  t.deepEqual(
    statusEvents(rolling, { ...rolling, conditions: [cond("Deployed", "False", "RollingOut", "2/3"), rolling.conditions[1]!] }),
    [],
  );
  t.deepEqual(
    statusEvents(rolling, {
      phase: "active",
      conditions: [cond("Deployed", "True", "RolloutComplete"), cond("Ready", "True", "Available")],
    }).map((e) => `${e.type}/${e.reason}`),
    ["Normal/RolloutComplete", "Normal/Available"],
  );
  const domain = { verified: true, conditions: [cond("Verified", "True", "Verified"), cond("Routed", "True", "Routed")] };
  t.deepEqual(domainEvents(domain, domain), []);
});

test("one pod security baseline: non-root, no token, no service links, RuntimeDefault seccomp, no escalation, no capabilities", (t) => {
  t.like(restrictedPod("Never", {}), {
    restartPolicy: "Never",
    automountServiceAccountToken: false,
    enableServiceLinks: false,
    securityContext: {
      runAsNonRoot: true,
      runAsUser: 10001,
      runAsGroup: 10001,
      fsGroup: 10001,
      seccompProfile: { type: "RuntimeDefault" },
    },
  });
  t.false("nodeSelector" in restrictedPod("Always", { nodeSelector: {} }), "an empty placement sets nothing");
  t.deepEqual(restrictedPod("Always", { nodeSelector: { a: "b" }, tolerations: [{ key: "t" }] }).tolerations, [{ key: "t" }]);
  t.deepEqual(restrictedContainer({ readOnlyRootFilesystem: true }), {
    allowPrivilegeEscalation: false,
    readOnlyRootFilesystem: true,
    runAsNonRoot: true,
    capabilities: { drop: ["ALL"] },
  });
});
