// An App's status as a pure function of what was observed. Written only when it changed;
// a condition's lastTransitionTime moves only when its status does.
import type * as k8s from "@kubernetes/client-node";
import type { AppSpec, AppStatus, Condition } from "../../crds/schemas.ts";
import { setConditions, type ConditionInput } from "../../kube/conditions.ts";
import { appUrl } from "../../crds/app.ts";
import { desiredReplicas, stableJson, type BuildConfig } from "./builders.ts";

export interface StatusInput {
  generation: number;
  spec: AppSpec | undefined;
  /** Why the spec could not be used (it passed the CRD schema but not the operator's checks). */
  invalid?: string | undefined;
  /** The Ready condition's reason when `invalid` is set; default InvalidSpec. */
  invalidReason?: string | undefined;
  old: AppStatus | undefined;
  /** The Deployment as last seen or as returned by this reconcile's apply. */
  deployment?: k8s.V1Deployment | undefined;
  cronJob?: k8s.V1CronJob | undefined;
  /** Identity of the current release: changes when the pod template changes. */
  deploymentId?: string | undefined;
  now: Date;
  cfg: BuildConfig;
  /** The GovernanceReady condition, when governance applies to this operator and App. */
  governance?: { ready: boolean; reason: string; message: string } | undefined;
}

type Rollout = "none" | "in_progress" | "succeeded" | "failed";

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

const cond = (type: string, ok: boolean | "Unknown", reason: string, message: string, generation: number): ConditionInput =>
  ({ type, status: ok === "Unknown" ? "Unknown" : ok ? "True" : "False", reason, message, observedGeneration: generation });

export function computeStatus(input: StatusInput): AppStatus {
  const status = computeWorkloadStatus(input);
  const g = input.governance;
  if (!g || !input.spec || input.invalid) return status;
  return { ...status, conditions: setConditions(status.conditions, [cond("GovernanceReady", g.ready, g.reason, g.message, input.generation)], input.now) };
}

function computeWorkloadStatus(input: StatusInput): AppStatus {
  const { spec, generation, old, now } = input;
  const prevConditions: Condition[] | undefined = old?.conditions;
  const base = { observedGeneration: generation };

  if (!spec || input.invalid) {
    const msg = input.invalid ?? "spec is invalid";
    return { ...base, phase: "failed", conditions: setConditions(prevConditions, [cond("Ready", false, input.invalidReason ?? "InvalidSpec", msg, generation)], now) };
  }

  const url = appUrl(spec, input.cfg.baseDomain);
  const source = spec.gitRepoUrl ? { status: "ok" } : { status: "none" };

  if (!spec.image) {
    const reason = spec.gitRepoUrl ? "WaitingForBuild" : "NoSource";
    const message = spec.gitRepoUrl
      ? "Waiting for a build of the Git repository; builds from Git are not available yet, so set spec.image to deploy a prebuilt image"
      : "Neither spec.image nor spec.gitRepoUrl is set: nothing to deploy";
    return {
      ...base, phase: spec.suspended ? "disabled" : "stopped", ...(url ? { url } : {}),
      conditions: setConditions(prevConditions, [
        cond("Built", false, reason, message, generation),
        cond("Deployed", false, reason, "Nothing has been deployed", generation),
        cond("Ready", false, reason, message, generation),
      ], now),
      pipeline: { source, build: { status: spec.gitRepoUrl ? "pending" : "none" }, deploy: { status: "none" }, runtime: { status: "stopped", readyReplicas: 0, totalReplicas: 0 } },
    };
  }

  const built = cond("Built", true, "PrebuiltImage", `Deploying prebuilt image ${spec.image}`, generation);
  const build = { status: "succeeded", buildpack: "prebuilt", imageTag: spec.image };

  if (spec.type === "cron") {
    const exists = !!input.cronJob;
    const phase = spec.suspended ? "disabled" : exists ? "active" : "deploying";
    const deployState = exists ? "succeeded" : "in_progress";
    return {
      ...base, phase,
      conditions: setConditions(prevConditions, [
        built,
        cond("Deployed", exists, exists ? "CronJobScheduled" : "Applying", exists ? `Scheduled ${spec.schedule ?? ""}` : "Creating the CronJob", generation),
        cond("Ready", exists && !spec.suspended, spec.suspended ? "Suspended" : exists ? "Scheduled" : "Applying", spec.suspended ? "The App is suspended" : exists ? "The CronJob is scheduled" : "Creating the CronJob", generation),
      ], now),
      latestDeployment: latestDeployment(input, deployState),
      pipeline: {
        source, build,
        deploy: { status: deployState, ...deployedAt(input, deployState), ...(input.deploymentId ? { revisionName: input.deploymentId } : {}) },
        runtime: { status: spec.suspended ? "stopped" : "scheduled", readyReplicas: 0, totalReplicas: 0 },
      },
    };
  }

  const want = desiredReplicas(spec, { deploymentReplicas: input.deployment?.spec?.replicas });
  const ready = input.deployment?.status?.readyReplicas ?? 0;
  const total = input.deployment?.status?.replicas ?? 0;
  const rollout = rolloutState(input.deployment);

  if (spec.suspended) {
    const stopped = total === 0;
    return {
      ...base, phase: "disabled",
      conditions: setConditions(prevConditions, [
        built,
        cond("Deployed", false, "Suspended", "The App is suspended: scaled to zero and removed from routing", generation),
        cond("Ready", false, "Suspended", stopped ? "The App is suspended" : "Scaling down", generation),
      ], now),
      ...(old?.latestDeployment ? { latestDeployment: old.latestDeployment } : {}),
      pipeline: { source, build, deploy: { status: "disabled" }, runtime: { status: "stopped", readyReplicas: ready, totalReplicas: total } },
    };
  }

  const healthy = rollout === "succeeded" && ready >= want;
  const phase = rollout === "failed" ? "failed" : healthy ? "active" : "deploying";
  const deployed = cond("Deployed", rollout === "succeeded", rollout === "succeeded" ? "RolloutComplete" : rollout === "failed" ? "ProgressDeadlineExceeded" : "RollingOut",
    rollout === "succeeded" ? "The latest release is rolled out" : rollout === "failed" ? "The rollout did not progress in time" : `Rolling out: ${ready}/${want} replicas ready`, generation);
  const readyCond = cond("Ready", healthy, healthy ? "Available" : rollout === "failed" ? "RolloutFailed" : "RollingOut",
    healthy ? `${ready}/${want} replicas ready` : `${ready}/${want} replicas ready`, generation);
  return {
    ...base, phase, ...(url ? { url } : {}),
    conditions: setConditions(prevConditions, [built, deployed, readyCond], now),
    latestDeployment: latestDeployment(input, rollout),
    pipeline: {
      source, build,
      deploy: { status: rollout, ...deployedAt(input, rollout), ...(input.deploymentId ? { revisionName: input.deploymentId } : {}) },
      runtime: { status: healthy ? "healthy" : ready > 0 ? "degraded" : "starting", readyReplicas: ready, totalReplicas: total },
    },
  };
}

function latestDeployment(input: StatusInput, state: Rollout): NonNullable<AppStatus["latestDeployment"]> {
  const id = input.deploymentId ?? "unknown";
  const prev = input.old?.latestDeployment;
  return {
    id,
    status: state,
    ...(input.spec?.image ? { image: input.spec.image } : {}),
    createdAt: prev && prev.id === id ? prev.createdAt : input.now.toISOString(),
  };
}

function deployedAt(input: StatusInput, state: Rollout): { deployedAt?: string } {
  if (state !== "succeeded") return {};
  const prev = input.old?.pipeline?.deploy;
  const same = prev?.revisionName === input.deploymentId && prev?.status === "succeeded" && prev.deployedAt;
  return { deployedAt: same ? prev.deployedAt! : input.now.toISOString() };
}

/** True when writing `next` would change nothing. */
export function statusEqual(a: AppStatus | undefined, b: AppStatus): boolean {
  return stableJson(a ?? {}) === stableJson(b);
}

/** Reasons of conditions whose message carries replica counts ("2/3 replicas ready"). */
const COUNTING_REASONS = new Set(["RollingOut", "Available"]);

/**
 * True when `next` differs from `prev` only in what moves with every pod: the replica counts of
 * `pipeline.runtime` and the messages of conditions that quote them. Such a write may wait a
 * little and go out with the next one; anything else (phase, a condition's status or reason,
 * generation, URL, deployment, pipeline states) is a transition and is written at once.
 */
export function onlyCountsChanged(prev: AppStatus | undefined, next: AppStatus): boolean {
  if (!prev) return false;
  const strip = (s: AppStatus) => ({
    ...s,
    conditions: s.conditions?.map((c) => (COUNTING_REASONS.has(c.reason) ? { ...c, message: "" } : c)),
    ...(s.pipeline ? { pipeline: { ...s.pipeline, ...(s.pipeline.runtime ? { runtime: { ...s.pipeline.runtime, readyReplicas: 0, totalReplicas: 0 } } : {}) } } : {}),
  });
  return stableJson(strip(prev)) === stableJson(strip(next));
}

export interface StatusWriteDecision {
  /** Write `next` now. */
  write: boolean;
  /** Since when a counts-only difference has been held back (carry it to the next decision). */
  pendingSince?: number;
  /** When held back: look again after this long, so the counts go out even if nothing else happens. */
  waitMs?: number;
}

/**
 * Whether `next` is written now: nothing when it equals `prev`; at once when anything but replica
 * counts changed; a counts-only change waits up to `delayMs` from when it was first seen
 * (`pendingSince`), so that the next transition, or the next few count changes, go out in one
 * write. Pure: the caller keeps `pendingSince` per object.
 */
export function decideStatusWrite(prev: AppStatus | undefined, next: AppStatus, pendingSince: number | undefined, now: number, delayMs: number): StatusWriteDecision {
  if (statusEqual(prev, next)) return { write: false };
  if (delayMs <= 0 || !onlyCountsChanged(prev, next)) return { write: true };
  const since = pendingSince ?? now;
  if (now - since >= delayMs) return { write: true };
  return { write: false, pendingSince: since, waitMs: since + delayMs - now };
}

/** Reasons that tell a user something is wrong and needs them: recorded as Warning Events. */
export const FAILURE_REASONS: ReadonlySet<string> = new Set(["InvalidSpec", "ObjectInTheWay", "ProvisioningFailed", "RolloutFailed", "ProgressDeadlineExceeded"]);

/** The conditions whose transitions are recorded as Events, in the order they are told. */
const EVENT_CONDITIONS = ["GovernanceReady", "Built", "Deployed", "Ready"] as const;

export interface StatusEvent { type: "Normal" | "Warning"; reason: string; message: string }

/**
 * The Events a status write tells (`kubectl describe app`): one per condition whose status or
 * reason changes, with the condition's reason and message; Warning for the failure reasons.
 * A prebuilt image is not a build worth telling; two conditions moving for the same reason
 * (Deployed and Ready both RollingOut) are told once. Pure.
 */
export function statusEvents(prev: AppStatus | undefined, next: AppStatus): StatusEvent[] {
  const out: StatusEvent[] = [];
  for (const type of EVENT_CONDITIONS) {
    const c = next.conditions?.find((x) => x.type === type);
    if (!c) continue;
    const was = prev?.conditions?.find((x) => x.type === type);
    if (was && was.status === c.status && was.reason === c.reason) continue;
    if (type === "Built" && c.reason === "PrebuiltImage") continue;
    if (out.some((e) => e.reason === c.reason)) continue;
    out.push({ type: FAILURE_REASONS.has(c.reason) ? "Warning" : "Normal", reason: c.reason, message: c.message });
  }
  return out;
}
