// The App reconciler: read the world from the watch caches, converge the children by server-side
// apply (skipping objects that already hold the desired state), delete children no longer wanted,
// and write status only when it changed. Level-based: no branch depends on which event fired.
import { createHash } from "node:crypto";
import type * as k8s from "@kubernetes/client-node";
import { API_VERSION, APP_LABEL, AppSpec, WORKSPACE_LABEL, type AppStatus } from "../../crds/schemas.ts";
import { newestFirst, servingRelease } from "../../crds/release.ts";
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
import { OPERATOR_FIELD_MANAGER, type KubeObject } from "../../kube/objects.ts";
import { errorMessage, isNotFound } from "../../kube/transport.ts";
import type { Informer } from "../../kube/informer.ts";
import type { EventRecorder } from "../../kube/events.ts";
import { ReadYourWritesCache, type WritingClient } from "../../kube/read-your-writes.ts";
import { groupOf, type Access } from "../../kube/rbac.ts";
import { keyOf, type ReconcileContext, type ReconcileResult, type Reconciler, type Request } from "../runtime/controller.ts";
import { childAccess, convergeChild, stableJson } from "../kit/apply.ts";
import { ensureRegistryPull } from "../kit/registry-pull.ts";
import { recordLifecycle } from "../kit/events.ts";
import { controlledBy, refOf, type AppObject, type ReleaseObject } from "../kit/objects.ts";
import { envHash, governanceSecretName, type EnvRef, type GovernanceRef } from "../kit/pod.ts";
import { podFailure } from "../kit/rollout.ts";
import { buildChildren, buildGovernanceSecret, CHILD_KINDS, type BuildConfig, type ChildKind } from "./builders.ts";
import { GovernanceDisabledError, type GovernanceClient } from "./governance.ts";
import { computeStatus, decideStatusWrite, statusEvents, type StatusInput } from "./status.ts";

export type { AppObject };

const BERTH = groupOf(API_VERSION);

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
  ...Object.entries(CHILD_KINDS).flatMap(([kind, c]) => childAccess(groupOf(c.apiVersion), c.plural, `An App's ${kind}`)),
  {
    group: "",
    resource: "secrets",
    verbs: ["get", "list", "watch", "create", "patch", "delete"],
    scope: "workspace",
    why: "The <app>-governance Secret (GOVDB_CONNECTION, GOVERNANCE_PROJECT), and the <app>-env Secret the API writes, watched to roll the pods when it changes; in workspace namespaces only (RBAC cannot narrow list and watch by name or label)",
  },
  {
    group: "",
    resource: "pods",
    verbs: ["list", "watch"],
    why: "An App's pods are watched (label-selected) to report a release that cannot start (image pull, crash loop) with its reason",
  },
];

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
  /**
   * Whether a namespace is a workspace's (SharedInformers.inWorkspace): the operator writes only
   * there, so an App elsewhere is refused (NotInAWorkspace). Absent: every namespace is.
   */
  inWorkspace?: ((namespace: string) => boolean) | undefined;
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
/** How soon to look again at an App whose namespace's Secrets are not listed yet. */
const SECRETS_WAIT_MS = 2_000;

const after = (ms: number | undefined): ReconcileResult | undefined => (ms ? { requeueAfterMs: ms } : undefined);
/** After a crash-loop hold ends, how much later to look (the clock of the pod's startedAt is the kubelet's). */
const CRASH_RECHECK_MARGIN_MS = 500;

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
  namespace: string;
  name: string;
  spec: AppSpec;
  generation: number;
  deployment: k8s.V1Deployment | undefined;
  cronJob: k8s.V1CronJob | undefined;
}

/** Why the App's spec cannot run as it is (the App fails with the reason); `unroute`: its route goes too. */
interface Refusal {
  reason: string;
  message: string;
  unroute?: boolean;
}

/** What the App runs: its spec with the image to run (a Git App's serving release's), and its releases. */
interface Source {
  spec: AppSpec;
  releases: NonNullable<StatusInput["releases"]>;
  /** There is an image to run (now or once a release serves): governance is provisioned then. */
  deploys: boolean;
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
    // The kinds this configuration manages (a Middleware only where Traefik guards private Apps).
    for (const [kind, informer] of Object.entries(deps.children)) this.cache.track(kind, informer);
  }

  /**
   * Read the world, converge, report. A deleted App is finalized (its children go with it through
   * their owner references); a spec the operator cannot use is reported; otherwise converge.
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
    }
    const o = this.observe(app);
    if ("invalid" in o) {
      return after(await this.writeStatus(app, this.status(app, { generation: o.generation, spec: undefined, invalid: o.invalid }), ctx));
    }
    try {
      return await this.converge(o, ctx);
    } catch (err) {
      recordLifecycle(this.deps.events, app, "ReconcileError", errorMessage(err));
      throw err;
    }
  }

  /**
   * The steps, in order: admit the spec (its image, its host); find what to run (source); make
   * sure governance is provisioned before the container starts; converge the children; prune
   * those no longer wanted; report the status.
   */
  private async converge(o: Observed, ctx: ReconcileContext): Promise<ReconcileResult | undefined> {
    const refusal = this.admit(o);
    if (refusal) return after(await this.refuse(o, refusal, ctx));
    const source = this.source(o);
    // Berth's Secrets of the namespace not listed yet (a workspace namespace just followed, or one
    // whose RoleBinding is missing: kube/per-namespace-informer.ts): a Secret not in the cache
    // would read as absent, rotating a live governance key and rolling the pods without their
    // variables. Nothing is written until the list is in.
    if (!this.deps.secrets.syncedIn(o.namespace)) {
      ctx.log.debug({ namespace: o.namespace }, "waiting for the namespace's Secrets to be listed");
      return { requeueAfterMs: SECRETS_WAIT_MS };
    }
    const { registryPull } = this.deps.cfg;
    if (registryPull) {
      const failure = await ensureRegistryPull(this.cache, o.namespace, registryPull);
      if (failure) return after(await this.refuse(o, { reason: "ObjectInTheWay", message: failure }, ctx));
    }
    const gov = await this.provision(o, source, ctx);
    const desired = buildChildren(
      { name: o.name, namespace: o.namespace, uid: o.app.metadata.uid! },
      source.spec,
      { deploymentReplicas: o.deployment?.spec?.replicas },
      this.deps.cfg,
      gov.ref,
      this.env(o.app),
    );
    const children = await this.children(o.app, desired, ctx);
    if ("foreign" in children) {
      const message = `${children.foreign} ${o.namespace}/${o.name} already exists and is not owned by this App`;
      return after(await this.refuse(o, { reason: "ObjectInTheWay", message }, ctx));
    }
    const workload = await this.pruneUnwanted(o, desired, children.converged, ctx);
    return this.report(o, source, gov, desired, workload, ctx);
  }

  /** The App's spec parsed, and its workload as cached; or why the spec cannot be used. */
  private observe(app: AppObject): Observed | { invalid: string; generation: number } {
    const namespace = app.metadata.namespace!,
      name = app.metadata.name!;
    const generation = app.metadata.generation ?? 0;
    const parsed = AppSpec.safeParse(app.spec);
    if (!parsed.success) {
      return { generation, invalid: parsed.error.issues.map((i) => `spec.${i.path.join(".")}: ${i.message}`).join("; ") };
    }
    return {
      app,
      namespace,
      name,
      spec: parsed.data,
      generation,
      deployment: this.cache.get<k8s.V1Deployment & KubeObject>("Deployment", namespace, name),
      cronJob: this.cache.get<k8s.V1CronJob & KubeObject>("CronJob", namespace, name),
    };
  }

  /**
   * Whether the spec may run: a prebuilt image that is another namespace's build never runs here;
   * a host the App may not have is never routed. What runs stays as it was either way.
   */
  private admit(o: Observed): Refusal | undefined {
    if (this.deps.inWorkspace && !this.deps.inWorkspace(o.namespace))
      return {
        reason: "NotInAWorkspace",
        message: `Namespace ${o.namespace} is not a Berth workspace's (labelled ${WORKSPACE_LABEL}): the operator runs Apps only in workspace namespaces`,
      };
    const { buildArea } = this.deps.cfg;
    const foreign = o.spec.image && buildArea ? foreignBuildImage(o.spec.image, o.namespace, buildArea) : undefined;
    if (foreign) return { reason: "ImageNotAllowed", message: foreign };
    const host = this.hostRefusal(o.app, o.spec);
    if (host) return { ...host, unroute: true };
    return undefined;
  }

  /**
   * Fails the App with the refusal's reason. A refused host is never routed: an Ingress (and its
   * Middleware) the App may have had, before an older App with its host was seen, goes.
   */
  private async refuse(o: Observed, refusal: Refusal, ctx: ReconcileContext): Promise<number | undefined> {
    if (refusal.unroute) {
      await this.prune(o.app, new Set((Object.keys(CHILD_KINDS) as ChildKind[]).filter((k) => k !== "Ingress" && k !== "Middleware")), ctx);
    }
    const status = this.status(o.app, {
      generation: o.generation,
      spec: undefined,
      invalid: refusal.message,
      invalidReason: refusal.reason,
    });
    return this.writeStatus(o.app, status, ctx);
  }

  /** What to run: a Git App runs the image of its serving release; a prebuilt spec.image always wins. */
  private source(o: Observed): Source {
    const releases = newestFirst((this.deps.releases?.list(o.namespace) ?? []).filter((r) => r.spec?.appRef?.name === o.name));
    const serving = o.spec.image ? undefined : servingRelease(releases);
    const spec: AppSpec = serving ? { ...o.spec, image: serving.status!.image! } : o.spec;
    return {
      spec,
      releases: { serving, newest: o.spec.image ? undefined : releases[0] },
      // The deployment event (docs/spec.md part 6): governance is provisioned once there is an
      // image to run, before the release command and the first pod start.
      deploys: !!spec.image || (!o.spec.image && releases.some((r) => !!r.status?.image)),
    };
  }

  /**
   * Governance before the first rollout. On failure, a first rollout starts nothing; an App
   * already running keeps its Secret and workload as they are. Either way the failure is reported
   * and the reconcile fails (retried with backoff).
   */
  private async provision(o: Observed, source: Source, ctx: ReconcileContext): Promise<GovernanceState> {
    try {
      return await this.governance(o.app, source.deploys, ctx);
    } catch (err) {
      const failed = { ready: false, reason: "ProvisioningFailed", message: errorMessage(err) };
      const status = this.status(o.app, {
        generation: o.generation,
        spec: source.spec,
        deployment: o.deployment,
        cronJob: o.cronJob,
        governance: failed,
      });
      await this.writeStatus(o.app, status, ctx);
      throw err;
    }
  }

  /** Deletes the children no longer wanted; returns the workload as it now is (applied, cached or gone). */
  private async pruneUnwanted(
    o: Observed,
    desired: readonly KubeObject[],
    converged: readonly KubeObject[],
    ctx: ReconcileContext,
  ): Promise<{ deployment: k8s.V1Deployment | undefined; cronJob: k8s.V1CronJob | undefined }> {
    let { deployment, cronJob } = o;
    for (const c of converged) {
      if (c.kind === "Deployment") deployment = c as k8s.V1Deployment;
      if (c.kind === "CronJob") cronJob = c as k8s.V1CronJob;
    }
    const pruned = await this.prune(o.app, new Set(desired.map((d) => d.kind as ChildKind)), ctx);
    if (pruned.has("Deployment")) deployment = undefined;
    if (pruned.has("CronJob")) cronJob = undefined;
    return { deployment, cronJob };
  }

  /**
   * Writes the App's status, and says when to look again. No timed recheck while a rollout is
   * under way: every input of the status (the Deployment's conditions, its pods, the releases) is
   * watched, and the controller's resync is the safety net. One exception: a container that
   * crashed and runs again counts as crash-looping until it has run for CRASH_STABLE_MS, and
   * nothing is observed when that time passes: look again then.
   */
  private async report(
    o: Observed,
    source: Source,
    gov: GovernanceState,
    desired: readonly KubeObject[],
    workload: { deployment: k8s.V1Deployment | undefined; cronJob: k8s.V1CronJob | undefined },
    ctx: ReconcileContext,
  ): Promise<ReconcileResult | undefined> {
    const pods = this.deps.pods?.list(o.namespace).filter((p) => p.metadata.labels?.[APP_LABEL] === o.name) as k8s.V1Pod[] | undefined;
    // One `now` for the status and the recheck, so that both see the same side of the minute.
    const now = this.deps.now();
    const status = this.status(
      o.app,
      {
        generation: o.generation,
        spec: source.spec,
        ...workload,
        pods,
        deploymentId: deploymentIdOf(o.name, [...desired]),
        governance: gov.condition,
        releases: source.releases,
      },
      now,
    );
    const wait = await this.writeStatus(o.app, status, ctx);
    const held = source.spec.image ? podFailure(pods, source.spec.image, now)?.until : undefined;
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
   * Converges the App's children. A same-named object that this App does not own is never taken
   * over. The caches hold only objects labelled as ours: a child they hold is applied when it
   * differs from the desired state; one they lack is created by a create-only apply (kit/apply.ts
   * convergeChild). What refers to another child by name (the HPA to the Deployment, the Ingress to
   * the Service) is created only once that child is known to be ours; otherwise children are
   * independent and converge in parallel.
   */
  private async children(
    app: AppObject,
    desired: KubeObject[],
    ctx: ReconcileContext,
  ): Promise<{ converged: KubeObject[] } | { foreign: string }> {
    const ours = (obj: KubeObject) => controlledBy(obj, app);
    const cached = desired.map((d) => this.cache.get(d.kind!, app.metadata.namespace!, app.metadata.name!));
    const inTheWay = desired.find((_, i) => cached[i] && !ours(cached[i]));
    if (inTheWay) return { foreign: inTheWay.kind! };
    const all = desired.map((_, i) => i);
    const refers = (i: number) => REFERS_TO_A_SIBLING.has(desired[i]!.kind!);
    const independent = all.filter((i) => !refers(i));
    const waves = independent.every((i) => cached[i]) ? [all] : [independent, all.filter(refers)];
    const converged: KubeObject[] = [];
    for (const wave of waves) {
      const results = await Promise.all(wave.map((i) => convergeChild(this.cache, desired[i]!, cached[i], ours)));
      const foreign = results.findIndex((r) => "foreign" in r);
      if (foreign >= 0) return { foreign: desired[wave[foreign]!]!.kind! };
      for (const r of results) {
        if ("foreign" in r) continue;
        if (r.created) ctx.log.debug({ kind: r.live.kind }, "created");
        converged.push(r.live);
      }
    }
    return { converged };
  }

  /** Deletes the App's children of the kinds it no longer wants; returns the kinds deleted. */
  private async prune(app: AppObject, wanted: ReadonlySet<ChildKind>, ctx: ReconcileContext): Promise<Set<ChildKind>> {
    const namespace = app.metadata.namespace!,
      name = app.metadata.name!;
    const pruned = new Set<ChildKind>();
    for (const kind of Object.keys(this.deps.children) as ChildKind[]) {
      const obj = this.cache.get(kind, namespace, name);
      if (wanted.has(kind) || !obj || !controlledBy(obj, app)) continue;
      await this.cache.delete({ apiVersion: CHILD_KINDS[kind].apiVersion, kind, namespace, name }, obj);
      ctx.log.debug({ kind }, "deleted: the App no longer needs it");
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
        const desired = buildGovernanceSecret({ name, namespace, uid: app.metadata.uid! }, { ...p, generation }) as KubeObject;
        const written = await convergeChild(this.cache, desired, secret, (obj) => controlledBy(obj, app));
        if ("foreign" in written) throw new Error(`Secret ${namespace}/${secretName} exists and is not owned by this App`);
        if (secret)
          recordLifecycle(
            this.deps.events,
            app,
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
   * Writes the App's status when it differs from the stored one (the App as the cache shows it,
   * with this reconciler's own writes). A difference in replica counts only is held back for up
   * to countsDelayMs (the next transition carries it along); the answer is then how long to wait
   * before looking again, so the counts are written even if nothing else happens. Every condition
   * transition written is told as an Event.
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
