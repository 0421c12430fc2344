// The Release reconciler (docs/deployments.md): queued -> building (a build Job) -> releasing (a
// release command Job) -> deploying -> succeeded (then superseded) or failed. It is the only writer
// of a Release's status: the App controller rolls the serving release out, and this controller
// records how that rollout ended, reading the App's workload from its informers (release/status.ts
// rolloutStep). Level-based: each reconcile reads the Release, its Jobs, their pods and the App's
// workload from the watch caches and takes the next step. Also keeps the App's history bounded
// (RELEASE_HISTORY).
import type * as k8s from "@kubernetes/client-node";
import { API_VERSION, APP_LABEL, AppSpec } from "../../crds/schemas.ts";
import {
  isFinal,
  jobName,
  overtaken,
  phaseOf,
  servingRelease,
  RELEASE_STEP_LABEL,
  RELEASE_LABEL,
  releaseRef,
  releasesToPrune,
} from "../../crds/release.ts";
import { OPERATOR_FIELD_MANAGER, type KubeObject } from "../../kube/objects.ts";
import { isConflict } from "../../kube/transport.ts";
import type { Informer } from "../../kube/informer.ts";
import type { EventRecorder } from "../../kube/events.ts";
import { ReadYourWritesCache, type WritingClient } from "../../kube/read-your-writes.ts";
import { groupOf, type Access } from "../../kube/rbac.ts";
import type { ReconcileContext, ReconcileResult, Reconciler, Request } from "../runtime/controller.ts";
import type { Metrics } from "../runtime/metrics.ts";
import { recordLifecycle } from "../kit/events.ts";
import type { AppObject, ReleaseObject } from "../kit/objects.ts";
import { governanceRefOf, type Placement } from "../kit/pod.ts";
import { childAccess, convergeChild } from "../kit/apply.ts";
import {
  BUILDKIT_CLIENT_KEYS,
  BUILDKIT_CLIENT_SECRET,
  buildJob,
  buildkitClientSecret,
  buildSlot,
  isBuildkitClientCopy,
  jobOutcome,
  parseBuildResult,
  releaseFailure,
  releaseJob,
  tail,
  terminated,
  type BuildSettings,
  type BuildkitTlsSettings,
} from "./builders.ts";
import type { BuildLogs } from "./build-log.ts";
import { applyReleaseStatus, nextReleaseStatus, rolloutStep, supersedeStep, type ReleaseStep } from "./status.ts";

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
  ...childAccess("batch", "jobs", "A release's build and release-command Jobs"),
  {
    group: "apps",
    resource: "deployments",
    verbs: ["list", "watch"],
    why: "The Release controller reads an App's Deployment (label-selected) to record how a release's rollout ended",
  },
  {
    group: "batch",
    resource: "cronjobs",
    verbs: ["list", "watch"],
    why: "The Release controller reads a cron App's CronJob (label-selected) to record that a release's schedule is in place",
  },
  {
    group: "",
    resource: "secrets",
    verbs: ["get"],
    names: [BUILDKIT_CLIENT_SECRET],
    scope: "release",
    why: "With mutual TLS to buildkitd (BERTH_BUILDKIT_TLS), the build Jobs' client certificate is read from its Secret in Berth's namespace before each build",
  },
  {
    group: "",
    resource: "secrets",
    verbs: ["get", "list", "watch", "create", "patch"],
    scope: "workspace",
    why: "With mutual TLS to buildkitd, the build Jobs' client certificate (Secret berth-buildkit-client) is copied into the namespace of each build (server-side apply; read after a refused create), where the build Job reads it by secretKeyRef; the copies are watched (label-selected) to apply only a changed one",
  },
  {
    group: "",
    resource: "pods/log",
    verbs: ["get"],
    scope: "workspace",
    why: "A running build pod's log is followed for the result its last line carries, before the kubelet reports the exit (BuildLogs)",
  },
];

export interface ReleaseReconcilerDeps {
  client: WritingClient;
  releases: Informer<ReleaseObject>;
  apps: Informer<AppObject>;
  jobs: Informer<KubeObject>;
  /** Berth's pods: the Jobs' (their outcome) and the Apps' (how a rollout ended). */
  pods: Informer<KubeObject>;
  /** The Apps' workloads, to record how a release's rollout ended. */
  deployments: Informer<KubeObject>;
  cronJobs: Informer<KubeObject>;
  /** Berth's Secrets (label-selected): the copies of the buildkitd client certificate; needed with build.tls. */
  secrets?: Informer<KubeObject> | undefined;
  /** Results read off running build pods' logs; without it, only the pods' exits tell. */
  buildLogs?: BuildLogs | undefined;
  /** Counts where build outcomes were read (berth_build_results_total). */
  metrics?: Pick<Metrics, "buildResults"> | undefined;
  /** Builds are off when absent: a release to build fails with BuildsNotConfigured. */
  build?: BuildSettings | undefined;
  /** Where the Jobs' pods run (the Apps' placement). */
  placement: Placement;
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
    if (deps.secrets) this.cache.track("Secret", deps.secrets);
    else if (deps.build?.tls) throw new Error("mutual TLS to buildkitd needs the Secrets informer");
  }

  /**
   * Prunes the App's history, then takes the release's next step by its phase: queued (start a
   * build, or deploy a rollback's image), building, releasing, deploying (record how the rollout
   * ended), succeeded (superseded once another serves). A release overtaken before it deploys is
   * cancelled.
   */
  async reconcile({ namespace, name }: Request, ctx: ReconcileContext): Promise<ReconcileResult | void> {
    const r = this.cache.get<ReleaseObject>("Release", namespace, name);
    if (!r || r.metadata.deletionTimestamp) {
      this.waiting.delete(`${namespace}/${name}`);
      return;
    }
    const siblings = this.deps.releases.list(namespace).filter((x) => x.spec?.appRef?.name === r.spec.appRef.name);
    await this.prune(namespace, siblings);
    const phase = phaseOf(r);
    if (isFinal(phase)) return;
    if (phase === "succeeded") return this.supersede(r, siblings, ctx);
    const app = this.deps.apps.get(namespace, r.spec.appRef.name);
    if (!app) return; // not in the cache yet (its watch brings it: releasesOfApp), or gone: its releases follow it (owner references)
    if (phase === "deploying") return this.rollout(r, siblings, app, ctx);
    if (overtaken(r, siblings)) {
      const now = this.deps.now().toISOString();
      await this.write(
        r,
        {
          change: { phase: "cancelled", finishedAt: now },
          reason: "Cancelled",
          message: "A newer release is already rolling out or serving",
        },
        ctx,
      );
      return;
    }
    if (phase === "queued") return this.queued(r, ctx);
    if (phase === "building") return this.building(r, app, ctx);
    if (phase === "releasing") return this.releasing(r, ctx);
  }

  /** A queued release: a rollback deploys its image; a build starts once the workspace has a slot. */
  private async queued(r: ReleaseObject, ctx: ReconcileContext): Promise<ReconcileResult | void> {
    const namespace = r.metadata.namespace!,
      name = r.metadata.name!;
    const now = this.deps.now().toISOString();
    if (r.spec.image) {
      await this.write(
        r,
        {
          change: { phase: "deploying", image: r.spec.image, deployStartedAt: now },
          reason: "Deploying",
          message: `Deploying ${r.spec.image} again (rollback of ${r.spec.rollbackOf ?? "an earlier release"})`,
        },
        ctx,
      );
      return;
    }
    const build = this.deps.build;
    if (!build) {
      await this.write(
        r,
        {
          change: {
            phase: "build_failed",
            finishedAt: now,
            failure: {
              step: "build",
              reason: "BuildsNotConfigured",
              message: "This installation has no builder configured (chart values builder.*): deploy a prebuilt image (spec.image) instead",
            },
          },
          reason: "BuildFailed",
          message: "Builds are not configured",
        },
        ctx,
      );
      return;
    }
    const slot = buildSlot(r, this.deps.releases.list(namespace), build.maxPerWorkspace);
    if (!slot.start) {
      const key = `${namespace}/${name}`;
      if (!this.waiting.has(key)) {
        this.waiting.add(key);
        recordLifecycle(
          this.deps.events,
          r,
          "BuildWaiting",
          `The workspace runs ${slot.running} builds, its most at once (${build.maxPerWorkspace}); this one starts when one ends (${slot.ahead} queued before it)`,
        );
      }
      return { requeueAfterMs: BUILD_SLOT_RECHECK_MS };
    }
    this.waiting.delete(`${namespace}/${name}`);
    if (!(await this.startBuild(r, build, ctx))) return;
    await this.write(
      r,
      {
        change: { phase: "building", buildStartedAt: now },
        reason: "Building",
        message: `Building commit ${r.spec.git!.commitSha.slice(0, 12)} of ${r.spec.git!.branch}`,
      },
      ctx,
    );
  }

  private async building(r: ReleaseObject, app: AppObject, ctx: ReconcileContext): Promise<void> {
    const job = this.cache.get<k8s.V1Job & KubeObject>("Job", r.metadata.namespace!, jobName(r.metadata.name!, "build"));
    if (!job) {
      if (this.deps.build) await this.startBuild(r, this.deps.build, ctx);
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
    let next: ReleaseStep;
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
      const built = {
        image: result.image,
        buildFinishedAt: now,
        ...(result.stack ? { stack: result.stack } : {}),
        ...(result.commitMessage ? { commitMessage: result.commitMessage.slice(0, 4096) } : {}),
      };
      if (r.spec.releaseCommand) {
        const spec = AppSpec.safeParse(app.spec);
        if (!spec.success) return; // the App controller reports the invalid spec; retried when it changes
        await this.ensureJob(
          releaseJob(r, spec.data, result.image, this.deps.placement, governanceRefOf(app), RELEASE_TIMEOUT_SECONDS) as KubeObject,
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
    await this.write(r, next, ctx);
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
        {
          change: { phase: "release_failed", releaseFinishedAt: now, finishedAt: now, failure },
          reason: "ReleaseFailed",
          message: message.slice(0, 1000),
        },
        ctx,
      );
      return;
    }
    await this.write(
      r,
      {
        change: { phase: "deploying", releaseFinishedAt: now, deployStartedAt: now },
        reason: "Deploying",
        message: "The release command succeeded; rolling out",
      },
      ctx,
    );
  }

  /**
   * A deploying release: the App controller rolls it out (it serves once deploying); how the
   * rollout ended is read off the App's workload (rolloutStep). Once it succeeded, the releases it
   * replaced are superseded at once.
   */
  private async rollout(r: ReleaseObject, siblings: readonly ReleaseObject[], app: AppObject, ctx: ReconcileContext): Promise<void> {
    const namespace = r.metadata.namespace!,
      appName = r.spec.appRef.name;
    const pods = this.deps.pods.list(namespace).filter((p) => p.metadata.labels?.[APP_LABEL] === appName) as k8s.V1Pod[];
    const step = rolloutStep(
      r,
      siblings,
      {
        app,
        deployment: this.deps.deployments.get(namespace, appName) as (k8s.V1Deployment & KubeObject) | undefined,
        cronJob: this.deps.cronJobs.get(namespace, appName) as (k8s.V1CronJob & KubeObject) | undefined,
        pods,
      },
      this.deps.now(),
    );
    if (!step) return;
    await this.write(r, step, ctx);
    if (step.change.phase !== "succeeded") return;
    await this.supersede({ ...r, status: nextReleaseStatus(r, step.change) }, siblings, ctx);
  }

  /** The succeeded releases that `serving` (when it is the serving, succeeded one) replaced: superseded. */
  private async supersede(serving: ReleaseObject, siblings: readonly ReleaseObject[], ctx: ReconcileContext): Promise<void> {
    const current = servingOf(serving, siblings);
    for (const s of siblings) {
      const latest = this.cache.get<ReleaseObject>("Release", s.metadata.namespace!, s.metadata.name!);
      const step = latest && supersedeStep(latest, current);
      if (step) await this.write(latest, step, ctx);
    }
  }

  /**
   * Creates the build Job, after the client certificate for buildkitd (with mutual TLS) is in the
   * release's namespace. When it cannot be, the release fails (BuilderTlsNotConfigured: a platform
   * problem the message says how to fix) and false is returned.
   */
  private async startBuild(r: ReleaseObject, build: BuildSettings, ctx: ReconcileContext): Promise<boolean> {
    if (build.tls && !this.cache.get("Job", r.metadata.namespace!, jobName(r.metadata.name!, "build"))) {
      const failure = await this.ensureBuildkitClient(r.metadata.namespace!, build.tls);
      if (failure) {
        const now = this.deps.now().toISOString();
        await this.write(
          r,
          {
            change: {
              phase: "build_failed",
              finishedAt: now,
              failure: { step: "build", reason: "BuilderTlsNotConfigured", message: failure },
            },
            reason: "BuildFailed",
            message: `BuilderTlsNotConfigured: ${failure}`.slice(0, 1000),
          },
          ctx,
        );
        return false;
      }
    }
    await this.ensureJob(buildJob(r, build, this.deps.placement) as KubeObject);
    return true;
  }

  /**
   * The namespace's copy of the client certificate's Secret, as the original in Berth's namespace
   * now is: applied only when it differs (the watch cache of Berth's Secrets tells), never over a
   * Secret of that name Berth did not write. Returns why it cannot be, or undefined. The Secret's
   * data is never logged.
   */
  private async ensureBuildkitClient(namespace: string, tls: BuildkitTlsSettings): Promise<string | undefined> {
    const where = `${tls.secretNamespace}/${BUILDKIT_CLIENT_SECRET}`;
    const original = await this.cache.fetch<KubeObject & { data?: Record<string, string> }>({
      apiVersion: "v1",
      kind: "Secret",
      namespace: tls.secretNamespace,
      name: BUILDKIT_CLIENT_SECRET,
    });
    const desired = buildkitClientSecret(namespace, original);
    if (!desired) {
      const lacking = Object.values(BUILDKIT_CLIENT_KEYS).filter((k) => !original?.data?.[k]);
      const what = original ? `has no ${lacking.join(", ")}` : "does not exist";
      return `Builds reach BuildKit over mutual TLS on this installation (chart value builder.tls.enabled), and the Secret ${where}, which holds their client certificate, ${what}: the platform's operator must provide it (docs/builds.md "mTLS"), then deploy again`;
    }
    if (namespace === tls.secretNamespace) return undefined; // the original itself is there
    const converged = await convergeChild(
      this.cache,
      desired,
      this.cache.get("Secret", namespace, BUILDKIT_CLIENT_SECRET),
      isBuildkitClientCopy,
    );
    if ("foreign" in converged)
      return `The namespace holds a Secret ${BUILDKIT_CLIENT_SECRET} that Berth did not write, where the build's client certificate for BuildKit goes: the platform's operator must remove or rename it, then deploy again`;
    return undefined;
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

  /**
   * Takes a step: writes the whole status (server-side apply: what this manager leaves out would
   * be removed) unless it is already stored, and tells the step as an Event when it was written.
   */
  private async write(r: ReleaseObject, step: ReleaseStep, ctx: ReconcileContext): Promise<void> {
    const written = await applyReleaseStatus(this.cache, r, step.change);
    if (!written) return;
    ctx.log.info({ release: r.metadata.name, from: phaseOf(r), to: step.change.phase }, "release phase changed");
    recordLifecycle(this.deps.events, written, step.reason, step.message);
  }
}

/**
 * The release that serves among `siblings`, with `r` as it now is (its own write may not be in
 * the informer's list yet).
 */
function servingOf(r: ReleaseObject, siblings: readonly ReleaseObject[]): ReleaseObject | undefined {
  const current = siblings.map((s) => (s.metadata.name === r.metadata.name ? r : s));
  return servingRelease(current);
}
