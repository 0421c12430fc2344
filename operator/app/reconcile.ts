// The App reconciler: read the world from the watch caches, converge the children by server-side
// apply (skipping objects that already hold the desired state), delete children no longer wanted,
// and write status only when it changed. Level-based: no branch depends on which event fired.
import { createHash } from "node:crypto";
import type * as k8s from "@kubernetes/client-node";
import { API_VERSION, APP_LABEL, AppSpec, type AppStatus, type ReleaseStatus } from "../../crds/schemas.ts";
import { newestFirst, phaseOf, servingRelease } from "../../crds/release.ts";
import type { ReleaseObject } from "../release/builders.ts";
import { applyReleaseStatus } from "../release/status.ts";
import {
  ANNOTATIONS,
  GOVERNANCE_FINALIZER,
  appHost,
  envSecretName,
  foreignBuildImage,
  governanceDisabled,
  governanceGeneration,
  hostHolder,
  reservedHostReason,
} from "../../crds/app.ts";
import { OPERATOR_FIELD_MANAGER, ownedBy, type KubeObject, type ObjectRef } from "../../kube/objects.ts";
import { errorMessage, isConflict, isNotFound } from "../../kube/transport.ts";
import type { Informer } from "../../kube/informer.ts";
import type { EventRecorder } from "../../kube/events.ts";
import { ReadYourWritesCache, type WritingClient } from "../../kube/read-your-writes.ts";
import { keyOf, type ReconcileContext, type ReconcileResult, type Reconciler, type Request } from "../runtime/controller.ts";
import {
  buildChildren,
  buildGovernanceSecret,
  CHILD_KINDS,
  envHash,
  governanceSecretName,
  stableJson,
  upToDate,
  type BuildConfig,
  type ChildKind,
  type EnvRef,
  type GovernanceRef,
} from "./builders.ts";
import { GovernanceDisabledError, type GovernanceClient } from "./governance.ts";
import { computeStatus, decideStatusWrite, podFailure, statusEvents, type StatusInput } from "./status.ts";
import { groupOf, type Access } from "../../kube/rbac.ts";

export type AppObject = KubeObject & { spec: unknown; status?: AppStatus };

const BERTH = groupOf(API_VERSION);
const CHILD_VERBS = ["get", "list", "watch", "create", "patch", "delete"] as const;

/**
 * What the App controller does in the cluster (RBAC from code, see operator/rbac.ts): the calls
 * of this file and of the informers main.ts gives it. Children and Secrets: watched
 * (label-selected), read after a refused create, created and changed by server-side apply (an
 * apply that creates needs create as well as patch), deleted when no longer wanted.
 */
export const APP_CONTROLLER_ACCESS: Access[] = [
  { group: BERTH, resource: "apps", verbs: ["list", "watch"], why: "The App controller watches Apps in every workspace namespace" },
  {
    group: BERTH,
    resource: "apps",
    verbs: ["patch"],
    why: "It adds and removes its finalizer berth.dev/governance (a merge patch of metadata.finalizers; the spec belongs to users and the API)",
  },
  { group: BERTH, resource: "apps/status", verbs: ["patch"], why: "It writes App status by server-side apply of the status subresource" },
  {
    group: BERTH,
    resource: "apps/finalizers",
    verbs: ["update"],
    why: "Children carry blockOwnerDeletion, which clusters with OwnerReferencesPermissionEnforcement allow only to who may update the owner's finalizers",
  },
  ...Object.entries(CHILD_KINDS).map(([kind, c]): Access => ({
    group: groupOf(c.apiVersion),
    resource: c.plural,
    verbs: CHILD_VERBS,
    why: `An App's ${kind} is watched, applied and pruned`,
  })),
  {
    group: "",
    resource: "secrets",
    verbs: CHILD_VERBS,
    why: "The <app>-governance Secret (GOVDB_CONNECTION, GOVERNANCE_PROJECT), and the <app>-env Secret the API writes, watched to roll the pods when it changes; RBAC cannot narrow list and watch by name or label: the most sensitive grant",
  },
  {
    group: "",
    resource: "pods",
    verbs: ["list", "watch"],
    why: "An App's pods are watched (label-selected) to report a release that cannot start (image pull, crash loop) with its reason",
  },
];

/**
 * The child kinds whose status the App's status is computed from (the workload's rollout and
 * schedule): every update of them may change it. Of the other children (Service, Ingress, HPA,
 * Middleware) only what the App wrote matters, so an update of their status alone is filtered
 * (specChanged); an HPA alone rewrites its status every 15 s.
 */
export const CHILD_STATUS_READ: ReadonlySet<ChildKind> = new Set<ChildKind>(["Deployment", "CronJob"]);

/**
 * The other Apps with an App's slug, for the controller's App watch: when one is created, changed
 * or deleted, the holder of their host may change.
 */
export function sameSlugApps(apps: Informer<AppObject>): (app: KubeObject) => Request[] {
  return (app) => {
    const slug = (app as AppObject & { spec?: { slug?: unknown } }).spec?.slug;
    if (typeof slug !== "string") return [];
    return apps
      .list()
      .filter((a) => a.metadata.uid !== app.metadata.uid && (a.spec as { slug?: unknown } | undefined)?.slug === slug)
      .map((a) => ({ namespace: a.metadata.namespace!, name: a.metadata.name! }));
  };
}

/** The App a pod belongs to (its berth.dev/app label), for the controller's pod watch. */
export function appOfPod(pod: KubeObject): Request[] {
  const app = pod.metadata.labels?.[APP_LABEL];
  return app && pod.metadata.namespace ? [{ namespace: pod.metadata.namespace, name: app }] : [];
}

export interface AppReconcilerDeps {
  client: WritingClient;
  apps: Informer<AppObject>;
  /** One informer per child kind this configuration manages (builders.childKinds). */
  children: Partial<Record<ChildKind, Informer<KubeObject>>> & Record<Exclude<ChildKind, "Middleware">, Informer<KubeObject>>;
  /** Berth's Secrets: the `<app>-governance` ones the operator writes and the `<app>-env` ones the API writes. */
  secrets: Informer<KubeObject>;
  /** The Apps' pods (labelled as Berth's): a release whose pods cannot start fails with their reason. */
  pods?: Informer<KubeObject> | undefined;
  /** Absent when no API is configured: Apps then run without governance. */
  governance?: GovernanceClient | undefined;
  /** Releases (builds from Git, rollbacks): a Git App runs its serving release's image. */
  releases?: Informer<ReleaseObject> | undefined;
  cfg: BuildConfig;
  now: () => Date;
  /** Events on Apps (kubectl describe); none are recorded when absent. */
  events?: EventRecorder | undefined;
  /**
   * How long a status change that only moves replica counts may wait for the next transition,
   * so that several child updates make one write (see onlyCountsChanged). Default 5 s; 0 writes
   * every change at once.
   */
  countsDelayMs?: number;
}

type GovernanceState = { ref?: GovernanceRef; condition?: { ready: boolean; reason: string; message: string } };

/** Children that name another child: created only once that one is known to be the App's own. */
const REFERS_TO_A_SIBLING = new Set(["HorizontalPodAutoscaler", "Ingress"]);

const DEFAULT_COUNTS_DELAY_MS = 5_000;

const after = (ms: number | undefined): ReconcileResult | undefined => (ms ? { requeueAfterMs: ms } : undefined);
/** After a crash-loop hold ends, how much later to look (the clock of the pod's startedAt is the kubelet's). */
const CRASH_RECHECK_MARGIN_MS = 500;

/** Whether the App controls `obj` (its controlling ownerReference). */
const controlledBy = (obj: KubeObject, app: AppObject): boolean => ownedBy(obj, app, { controller: true });

/** Identity of a release: a hash of what runs (the pod template), not of the replica count. */
export function deploymentIdOf(name: string, children: KubeObject[]): string | undefined {
  const workload = children.find((c) => c.kind === "Deployment" || c.kind === "CronJob") as (k8s.V1Deployment | k8s.V1CronJob) | undefined;
  if (!workload) return undefined;
  const template =
    workload.kind === "CronJob" ? (workload as k8s.V1CronJob).spec?.jobTemplate : (workload as k8s.V1Deployment).spec?.template;
  return `${name}-${createHash("sha256").update(stableJson(template)).digest("hex").slice(0, 10)}`;
}

/** What the steps of one reconcile share: the App as observed at its start and its parsed spec. */
interface Observed {
  app: AppObject;
  spec: AppSpec;
  generation: number;
  deployment: k8s.V1Deployment | undefined;
  cronJob: k8s.V1CronJob | undefined;
}

export class AppReconciler implements Reconciler {
  private readonly deps: AppReconcilerDeps;
  /** Reads from the watch caches and writes to the API server, reading this reconciler's own writes. */
  private readonly cache: ReadYourWritesCache;
  /** Since when an App's status has differed from the written one by counts only (key → ms). */
  private readonly countsPendingSince = new Map<string, number>();

  constructor(deps: AppReconcilerDeps) {
    this.deps = deps;
    this.cache = new ReadYourWritesCache(deps.client, OPERATOR_FIELD_MANAGER).track("App", deps.apps).track("Secret", deps.secrets);
    if (deps.releases) this.cache.track("Release", deps.releases);
    // The kinds this configuration manages (a Middleware only where Traefik guards private Apps).
    for (const [kind, informer] of Object.entries(deps.children)) this.cache.track(kind, informer);
  }

  /**
   * Read the world, converge, report, in steps: observe the App; governance (the container must
   * start with both variables already set); children; prune what is no longer wanted; status.
   */
  async reconcile({ namespace, name }: Request, ctx: ReconcileContext): Promise<ReconcileResult | void> {
    const app = this.cache.get<AppObject>("App", namespace, name);
    if (!app) {
      this.countsPendingSince.delete(keyOf({ namespace, name }));
      return;
    }
    if (app.metadata.deletionTimestamp) {
      await this.finalize(app, ctx);
      return;
    } // children go with it (owner references)
    const generation = app.metadata.generation ?? 0;
    const parsed = AppSpec.safeParse(app.spec);
    if (!parsed.success) {
      const invalid = parsed.error.issues.map((i) => `spec.${i.path.join(".")}: ${i.message}`).join("; ");
      return after(await this.writeStatus(app, this.status(app, { generation, spec: undefined, invalid }), ctx));
    }
    const o: Observed = {
      app,
      spec: parsed.data,
      generation,
      deployment: this.cache.get<k8s.V1Deployment & KubeObject>("Deployment", namespace, name),
      cronJob: this.cache.get<k8s.V1CronJob & KubeObject>("CronJob", namespace, name),
    };
    try {
      return await this.converge(o, ctx);
    } catch (err) {
      this.deps.events?.event(app, "Warning", "ReconcileError", errorMessage(err));
      throw err;
    }
  }

  private async converge(o: Observed, ctx: ReconcileContext): Promise<ReconcileResult | undefined> {
    const { app, generation } = o;
    const namespace = app.metadata.namespace!,
      name = app.metadata.name!,
      uid = app.metadata.uid!;
    // a prebuilt image that is another namespace's build never runs here (what runs stays as it was)
    const foreign =
      o.spec.image && this.deps.cfg.buildArea ? foreignBuildImage(o.spec.image, namespace, this.deps.cfg.buildArea) : undefined;
    if (foreign)
      return after(
        await this.writeStatus(
          app,
          this.status(app, { generation, spec: undefined, invalid: foreign, invalidReason: "ImageNotAllowed" }),
          ctx,
        ),
      );
    const host = this.hostRefusal(app, o.spec);
    if (host) {
      // Never routed: an Ingress it may have had (before an older App with its host was seen) goes;
      // what runs stays as it was until the App has a host of its own.
      await this.prune(app, new Set((Object.keys(CHILD_KINDS) as ChildKind[]).filter((k) => k !== "Ingress" && k !== "Middleware")));
      return after(
        await this.writeStatus(
          app,
          this.status(app, { generation, spec: undefined, invalid: host.message, invalidReason: host.reason }),
          ctx,
        ),
      );
    }
    // A Git App runs the image of its serving release; a prebuilt spec.image always wins.
    const releases = newestFirst((this.deps.releases?.list(namespace) ?? []).filter((r) => r.spec?.appRef?.name === name));
    const serving = o.spec.image ? undefined : servingRelease(releases);
    const spec: AppSpec = serving ? { ...o.spec, image: serving.status!.image! } : o.spec;
    const releaseView = { serving, newest: o.spec.image ? undefined : releases[0] };
    // The deployment event (docs/spec.md part 6): governance is provisioned once there is an image to run,
    // before the release command and the first pod start.
    const deploys = !!spec.image || (!o.spec.image && releases.some((r) => !!r.status?.image));

    let gov: GovernanceState;
    try {
      gov = await this.governance(app, deploys, ctx);
    } catch (err) {
      // First rollout: nothing starts without governance. Already running: the current Secret and
      // workload stay as they are. Either way the failure is reported and retried with backoff.
      const failed = { ready: false, reason: "ProvisioningFailed", message: errorMessage(err) };
      await this.writeStatus(
        app,
        this.status(app, { generation, spec, deployment: o.deployment, cronJob: o.cronJob, governance: failed }),
        ctx,
      );
      throw err;
    }

    const desired = buildChildren(
      { name, namespace, uid },
      spec,
      { deploymentReplicas: o.deployment?.spec?.replicas },
      this.deps.cfg,
      gov.ref,
      this.env(app),
    );
    const children = await this.children(app, desired, ctx);
    if ("foreign" in children) {
      const invalid = `${children.foreign} ${namespace}/${name} already exists and is not owned by this App`;
      return after(
        await this.writeStatus(app, this.status(app, { generation, spec: undefined, invalid, invalidReason: "ObjectInTheWay" }), ctx),
      );
    }
    let { deployment, cronJob } = o;
    for (const c of children.converged) {
      if (c.kind === "Deployment") deployment = c as k8s.V1Deployment;
      if (c.kind === "CronJob") cronJob = c as k8s.V1CronJob;
    }

    const pruned = await this.prune(app, new Set(desired.map((d) => d.kind as ChildKind)));
    if (pruned.has("Deployment")) deployment = undefined;
    if (pruned.has("CronJob")) cronJob = undefined;

    const pods = this.deps.pods?.list(namespace).filter((p) => p.metadata.labels?.[APP_LABEL] === name) as k8s.V1Pod[] | undefined;
    const now = this.deps.now();
    const status = this.status(
      app,
      {
        generation,
        spec,
        deployment,
        cronJob,
        pods,
        deploymentId: deploymentIdOf(name, desired),
        governance: gov.condition,
        releases: releaseView,
      },
      now,
    );
    const wait = await this.writeStatus(app, status, ctx);
    if (serving) await this.recordRollout(serving, releases, status, ctx);
    // No timed recheck while a rollout is under way: every input of the status (the Deployment's
    // conditions, its pods, the releases) is watched, and the controller's resync is the safety net.
    // One exception: a container that crashed and runs again counts as crash-looping until it has
    // run for CRASH_STABLE_MS, and nothing is observed when that time passes: look again then.
    // (the same `now` as the status's, so that both see the same side of the minute)
    const held = spec.image ? podFailure(pods, spec.image, now)?.until : undefined;
    const recheck = held ? Math.max(1, held.getTime() - now.getTime() + CRASH_RECHECK_MARGIN_MS) : undefined;
    return after(wait === undefined ? recheck : recheck === undefined ? wait : Math.min(wait, recheck));
  }

  /**
   * Why the App may not have its host <slug>.<baseDomain>: reserved by the platform, or held by
   * an App created before it (in any namespace this operator watches). Every App holds its host,
   * served or not (crds/app.ts "Hosts").
   */
  private hostRefusal(app: AppObject, spec: AppSpec): { reason: "HostReserved" | "HostTaken"; message: string } | undefined {
    const { cfg } = this.deps;
    const reserved = reservedHostReason(spec.slug, {
      baseDomain: cfg.baseDomain,
      reservedSlugs: cfg.reservedSlugs ?? [],
      platformHosts: cfg.platformHosts ?? [],
    });
    if (reserved) return { reason: "HostReserved", message: reserved };
    const holder = hostHolder([...this.deps.apps.list(), app], spec.slug);
    if (holder && holder.metadata.uid !== app.metadata.uid) {
      return {
        reason: "HostTaken",
        message: `${appHost(spec, cfg.baseDomain)} is held by an App created before this one (a host belongs to one App in the whole platform): change spec.slug`,
      };
    }
    return undefined;
  }

  /**
   * How the serving release's rollout ended, on the release: succeeded (and the one it replaced
   * superseded) once the App is Deployed with it, failed when its pods cannot start; a failed
   * release stops serving, so the previous one rolls back in on the next reconcile.
   */
  private async recordRollout(
    serving: ReleaseObject,
    releases: readonly ReleaseObject[],
    status: AppStatus,
    ctx: ReconcileContext,
  ): Promise<void> {
    const now = this.deps.now().toISOString();
    const deployed = status.conditions?.find((c) => c.type === "Deployed");
    if (phaseOf(serving) === "deploying") {
      if (deployed?.status === "True") {
        await this.writeRelease(
          serving,
          { phase: "succeeded", deployedAt: now, finishedAt: now },
          "Deployed",
          `Release ${serving.metadata.name} serves ${serving.status?.image ?? ""}`,
          ctx,
        );
      } else if (status.phase === "failed" && deployed?.status === "False") {
        await this.writeRelease(
          serving,
          { phase: "failed", finishedAt: now, failure: { step: "deploy", reason: deployed.reason, message: deployed.message } },
          "DeployFailed",
          deployed.message,
          ctx,
        );
        return;
      } else return;
    }
    for (const r of releases) {
      if (r !== serving && phaseOf(r) === "succeeded")
        await this.writeRelease(r, { phase: "superseded" }, "Superseded", `Release ${serving.metadata.name} took over`, ctx);
    }
  }

  private async writeRelease(
    r: ReleaseObject,
    change: Partial<ReleaseStatus>,
    reason: string,
    message: string,
    ctx: ReconcileContext,
  ): Promise<void> {
    const written = await applyReleaseStatus(this.cache, r, change);
    ctx.log.info({ release: r.metadata.name, from: phaseOf(r), to: change.phase }, "release phase changed");
    this.deps.events?.event(written, change.phase === "failed" ? "Warning" : "Normal", reason, message);
  }

  /**
   * Converges the App's children. A same-named object that this App does not own is never taken
   * over. The caches hold only objects labelled as ours: a child they hold is applied when it
   * differs from the desired state; one they lack is created by a create-only apply, which the API
   * server refuses with 409 when anything of that name exists, and only then is the object read to
   * tell a cache that lags behind (ours) from a foreign object. What refers to another child by
   * name (the HPA to the Deployment, the Ingress to the Service) is created only once that child
   * is known to be ours; otherwise children are independent and converge in parallel.
   */
  private async children(
    app: AppObject,
    desired: KubeObject[],
    ctx: ReconcileContext,
  ): Promise<{ converged: KubeObject[] } | { foreign: string }> {
    const live = (kind: string) => this.cache.get(kind, app.metadata.namespace!, app.metadata.name!);
    const cached = desired.map((d) => live(d.kind!));
    const inTheWay = desired.find((_, i) => cached[i] && !controlledBy(cached[i], app));
    if (inTheWay) return { foreign: inTheWay.kind! };
    const all = desired.map((_, i) => i);
    const refers = (i: number) => REFERS_TO_A_SIBLING.has(desired[i]!.kind!);
    const independent = all.filter((i) => !refers(i));
    const waves = independent.every((i) => cached[i]) ? [all] : [independent, all.filter(refers)];
    const converged: KubeObject[] = [];
    for (const wave of waves) {
      const results = await Promise.all(wave.map((i) => this.convergeChild(app, desired[i]!, cached[i], ctx)));
      const foreign = results.findIndex((r) => r.foreign);
      if (foreign >= 0) return { foreign: desired[wave[foreign]!]!.kind! };
      for (const r of results) converged.push(r.live!);
    }
    return { converged };
  }

  /**
   * Converges one child: the cached object is applied only when it differs; a child the cache
   * does not hold is created, never adopted (see children). Returns the object as it now is, or
   * the foreign object that is in the way.
   */
  private async convergeChild(
    app: AppObject,
    desired: KubeObject,
    cached: KubeObject | undefined,
    ctx: ReconcileContext,
  ): Promise<{ live?: KubeObject; foreign?: KubeObject }> {
    const kind = desired.kind!;
    if (cached) return { live: upToDate(desired, cached) ? cached : await this.cache.apply(desired) };
    try {
      const created = await this.cache.applyNew(desired);
      ctx.log.debug({ kind }, "created");
      this.deps.events?.event(app, "Normal", "Created", `Created ${kind} ${desired.metadata.name}`);
      return { live: created };
    } catch (err) {
      if (!isConflict(err)) throw err;
      const existing = await this.cache.fetch<KubeObject>(refOf(desired));
      if (!existing) throw err; // deleted in between: retried with backoff
      if (!controlledBy(existing, app)) return { foreign: existing };
      return { live: upToDate(desired, existing) ? existing : await this.cache.apply(desired) };
    }
  }

  /** Deletes the App's children of the kinds it no longer wants; returns the kinds deleted. */
  private async prune(app: AppObject, wanted: ReadonlySet<ChildKind>): Promise<Set<ChildKind>> {
    const namespace = app.metadata.namespace!,
      name = app.metadata.name!;
    const pruned = new Set<ChildKind>();
    for (const kind of Object.keys(this.deps.children) as ChildKind[]) {
      const obj = this.cache.get(kind, namespace, name);
      if (wanted.has(kind) || !obj || !controlledBy(obj, app)) continue;
      await this.cache.delete({ apiVersion: CHILD_KINDS[kind].apiVersion, kind, namespace, name }, obj);
      this.deps.events?.event(app, "Normal", "Deleted", `Deleted ${kind} ${name}: the App no longer needs it`);
      pruned.add(kind);
    }
    return pruned;
  }

  /**
   * Makes sure the App's governance Secret holds a key of the wanted generation (asking the API to
   * provision when it does not), or that there is none when governance is off for the App.
   */
  private async governance(app: AppObject, deploys: boolean, ctx: ReconcileContext): Promise<GovernanceState> {
    const { governance } = this.deps;
    const namespace = app.metadata.namespace!,
      name = app.metadata.name!;
    const secretName = governanceSecretName(name);
    const secret = this.cache.get("Secret", namespace, secretName);
    if (!governance) return {};
    const removeSecret = async () => {
      if (!secret || !controlledBy(secret, app)) return;
      await this.cache.delete({ apiVersion: "v1", kind: "Secret", namespace, name: secretName }, secret);
    };
    if (governanceDisabled(app.metadata.annotations)) {
      await removeSecret();
      return { condition: { ready: false, reason: "Disabled", message: "Governance was removed for this App (DELETE .../provision)" } };
    }
    if (!deploys)
      return { condition: { ready: false, reason: "WaitingForDeployment", message: "Governance is provisioned on the first deployment" } };
    if (secret && !controlledBy(secret, app)) throw new Error(`Secret ${namespace}/${secretName} exists and is not owned by this App`);
    await this.ensureFinalizer(app);
    const generation = governanceGeneration(app.metadata.annotations);
    const have = Number(secret?.metadata.annotations?.[ANNOTATIONS.governanceGeneration] ?? 0);
    if (!secret || have !== generation) {
      try {
        const p = await governance.provision({ namespace, appName: name, appUid: app.metadata.uid!, generation }, ctx.signal);
        const written = await this.convergeChild(
          app,
          buildGovernanceSecret({ name, namespace, uid: app.metadata.uid! }, { ...p, generation }) as KubeObject,
          secret,
          ctx,
        );
        if (written.foreign) throw new Error(`Secret ${namespace}/${secretName} exists and is not owned by this App`);
        if (secret)
          this.deps.events?.event(
            app,
            "Normal",
            "KeyRotated",
            `A new governance key (generation ${generation}) is in Secret ${secretName}; the pods roll to pick it up`,
          );
      } catch (err) {
        if (!(err instanceof GovernanceDisabledError)) throw err;
        await removeSecret();
        return { condition: { ready: false, reason: "Disabled", message: err.message } };
      }
    }
    return {
      ref: { secretName, generation },
      condition: { ready: true, reason: "Provisioned", message: `Governance store provisioned; key generation ${generation}` },
    };
  }

  /**
   * The App's own variables: the `<app>-env` Secret the API writes, mounted when it exists and is
   * the App's (one of another owner, e.g. of an App deleted and created again, is never mounted).
   * Its watch (an owned kind) reconciles the App when it changes; the hash of its data rolls the pods.
   */
  private env(app: AppObject): EnvRef | undefined {
    const secretName = envSecretName(app.metadata.name!);
    const secret = this.cache.get<KubeObject & { data?: Record<string, string> }>("Secret", app.metadata.namespace!, secretName);
    return secret && controlledBy(secret, app) ? { secretName, hash: envHash(secret.data) } : undefined;
  }

  private async ensureFinalizer(app: AppObject): Promise<void> {
    const finalizers = app.metadata.finalizers ?? [];
    if (finalizers.includes(GOVERNANCE_FINALIZER)) return;
    await this.cache.mergePatch(refOf(app), {
      metadata: { resourceVersion: app.metadata.resourceVersion, finalizers: [...finalizers, GOVERNANCE_FINALIZER] },
    });
  }

  /** A deleted App: its store in the API's database goes too, then the finalizer is released. */
  private async finalize(app: AppObject, ctx: ReconcileContext): Promise<void> {
    const finalizers = app.metadata.finalizers ?? [];
    if (!finalizers.includes(GOVERNANCE_FINALIZER)) return;
    if (this.deps.governance) {
      await this.deps.governance.deprovision(
        { namespace: app.metadata.namespace!, appName: app.metadata.name!, appUid: app.metadata.uid! },
        ctx.signal,
      );
    }
    await this.cache.mergePatch(refOf(app), {
      metadata: { resourceVersion: app.metadata.resourceVersion, finalizers: finalizers.filter((f) => f !== GOVERNANCE_FINALIZER) },
    });
    ctx.log.debug("governance store dropped; finalizer released");
  }

  private status(app: AppObject, input: Omit<StatusInput, "old" | "now" | "cfg">, now = this.deps.now()): AppStatus {
    return computeStatus({ ...input, old: app.status, now, cfg: this.deps.cfg });
  }

  /**
   * Writes the App's status when it differs from the App's. A difference in replica counts only is
   * held back for up to countsDelayMs (the next transition carries it along); the answer is then
   * how long to wait before looking again, so the counts are written even if nothing else
   * happens. Every condition transition written is told as an Event.
   */
  private async writeStatus(app: AppObject, status: AppStatus, ctx: ReconcileContext): Promise<number | undefined> {
    const key = keyOf({ namespace: app.metadata.namespace ?? "", name: app.metadata.name ?? "" });
    const d = decideStatusWrite(
      app.status,
      status,
      this.countsPendingSince.get(key),
      this.deps.now().getTime(),
      this.deps.countsDelayMs ?? DEFAULT_COUNTS_DELAY_MS,
    );
    if (d.pendingSince === undefined) this.countsPendingSince.delete(key);
    else this.countsPendingSince.set(key, d.pendingSince);
    if (!d.write) return d.waitMs;
    let written: KubeObject;
    try {
      written = await this.cache.applyStatus("apps", {
        apiVersion: API_VERSION,
        kind: "App",
        metadata: { name: app.metadata.name, namespace: app.metadata.namespace },
        status,
      });
    } catch (err) {
      // Deleted since the cache showed it (its children go with it): nothing to report, and not a
      // failure to retry; the delete event brings the key back and finds it gone.
      if (isNotFound(err)) {
        this.countsPendingSince.delete(key);
        ctx.log.debug("the App was deleted meanwhile; status not written");
        return undefined;
      }
      throw err;
    }
    if (status.phase !== app.status?.phase) ctx.log.info({ from: app.status?.phase, to: status.phase }, "phase changed");
    for (const e of statusEvents(app.status, status)) this.deps.events?.event(written, e.type, e.reason, e.message);
  }
}

function refOf(o: KubeObject): ObjectRef {
  return { apiVersion: o.apiVersion!, kind: o.kind!, namespace: o.metadata.namespace!, name: o.metadata.name! };
}
