// An App's status as a pure function of what was observed. Written only when it changed;
// a condition's lastTransitionTime moves only when its status does.
import type * as k8s from "@kubernetes/client-node";
import type { AppSpec, AppStatus, Condition } from "../../crds/schemas.ts";
import { conditionTransitions, setConditions, type ConditionInput } from "../../kube/conditions.ts";
import { appUrl } from "../../crds/app.ts";
import { phaseOf } from "../../crds/release.ts";
import { stableJson } from "../kit/apply.ts";
import type { ReleaseObject } from "../kit/objects.ts";
import { deploymentRollout, POD_FAILURE_REASONS, podWaiting, type Rollout } from "../kit/rollout.ts";
import { statusUnchanged } from "../kit/status.ts";
import type { BuildConfig } from "./builders.ts";

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
  /** The App's pods as last seen (to tell a release that cannot start from one still starting). */
  pods?: readonly k8s.V1Pod[] | undefined;
  /**
   * Git Apps: the release whose image runs (its image is then spec.image here) and the newest
   * release, which may still be building or may have failed (crds/release.ts).
   */
  releases?: { serving?: ReleaseObject | undefined; newest?: ReleaseObject | undefined } | undefined;
}

const cond = (type: string, ok: boolean | "Unknown", reason: string, message: string, generation: number): ConditionInput => ({
  type,
  status: ok === "Unknown" ? "Unknown" : ok ? "True" : "False",
  reason,
  message,
  observedGeneration: generation,
});

export function computeStatus(input: StatusInput): AppStatus {
  const status = computeWorkloadStatus(input);
  const g = input.governance;
  if (!g || !input.spec || input.invalid) return status;
  return {
    ...status,
    conditions: setConditions(status.conditions, [cond("GovernanceReady", g.ready, g.reason, g.message, input.generation)], input.now),
  };
}

function computeWorkloadStatus(input: StatusInput): AppStatus {
  const { spec, generation, old, now } = input;
  const prevConditions: Condition[] | undefined = old?.conditions;
  const base = { observedGeneration: generation };

  if (!spec || input.invalid) {
    const msg = input.invalid ?? "spec is invalid";
    return {
      ...base,
      phase: "failed",
      conditions: setConditions(prevConditions, [cond("Ready", false, input.invalidReason ?? "InvalidSpec", msg, generation)], now),
    };
  }

  const url = appUrl(spec, input.cfg.baseDomain);
  const rel = releaseView(input);
  const source = spec.gitRepoUrl
    ? {
        status: "ok",
        ...(rel.commit?.sha ? { lastCommitSha: rel.commit.sha } : {}),
        ...(rel.commit?.message ? { lastCommitMessage: rel.commit.message } : {}),
      }
    : { status: "none" };

  if (!spec.image) {
    const pending = rel.newest ? RELEASE_BUILD[phaseOf(rel.newest)] : undefined;
    const reason = pending?.reason ?? (spec.gitRepoUrl ? "WaitingForBuild" : "NoSource");
    const message = pending
      ? `Release ${rel.newest!.metadata.name}: ${pending.message(rel.newest!)}`
      : spec.gitRepoUrl
        ? "Waiting for a deployment: push to the branch (with autoDeploy and the webhook) or POST .../deployments"
        : "Neither spec.image nor spec.gitRepoUrl is set: nothing to deploy";
    const phase = spec.suspended ? "disabled" : (pending?.phase ?? "stopped");
    return {
      ...base,
      phase,
      ...(url ? { url } : {}),
      conditions: setConditions(
        prevConditions,
        [
          cond("Built", false, reason, message, generation),
          cond("Deployed", false, reason, "Nothing has been deployed", generation),
          cond("Ready", false, reason, message, generation),
        ],
        now,
      ),
      ...(rel.latest ? { latestDeployment: rel.latest } : {}),
      pipeline: {
        source,
        build: rel.build ?? { status: spec.gitRepoUrl ? "pending" : "none" },
        deploy: { status: "none" },
        runtime: { status: "stopped", readyReplicas: 0, totalReplicas: 0 },
      },
    };
  }

  const serving = rel.serving;
  const built = serving
    ? cond(
        "Built",
        true,
        "Built",
        `Release ${serving.metadata.name} built ${spec.image}${serving.spec.git ? ` from ${serving.spec.git.commitSha.slice(0, 12)}` : ""}`,
        generation,
      )
    : cond("Built", true, "PrebuiltImage", `Deploying prebuilt image ${spec.image}`, generation);
  const build = rel.build ?? { status: "succeeded", buildpack: "prebuilt", imageTag: spec.image };

  if (spec.type === "cron") {
    const exists = !!input.cronJob;
    const phase = spec.suspended ? "disabled" : exists ? "active" : "deploying";
    const deployState = exists ? "succeeded" : "in_progress";
    return {
      ...base,
      phase,
      conditions: setConditions(
        prevConditions,
        [
          built,
          cond(
            "Deployed",
            exists,
            exists ? "CronJobScheduled" : "Applying",
            exists ? `Scheduled ${spec.schedule ?? ""}` : "Creating the CronJob",
            generation,
          ),
          cond(
            "Ready",
            exists && !spec.suspended,
            spec.suspended ? "Suspended" : exists ? "Scheduled" : "Applying",
            spec.suspended ? "The App is suspended" : exists ? "The CronJob is scheduled" : "Creating the CronJob",
            generation,
          ),
        ],
        now,
      ),
      latestDeployment: latestDeployment(input, deployState),
      pipeline: {
        source,
        build,
        deploy: {
          status: deployState,
          ...deployedAt(input, deployState),
          ...(input.deploymentId ? { revisionName: input.deploymentId } : {}),
        },
        runtime: { status: spec.suspended ? "stopped" : "scheduled", readyReplicas: 0, totalReplicas: 0 },
      },
    };
  }

  if (spec.suspended) {
    const ready = input.deployment?.status?.readyReplicas ?? 0;
    const total = input.deployment?.status?.replicas ?? 0;
    const stopped = total === 0;
    return {
      ...base,
      phase: "disabled",
      conditions: setConditions(
        prevConditions,
        [
          built,
          cond("Deployed", false, "Suspended", "The App is suspended: scaled to zero and removed from routing", generation),
          cond("Ready", false, "Suspended", stopped ? "The App is suspended" : "Scaling down", generation),
        ],
        now,
      ),
      ...(old?.latestDeployment ? { latestDeployment: old.latestDeployment } : {}),
      pipeline: {
        source,
        build,
        deploy: { status: "disabled" },
        runtime: { status: "stopped", readyReplicas: ready, totalReplicas: total },
      },
    };
  }

  // The same reading of the rollout as the release controller's when it records how a release's
  // rollout ended (kit/rollout.ts): a pod that cannot start fails it at once.
  const {
    state: rolloutNow,
    healthy,
    ready,
    total,
    want,
    failure,
  } = deploymentRollout(spec, spec.image, input.deployment, input.pods, now);
  // A newer release than the one serving: still on its way (deploying) or failed before it could serve.
  const ahead = rel.newest && rel.newest !== serving ? RELEASE_BUILD[phaseOf(rel.newest)]?.phase : undefined;
  const phase =
    rolloutNow === "failed"
      ? "failed"
      : ahead === "build_failed"
        ? "build_failed"
        : healthy && ahead !== "deploying"
          ? "active"
          : "deploying";
  // Still rolling out: say so, and why when the cluster refuses to create its pods (the
  // workspace's ResourceQuota, Pod Security admission: the Deployment's ReplicaFailure) or a pod
  // waits for the scheduler.
  const refused = input.deployment?.status?.conditions?.find((c) => c.type === "ReplicaFailure" && c.status === "True");
  const waiting =
    rolloutNow !== "in_progress"
      ? undefined
      : refused
        ? {
            reason: "PodsRefused",
            message: `The cluster refuses to create its pods: ${refused.message ?? refused.reason ?? "no reason given"}`,
          }
        : podWaiting(input.pods, spec.image);
  const rolling = waiting ? { reason: waiting.reason, note: `. ${waiting.message}` } : { reason: "RollingOut", note: "" };
  const deployed = cond(
    "Deployed",
    rolloutNow === "succeeded",
    rolloutNow === "succeeded" ? "RolloutComplete" : rolloutNow === "failed" ? failure.reason : rolling.reason,
    rolloutNow === "succeeded"
      ? "The latest release is rolled out"
      : rolloutNow === "failed"
        ? failure.message
        : `Rolling out: ${ready}/${want} replicas ready${rolling.note}`,
    generation,
  );
  const readyCond = cond(
    "Ready",
    healthy,
    healthy ? "Available" : rolloutNow === "failed" ? failure.reason : rolling.reason,
    rolloutNow === "failed" ? `${failure.message} (${ready}/${want} replicas ready)` : `${ready}/${want} replicas ready${rolling.note}`,
    generation,
  );
  return {
    ...base,
    phase,
    ...(url ? { url } : {}),
    conditions: setConditions(prevConditions, [built, deployed, readyCond], now),
    latestDeployment: rel.latest ?? latestDeployment(input, rolloutNow),
    pipeline: {
      source,
      build,
      deploy: { status: rolloutNow, ...deployedAt(input, rolloutNow), ...(input.deploymentId ? { revisionName: input.deploymentId } : {}) },
      runtime: { status: healthy ? "healthy" : ready > 0 ? "degraded" : "starting", readyReplicas: ready, totalReplicas: total },
    },
  };
}

/** How a release that does not serve yet shows on its App (phase, Built reason, message). */
const RELEASE_BUILD: Partial<
  Record<ReturnType<typeof phaseOf>, { phase: "deploying" | "build_failed"; reason: string; message: (r: ReleaseObject) => string }>
> = {
  queued: { phase: "deploying", reason: "BuildQueued", message: () => "queued" },
  building: { phase: "deploying", reason: "Building", message: (r) => `building commit ${r.spec.git?.commitSha.slice(0, 12) ?? ""}` },
  releasing: { phase: "deploying", reason: "Releasing", message: () => "running the release command" },
  deploying: { phase: "deploying", reason: "Deploying", message: () => "rolling out" },
  build_failed: {
    phase: "build_failed",
    reason: "BuildFailed",
    message: (r) => `the build failed: ${r.status?.failure?.reason ?? ""}: ${r.status?.failure?.message ?? ""}`,
  },
  release_failed: {
    phase: "build_failed",
    reason: "ReleaseFailed",
    message: (r) => `the release command failed: ${r.status?.failure?.message ?? ""}`,
  },
};

/** What an App's status says about its releases: latestDeployment, the build stage, the commit. Pure. */
function releaseView(input: StatusInput): {
  serving?: ReleaseObject;
  newest?: ReleaseObject;
  latest?: NonNullable<AppStatus["latestDeployment"]>;
  build?: NonNullable<AppStatus["pipeline"]>["build"];
  commit?: { sha: string; message?: string };
} {
  const serving = input.releases?.serving,
    newest = input.releases?.newest;
  if (!newest) return {};
  const message = (r: ReleaseObject) => r.spec.git?.commitMessage ?? r.status?.commitMessage;
  const withGit = [newest, serving].find((r) => r?.spec.git);
  const b = newest.status;
  const seconds =
    b?.buildStartedAt && b.buildFinishedAt
      ? Math.round((Date.parse(b.buildFinishedAt) - Date.parse(b.buildStartedAt)) / 100) / 10
      : undefined;
  const buildStatus: Record<string, string> = { queued: "pending", building: "building", build_failed: "failed", cancelled: "cancelled" };
  const phase = phaseOf(newest);
  return {
    ...(serving ? { serving } : {}),
    newest,
    latest: {
      id: newest.metadata.name!,
      status: phase,
      ...(newest.spec.git ? { gitCommitSha: newest.spec.git.commitSha } : {}),
      ...(message(newest) ? { gitCommitMessage: message(newest)! } : {}),
      ...(newest.status?.image ? { image: newest.status.image } : {}),
      createdAt: newest.metadata.creationTimestamp ? new Date(newest.metadata.creationTimestamp).toISOString() : input.now.toISOString(),
    },
    build: {
      status: buildStatus[phase] ?? (newest.spec.image ? "skipped" : "succeeded"),
      ...(b?.stack ? { buildpack: b.stack } : newest.spec.image ? { buildpack: "rollback" } : {}),
      ...(b?.image ? { imageTag: b.image } : {}),
      ...(seconds !== undefined ? { durationSeconds: seconds } : {}),
    },
    ...(withGit?.spec.git
      ? { commit: { sha: withGit.spec.git.commitSha, ...(message(withGit) ? { message: message(withGit)! } : {}) } }
      : {}),
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
  return statusUnchanged(a, b);
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
    ...(s.pipeline
      ? {
          pipeline: {
            ...s.pipeline,
            ...(s.pipeline.runtime ? { runtime: { ...s.pipeline.runtime, readyReplicas: 0, totalReplicas: 0 } } : {}),
          },
        }
      : {}),
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
export function decideStatusWrite(
  prev: AppStatus | undefined,
  next: AppStatus,
  pendingSince: number | undefined,
  now: number,
  delayMs: number,
): StatusWriteDecision {
  if (statusEqual(prev, next)) return { write: false };
  if (delayMs <= 0 || !onlyCountsChanged(prev, next)) return { write: true };
  const since = pendingSince ?? now;
  if (now - since >= delayMs) return { write: true };
  return { write: false, pendingSince: since, waitMs: since + delayMs - now };
}

/** Reasons that tell a user something is wrong and needs them: recorded as Warning Events. */
export const FAILURE_REASONS: ReadonlySet<string> = new Set([
  "InvalidSpec",
  "ObjectInTheWay",
  "HostTaken",
  "HostReserved",
  "ImageNotAllowed",
  "NotInAWorkspace",
  "PodsRefused",
  "ProvisioningFailed",
  "RolloutFailed",
  "ProgressDeadlineExceeded",
  "Unschedulable",
  ...POD_FAILURE_REASONS,
]);

/** The conditions whose transitions are recorded as Events, in the order they are told. */
const EVENT_CONDITIONS = ["GovernanceReady", "Built", "Deployed", "Ready"] as const;

export interface StatusEvent {
  type: "Normal" | "Warning";
  reason: string;
  message: string;
}

/**
 * The Events a status write tells (`kubectl describe app`): one per condition whose status or
 * reason changes, with the condition's reason and message; Warning for the failure reasons.
 * A prebuilt image is not a build worth telling; two conditions moving for the same reason
 * (Deployed and Ready both RollingOut) are told once. Pure.
 */
export function statusEvents(prev: AppStatus | undefined, next: AppStatus): StatusEvent[] {
  const out: StatusEvent[] = [];
  for (const { condition: c } of conditionTransitions(prev?.conditions, next.conditions, EVENT_CONDITIONS)) {
    if (c.type === "Built" && c.reason === "PrebuiltImage") continue;
    if (out.some((e) => e.reason === c.reason)) continue;
    out.push({ type: FAILURE_REASONS.has(c.reason) ? "Warning" : "Normal", reason: c.reason, message: c.message });
  }
  return out;
}
