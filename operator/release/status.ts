// A Release's status: what each step makes of it, and writing it. The release controller is its
// only writer: it takes the build and release-command steps itself, and records how the rollout
// ended from the App's workload as its informers show it (the same reading as the App's Deployed
// condition, kit/rollout.ts).
import type * as k8s from "@kubernetes/client-node";
import { API_VERSION, AppSpec, type ReleaseStatus } from "../../crds/schemas.ts";
import { phaseOf, servingRelease } from "../../crds/release.ts";
import type { KubeObject } from "../../kube/objects.ts";
import type { ReadYourWritesCache } from "../../kube/read-your-writes.ts";
import type { LifecycleReason } from "../kit/events.ts";
import { controlledBy, type AppObject, type ReleaseObject } from "../kit/objects.ts";
import { rolloutOutcome } from "../kit/rollout.ts";
import { applyStatusIfChanged } from "../kit/status.ts";

/** A step of a release: the status change it makes and the Event that tells it. */
export interface ReleaseStep {
  change: Partial<ReleaseStatus>;
  reason: LifecycleReason;
  message: string;
}

/** The whole status with `change` merged in (server-side apply removes what the same manager leaves out). */
export function nextReleaseStatus(r: ReleaseObject, change: Partial<ReleaseStatus>): ReleaseStatus {
  return { ...r.status, ...change, observedGeneration: r.metadata.generation ?? 0 };
}

/**
 * Applies the release's whole status with `change` merged in, unless that is what is stored.
 * Returns the object written, or undefined when nothing was.
 */
export async function applyReleaseStatus(
  cache: ReadYourWritesCache,
  r: ReleaseObject,
  change: Partial<ReleaseStatus>,
): Promise<KubeObject | undefined> {
  return applyStatusIfChanged(cache, "releases", { ...r, apiVersion: API_VERSION, kind: "Release" }, nextReleaseStatus(r, change));
}

/** What the release controller reads of the App's workload for a rollout. */
export interface WorkloadView {
  app: AppObject;
  deployment?: (k8s.V1Deployment & KubeObject) | undefined;
  cronJob?: (k8s.V1CronJob & KubeObject) | undefined;
  /** The App's pods. */
  pods?: readonly k8s.V1Pod[] | undefined;
}

/**
 * How a deploying release's rollout ended, if it did: the serving release (crds/release.ts
 * servingRelease) of a Git App (a prebuilt spec.image runs no release) succeeds once the App's
 * workload runs its image and is rolled out, and fails when its pods cannot start or it does not
 * progress in time, with that reason; a failed release stops serving, so the App controller rolls
 * the previous one back in. Undefined while the rollout runs. Pure.
 */
export function rolloutStep(r: ReleaseObject, siblings: readonly ReleaseObject[], w: WorkloadView, now: Date): ReleaseStep | undefined {
  if (phaseOf(r) !== "deploying" || servingRelease(siblings)?.metadata.name !== r.metadata.name) return undefined;
  const image = r.status?.image;
  const spec = AppSpec.safeParse(w.app.spec);
  if (!image || !spec.success || spec.data.image) return undefined;
  const ours = <T extends KubeObject>(o: T | undefined) => (o && controlledBy(o, w.app) ? o : undefined);
  const outcome = rolloutOutcome({
    spec: spec.data,
    image,
    deployment: ours(w.deployment),
    cronJob: ours(w.cronJob),
    pods: w.pods,
    now,
  });
  if (!outcome) return undefined;
  const at = now.toISOString();
  if (outcome.ok) {
    return {
      change: { phase: "succeeded", deployedAt: at, finishedAt: at },
      reason: "Deployed",
      message: `Release ${r.metadata.name} serves ${image}`,
    };
  }
  return {
    change: { phase: "failed", finishedAt: at, failure: { step: "deploy", reason: outcome.reason, message: outcome.message } },
    reason: "DeployFailed",
    message: outcome.message,
  };
}

/** A succeeded release that another succeeded release now serves in place of: superseded. Pure. */
export function supersedeStep(r: ReleaseObject, serving: ReleaseObject | undefined): ReleaseStep | undefined {
  if (phaseOf(r) !== "succeeded" || !serving || serving.metadata.name === r.metadata.name || phaseOf(serving) !== "succeeded")
    return undefined;
  return { change: { phase: "superseded" }, reason: "Superseded", message: `Release ${serving.metadata.name} took over` };
}
