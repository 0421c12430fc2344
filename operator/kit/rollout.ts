// How an App's workload is rolling out, from what the caches show: the Deployment's progress
// (kubectl rollout status), its pods that cannot start or wait for a node. The App's status
// (Deployed, Ready, its phase) and the Release's phase when its rollout ends (succeeded, failed)
// are both read from here, so that they never disagree. Pure: no I/O; the clock is an argument.
import type * as k8s from "@kubernetes/client-node";
import type { AppSpec } from "../../crds/schemas.ts";
import type { KubeObject } from "../../kube/objects.ts";
import { CONTAINER } from "./pod.ts";

/**
 * Container states that no wait will fix: the release fails with them at once, naming the pod and
 * saying what to do, instead of waiting out the Deployment's progress deadline (10 minutes).
 */
const POD_FAILURES: Record<string, string> = {
  ErrImagePull: "the image cannot be pulled: check its name and tag, and that the registry has it and the cluster may pull from it",
  ImagePullBackOff: "the image cannot be pulled: check its name and tag, and that the registry has it and the cluster may pull from it",
  InvalidImageName: "the image reference is not valid",
  CrashLoopBackOff:
    "the container keeps exiting: read its logs (kubectl logs) and check the command, the port it listens on and its environment",
  CreateContainerConfigError: "the container's configuration is invalid (a missing Secret or environment variable)",
  CreateContainerError: "the container could not be created",
  RunContainerError: "the container could not be started: check the image's entrypoint",
};

/**
 * How long a container that has crashed (restarted at least twice) must run before it counts as
 * started rather than as crash-looping. Between back-offs a crashing container runs again (for a
 * worker without a readiness probe, running is ready), and without this hold the App's phase
 * would move between failed and deploying or active at every restart.
 */
export const CRASH_STABLE_MS = 60_000;

/**
 * Why the current release cannot start, from its pods: a pod running the App's image with a
 * container waiting in one of POD_FAILURES (a crash loop once it restarted), or, given `now`, a
 * container that crashed and has run again for less than CRASH_STABLE_MS: then `until` is when it
 * stops counting as crash-looping (the reconciler looks again then). Pure.
 */
export function podFailure(
  pods: readonly k8s.V1Pod[] | undefined,
  image: string,
  now?: Date,
): { reason: string; message: string; until?: Date } | undefined {
  for (const pod of pods ?? []) {
    if (pod.metadata?.deletionTimestamp) continue;
    for (const c of pod.status?.containerStatuses ?? []) {
      if (c.image !== image && pod.spec?.containers.find((x) => x.name === c.name)?.image !== image) continue;
      const waiting = c.state?.waiting;
      let reason = waiting?.reason;
      let detail = waiting?.message ? `: ${waiting.message}` : "";
      // Between back-offs a crashing container shows as terminated or briefly running, not waiting:
      // one that is not ready and has restarted twice is in a crash loop all the same.
      const exited = c.state?.terminated ?? c.lastState?.terminated;
      const crashed =
        exited && c.restartCount >= 2
          ? `: it exited with code ${exited.exitCode}${exited.reason ? ` (${exited.reason})` : ""} and was restarted ${c.restartCount} times`
          : undefined;
      let until: Date | undefined;
      if ((!reason || !(reason in POD_FAILURES)) && crashed) {
        const started = c.state?.running?.startedAt ? new Date(c.state.running.startedAt).getTime() : undefined;
        if (now && started !== undefined && now.getTime() - started < CRASH_STABLE_MS) {
          // running again, but not yet for long enough to count as started
          reason = "CrashLoopBackOff";
          detail = `${crashed}; it has been running again for ${Math.max(0, Math.round((now.getTime() - started) / 1000))} s`;
          until = new Date(started + CRASH_STABLE_MS);
        } else if (!c.ready) {
          reason = "CrashLoopBackOff";
          detail = crashed;
        }
      }
      if (!reason || !(reason in POD_FAILURES)) continue;
      if (reason === "CrashLoopBackOff" && c.restartCount < 1) continue;
      return {
        reason,
        message: `Pod ${pod.metadata?.name ?? ""} container ${c.name} is ${reason}${detail}. ${POD_FAILURES[reason]!}`,
        ...(until ? { until } : {}),
      };
    }
  }
  return undefined;
}

/**
 * Why the current release is still waiting, from its pods: a pod of the App's image that the
 * scheduler cannot place yet (no node has room for its requests, or none matches its placement).
 * Not a failure: room may come (a replaced pod finishing its grace period, a new node), and the
 * Deployment's progress deadline fails the release if it never does. Pure.
 */
export function podWaiting(pods: readonly k8s.V1Pod[] | undefined, image: string): { reason: string; message: string } | undefined {
  for (const pod of pods ?? []) {
    if (pod.metadata?.deletionTimestamp || pod.spec?.nodeName) continue;
    if (!pod.spec?.containers.some((c) => c.image === image)) continue;
    const scheduled = pod.status?.conditions?.find((c) => c.type === "PodScheduled");
    if (scheduled?.status !== "False" || scheduled.reason !== "Unschedulable") continue;
    return {
      reason: "Unschedulable",
      message: `Pod ${pod.metadata?.name ?? ""} is waiting for a node with room for it${scheduled.message ? `: ${scheduled.message}` : ""}`,
    };
  }
  return undefined;
}

export type Rollout = "none" | "in_progress" | "succeeded" | "failed";

/** kubectl rollout status, as a pure function. */
export function rolloutState(d: k8s.V1Deployment | undefined): Rollout {
  if (!d) return "in_progress";
  const s = d.status ?? {};
  const progressing = s.conditions?.find((c) => c.type === "Progressing");
  if (progressing?.status === "False" && progressing.reason === "ProgressDeadlineExceeded") return "failed";
  const want = d.spec?.replicas ?? 1;
  if ((s.observedGeneration ?? 0) < (d.metadata?.generation ?? 0)) return "in_progress";
  if ((s.updatedReplicas ?? 0) < want) return "in_progress";
  if ((s.replicas ?? 0) > (s.updatedReplicas ?? 0)) return "in_progress";
  if ((s.availableReplicas ?? 0) < (s.updatedReplicas ?? 0)) return "in_progress";
  return "succeeded";
}

/** The reasons of POD_FAILURES: a release whose pods show one fails at once. */
export const POD_FAILURE_REASONS: readonly string[] = Object.keys(POD_FAILURES);

/** The desired replica count: the HPA's current choice kept within [min, max]; 0 when suspended. */
export function desiredReplicas(spec: AppSpec, observed: { deploymentReplicas?: number | undefined }): number {
  if (spec.suspended) return 0;
  const max = spec.maxReplicas ?? spec.minReplicas;
  const current = observed.deploymentReplicas ?? spec.minReplicas;
  return Math.min(Math.max(current, spec.minReplicas), max);
}

/** Where a Deployment's rollout of `image` stands, with the counts and, when failed, why. */
export interface DeploymentRollout {
  /** The rollout as the App's Deployed condition tells it: a pod failure fails it at once. */
  state: Rollout;
  /** Rolled out and every wanted replica ready. */
  healthy: boolean;
  ready: number;
  total: number;
  want: number;
  /** Why it failed (meaningful when state is failed). */
  failure: { reason: string; message: string };
}

/**
 * A Deployment's rollout of `image`: kubectl rollout status, failed at once when its pods cannot
 * start (podFailure), not succeeded while a crashed container is held as crash-looping. Pure.
 */
export function deploymentRollout(
  spec: AppSpec,
  image: string,
  deployment: k8s.V1Deployment | undefined,
  pods: readonly k8s.V1Pod[] | undefined,
  now: Date,
): DeploymentRollout {
  const want = desiredReplicas(spec, { deploymentReplicas: deployment?.spec?.replicas });
  const ready = deployment?.status?.readyReplicas ?? 0;
  const total = deployment?.status?.replicas ?? 0;
  const rollout = rolloutState(deployment);
  // A release whose pods cannot start fails now, with their reason; one that did not progress in
  // time fails with the Deployment's.
  const crashing = podFailure(pods, image, now);
  const stuck = rollout === "succeeded" && ready >= want && !crashing?.until ? undefined : crashing;
  const state: Rollout = stuck ? "failed" : rollout;
  return {
    state,
    healthy: state === "succeeded" && ready >= want,
    ready,
    total,
    want,
    failure: stuck ?? { reason: "ProgressDeadlineExceeded", message: "The rollout did not progress in time" },
  };
}

/** The image of the App's container in a pod template. */
const imageOf = (template: k8s.V1PodTemplateSpec | undefined): string | undefined =>
  template?.spec?.containers.find((c) => c.name === CONTAINER)?.image;

export interface RolloutInput {
  spec: AppSpec;
  /** The image rolled out (the release's). */
  image: string;
  /** The App's Deployment and CronJob as cached; only those the App controls count. */
  deployment?: (k8s.V1Deployment & KubeObject) | undefined;
  cronJob?: (k8s.V1CronJob & KubeObject) | undefined;
  /** The App's pods. */
  pods?: readonly k8s.V1Pod[] | undefined;
  now: Date;
}

/**
 * How the rollout of `image` on the App's workload ended, exactly as the App's status tells it
 * (its Deployed condition and phase): ok when Deployed is True (a CronJob that exists, a
 * Deployment rolled out), failed with Deployed's reason and message when the App fails, undefined
 * while it runs, while the App is suspended (a Deployment) or while the workload does not run
 * `image` yet (the App controller has not applied it). Pure.
 */
export function rolloutOutcome(i: RolloutInput): { ok: true } | { ok: false; reason: string; message: string } | undefined {
  if (i.spec.type === "cron") {
    return i.cronJob && imageOf(i.cronJob.spec?.jobTemplate.spec?.template) === i.image ? { ok: true } : undefined;
  }
  if (i.spec.suspended || !i.deployment || imageOf(i.deployment.spec?.template) !== i.image) return undefined;
  const r = deploymentRollout(i.spec, i.image, i.deployment, i.pods, i.now);
  if (r.state === "succeeded") return { ok: true };
  if (r.state === "failed") return { ok: false, ...r.failure };
  return undefined;
}
