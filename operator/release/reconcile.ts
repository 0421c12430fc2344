// The Release reconciler (docs/deployments.md): queued -> building (a build Job) -> releasing (a
// release command Job) -> deploying. From deploying on the App controller rolls the release out and
// records how it ended (succeeded, failed, superseded). Level-based: each reconcile reads the
// Release, its Jobs and their pods from the watch caches and takes the next step. Also keeps the
// App's history bounded (RELEASE_HISTORY).
import type * as k8s from "@kubernetes/client-node";
import { API_VERSION, AppSpec, type ReleaseStatus } from "../../crds/schemas.ts";
import { governanceDisabled, governanceGeneration } from "../../crds/app.ts";
import {
  isFinal,
  jobName,
  overtaken,
  phaseOf,
  RELEASE_LABEL,
  RELEASE_STEP_LABEL,
  releaseRef,
  releasesToPrune,
} from "../../crds/release.ts";
import type { ReleaseObject } from "./builders.ts";
import { OPERATOR_FIELD_MANAGER, type KubeObject } from "../../kube/objects.ts";
import { isConflict } from "../../kube/transport.ts";
import type { Informer } from "../../kube/informer.ts";
import type { EventRecorder } from "../../kube/events.ts";
import { ReadYourWritesCache, type WritingClient } from "../../kube/read-your-writes.ts";
import type { ReconcileContext, ReconcileResult, Reconciler, Request } from "../runtime/controller.ts";
import { groupOf, type Access } from "../../kube/rbac.ts";
import { governanceSecretName, type BuildConfig, type GovernanceRef } from "../app/builders.ts";
import type { AppObject } from "../app/reconcile.ts";
import { applyReleaseStatus } from "./status.ts";
import {
  buildJob,
  buildSlot,
  jobOutcome,
  parseBuildResult,
  releaseFailure,
  releaseJob,
  tail,
  terminated,
  type BuildSettings,
} from "./builders.ts";
import type { BuildLogs } from "./build-log.ts";
import type { Metrics } from "../runtime/metrics.ts";

const BERTH = groupOf(API_VERSION);

export const RELEASE_CONTROLLER_ACCESS: Access[] = [
  {
    group: BERTH,
    resource: "releases",
    verbs: ["list", "watch"],
    why: "The Release controller watches Releases in every workspace namespace",
  },
  {
    group: BERTH,
    resource: "releases",
    verbs: ["delete"],
    why: "It deletes releases beyond the App's history (RELEASE_HISTORY), their Jobs and logs with them",
  },
  {
    group: BERTH,
    resource: "releases/status",
    verbs: ["patch"],
    why: "It records each step of a release in its status (server-side apply of the status subresource)",
  },
  {
    group: BERTH,
    resource: "releases/finalizers",
    verbs: ["update"],
    why: "A release's Jobs carry blockOwnerDeletion, which clusters with OwnerReferencesPermissionEnforcement allow only to who may update the owner's finalizers",
  },
  {
    group: "batch",
    resource: "jobs",
    verbs: ["get", "list", "watch", "create", "patch", "delete"],
    why: "A release's build and release-command Jobs are created, watched and read back",
  },
  {
    group: "",
    resource: "pods/log",
    verbs: ["get"],
    why: "A running build pod's log is followed for the result its last line carries, before the kubelet reports the exit (BuildLogs)",
  },
];

/** The Release a Job or a Job's pod belongs to (its berth.dev/release label). */
export function releaseOfObject(obj: KubeObject): Request[] {
  const r = obj.metadata.labels?.[RELEASE_LABEL];
  return r && obj.metadata.namespace ? [{ namespace: obj.metadata.namespace, name: r }] : [];
}

/**
 * The releases of an App, to wake the Release controller when the App appears or changes: a
 * release created right after its App may arrive before the App is in the cache.
 */
export function releasesOfApp(releases: Informer<ReleaseObject>): (app: KubeObject) => Request[] {
  return (app) =>
    app.metadata.namespace
      ? releases
          .list(app.metadata.namespace)
          .filter((r) => r.spec?.appRef?.name === app.metadata.name)
          .map((r) => ({ namespace: app.metadata.namespace!, name: r.metadata.name! }))
      : [];
}

/** The App of a Release (its appRef), to wake the App controller when a release moves. */
export function appOfRelease(obj: KubeObject): Request[] {
  const app = (obj as ReleaseObject).spec?.appRef?.name;
  return app && obj.metadata.namespace ? [{ namespace: obj.metadata.namespace, name: app }] : [];
}

export interface ReleaseReconcilerDeps {
  client: WritingClient;
  releases: Informer<ReleaseObject>;
  apps: Informer<AppObject>;
  jobs: Informer<KubeObject>;
  pods: Informer<KubeObject>;
  /** Results read off running build pods' logs; without it, only the pods' exits tell. */
  buildLogs?: BuildLogs | undefined;
  /** Counts where build outcomes were read (berth_build_results_total). */
  metrics?: Pick<Metrics, "buildResults"> | undefined;
  /** Builds are off when absent: a release to build fails with BuildsNotConfigured. */
  build?: BuildSettings | undefined;
  cfg: BuildConfig;
  now: () => Date;
  events?: EventRecorder | undefined;
}

/** Release command Jobs may run this long. */
const RELEASE_TIMEOUT_SECONDS = 15 * 60;

/** How often a release waiting for a build slot looks again (a build's end also wakes nothing here). */
const BUILD_SLOT_RECHECK_MS = 3_000;

export class ReleaseReconciler implements Reconciler {
  private readonly deps: ReleaseReconcilerDeps;
  private readonly cache: ReadYourWritesCache;
  /** Releases told to wait for a build slot (their Event is recorded once). */
  private readonly waiting = new Set<string>();

  constructor(deps: ReleaseReconcilerDeps) {
    this.deps = deps;
    this.cache = new ReadYourWritesCache(deps.client, OPERATOR_FIELD_MANAGER).track("Release", deps.releases).track("Job", deps.jobs);
  }

  async reconcile({ namespace, name }: Request, ctx: ReconcileContext): Promise<ReconcileResult | void> {
    const r = this.cache.get<ReleaseObject>("Release", namespace, name);
    if (!r || r.metadata.deletionTimestamp) {
      this.waiting.delete(`${namespace}/${name}`);
      return;
    }
    const siblings = this.deps.releases.list(namespace).filter((x) => x.spec?.appRef?.name === r.spec.appRef.name);
    await this.prune(namespace, siblings);
    const phase = phaseOf(r);
    if (isFinal(phase) || phase === "deploying" || phase === "succeeded") return;
    const app = this.deps.apps.get(namespace, r.spec.appRef.name);
    if (!app) return; // not in the cache yet (its watch brings it: releasesOfApp), or gone: its releases follow it (owner references)
    const now = this.deps.now().toISOString();

    if (overtaken(r, siblings)) {
      await this.write(r, { phase: "cancelled", finishedAt: now }, ctx, "Cancelled", "A newer release is already rolling out or serving");
      return;
    }
    if (phase === "queued") {
      if (r.spec.image) {
        await this.write(
          r,
          { phase: "deploying", image: r.spec.image, deployStartedAt: now },
          ctx,
          "Deploying",
          `Deploying ${r.spec.image} again (rollback of ${r.spec.rollbackOf ?? "an earlier release"})`,
        );
        return;
      }
      const build = this.deps.build;
      if (!build) {
        await this.write(
          r,
          {
            phase: "build_failed",
            finishedAt: now,
            failure: {
              step: "build",
              reason: "BuildsNotConfigured",
              message: "This installation has no builder configured (chart values builder.*): deploy a prebuilt image (spec.image) instead",
            },
          },
          ctx,
          "BuildFailed",
          "Builds are not configured",
        );
        return;
      }
      const slot = buildSlot(r, this.deps.releases.list(namespace), build.maxPerWorkspace);
      if (!slot.start) {
        const key = `${namespace}/${name}`;
        if (!this.waiting.has(key)) {
          this.waiting.add(key);
          this.deps.events?.event(
            r,
            "Normal",
            "BuildWaiting",
            `The workspace runs ${slot.running} builds, its most at once (${build.maxPerWorkspace}); this one starts when one ends (${slot.ahead} queued before it)`,
          );
        }
        return { requeueAfterMs: BUILD_SLOT_RECHECK_MS };
      }
      this.waiting.delete(`${namespace}/${name}`);
      await this.ensureJob(buildJob(r, build, this.deps.cfg) as KubeObject);
      await this.write(
        r,
        { phase: "building", buildStartedAt: now },
        ctx,
        "Building",
        `Building commit ${r.spec.git!.commitSha.slice(0, 12)} of ${r.spec.git!.branch}`,
      );
      return;
    }
    if (phase === "building") return this.building(r, app, ctx);
    if (phase === "releasing") return this.releasing(r, ctx);
  }

  private async building(r: ReleaseObject, app: AppObject, ctx: ReconcileContext): Promise<void> {
    const job = this.cache.get<k8s.V1Job & KubeObject>("Job", r.metadata.namespace!, jobName(r.metadata.name!, "build"));
    if (!job) {
      if (this.deps.build) await this.ensureJob(buildJob(r, this.deps.build, this.deps.cfg) as KubeObject);
      return;
    }
    const pods = this.stepPods(r, "build");
    const pod = pods.find((p) => terminated(p));
    const running = pods.find((p) => p.status?.containerStatuses?.[0]?.state?.running);
    let outcome = jobOutcome(job, pod);
    let result = parseBuildResult(terminated(pod)?.message);
    let source: "exit" | "log" = "exit";
    if (!outcome.done) {
      // The result may be on the log before the exit is reported (build-log.ts).
      const printed = running && this.deps.buildLogs?.result(running, { namespace: r.metadata.namespace!, name: r.metadata.name! });
      if (!printed) return;
      outcome = { done: true, ok: printed.ok };
      result = printed;
      source = "log";
    }
    const now = this.deps.now().toISOString();
    let next: { change: Partial<ReleaseStatus>; reason: string; message: string };
    if (!outcome.ok || !result?.ok) {
      const failure =
        result && !result.ok
          ? { step: result.step, reason: result.reason, message: result.message }
          : outcome.ok
            ? { step: "build", reason: "NoBuildResult", message: "The build finished without reporting an image" }
            : {
                step: "build",
                reason: outcome.reason === "DeadlineExceeded" ? "BuildTimeout" : (outcome.reason ?? "BuildFailed"),
                message: `${outcome.message ?? ""} ${tail(terminated(pod)?.message)}`.trim(),
              };
      next = {
        change: { phase: "build_failed", buildFinishedAt: now, finishedAt: now, failure },
        reason: "BuildFailed",
        message: `${failure.reason}: ${failure.message}`.slice(0, 1000),
      };
    } else {
      const built: Partial<ReleaseStatus> = {
        image: result.image,
        buildFinishedAt: now,
        ...(result.stack ? { stack: result.stack } : {}),
        ...(result.commitMessage ? { commitMessage: result.commitMessage.slice(0, 4096) } : {}),
      };
      if (r.spec.releaseCommand) {
        const spec = AppSpec.safeParse(app.spec);
        if (!spec.success) return; // the App controller reports the invalid spec; retried when it changes
        await this.ensureJob(
          releaseJob(r, spec.data, result.image, this.deps.cfg, governanceRefOf(app), RELEASE_TIMEOUT_SECONDS) as KubeObject,
        );
        next = {
          change: { ...built, phase: "releasing", releaseStartedAt: now },
          reason: "Releasing",
          message: `Built ${result.image}; running the release command`,
        };
      } else {
        next = {
          change: { ...built, phase: "deploying", deployStartedAt: now },
          reason: "Deploying",
          message: `Built ${result.image}; rolling it out`,
        };
      }
    }
    await this.write(r, next.change, ctx, next.reason, next.message);
    // Once the outcome is recorded (a failed write is retried with the result still kept): counted
    // once, and the log's stream, should it still be open, ended.
    this.deps.metrics?.buildResults.inc({ source });
    this.deps.buildLogs?.forget((running ?? pod)?.metadata?.uid);
  }

  private async releasing(r: ReleaseObject, ctx: ReconcileContext): Promise<void> {
    const job = this.cache.get<k8s.V1Job & KubeObject>("Job", r.metadata.namespace!, jobName(r.metadata.name!, "release"));
    if (!job) return; // created with the transition to releasing; the watch brings it
    const pod = this.jobPod(r, "release");
    const outcome = jobOutcome(job, pod);
    if (!outcome.done) return;
    const now = this.deps.now().toISOString();
    if (!outcome.ok) {
      const { reason, message } = releaseFailure(outcome, terminated(pod));
      const failure = { step: "release", reason, message };
      await this.write(
        r,
        { phase: "release_failed", releaseFinishedAt: now, finishedAt: now, failure },
        ctx,
        "ReleaseFailed",
        message.slice(0, 1000),
      );
      return;
    }
    await this.write(
      r,
      { phase: "deploying", releaseFinishedAt: now, deployStartedAt: now },
      ctx,
      "Deploying",
      "The release command succeeded; rolling out",
    );
  }

  private stepPods(r: ReleaseObject, step: "build" | "release"): k8s.V1Pod[] {
    return this.deps.pods
      .list(r.metadata.namespace)
      .filter((p) => p.metadata.labels?.[RELEASE_LABEL] === r.metadata.name && p.metadata.labels?.[RELEASE_STEP_LABEL] === step)
      .map((p) => p as k8s.V1Pod);
  }

  /** The Job's pod whose container has terminated. */
  private jobPod(r: ReleaseObject, step: "build" | "release"): k8s.V1Pod | undefined {
    return this.stepPods(r, step).find((p) => terminated(p));
  }

  private async ensureJob(job: KubeObject): Promise<void> {
    if (this.cache.get("Job", job.metadata.namespace!, job.metadata.name!)) return;
    try {
      await this.cache.applyNew(job);
    } catch (err) {
      if (!isConflict(err)) throw err; // already there: the cache lags behind
    }
  }

  /** Deletes what is beyond the App's history. */
  private async prune(namespace: string, siblings: readonly ReleaseObject[]): Promise<void> {
    for (const name of releasesToPrune(siblings)) {
      await this.cache.delete(
        releaseRef(namespace, name),
        siblings.find((s) => s.metadata.name === name)!,
      );
    }
  }

  /** Writes the whole status (server-side apply: what this manager leaves out would be removed). */
  private async write(
    r: ReleaseObject,
    change: Partial<ReleaseStatus>,
    ctx: ReconcileContext,
    reason: string,
    message: string,
  ): Promise<void> {
    const written = await applyReleaseStatus(this.cache, r, change);
    ctx.log.info({ release: r.metadata.name, from: phaseOf(r), to: change.phase }, "release phase changed");
    const warning = change.phase === "build_failed" || change.phase === "release_failed" || change.phase === "failed";
    this.deps.events?.event(written, warning ? "Warning" : "Normal", reason, message);
  }
}

/**
 * The App's governance Secret as the App controller keeps it: the release command runs with the
 * variables the pods get (the App controller provisions them once a build has an image; the
 * kubelet starts the container when the Secret exists).
 */
function governanceRefOf(app: AppObject): GovernanceRef | undefined {
  if (governanceDisabled(app.metadata.annotations)) return undefined;
  return { secretName: governanceSecretName(app.metadata.name!), generation: governanceGeneration(app.metadata.annotations) };
}
