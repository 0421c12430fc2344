// The App reconciler: read the world from the watch caches, converge the children by server-side
// apply (skipping objects that already hold the desired state), delete children no longer wanted,
// and write status only when it changed. Level-based: no branch depends on which event fired.
import { createHash } from "node:crypto";
import type * as k8s from "@kubernetes/client-node";
import { API_VERSION, AppSpec, type AppStatus } from "../../crds/schemas.ts";
import { OPERATOR_FIELD_MANAGER, type KubeObject, type ObjectClient } from "../../kube/objects.ts";
import { isConflict } from "../../kube/transport.ts";
import type { Informer } from "../../kube/informer.ts";
import { keyOf, type ReconcileResult, type Reconciler, type Request } from "../runtime/controller.ts";
import { RecentWrites } from "../../kube/recent.ts";
import { buildChildren, buildGovernanceSecret, CHILD_KINDS, GOVERNANCE_GENERATION_LABEL, governanceSecretName, stableJson, upToDate, type BuildConfig, type ChildKind, type GovernanceRef } from "./builders.ts";
import { GOVERNANCE_FINALIZER, GovernanceDisabledError, governanceDisabled, governanceGeneration, type GovernanceClient } from "./governance.ts";
import { computeStatus, decideStatusWrite } from "./status.ts";

export type AppObject = KubeObject & { spec: unknown; status?: AppStatus };

export interface AppReconcilerDeps {
  client: ObjectClient;
  apps: Informer<AppObject>;
  children: Record<ChildKind, Informer<KubeObject>>;
  /** The operator's Secrets (the `<app>-governance` ones). */
  secrets: Informer<KubeObject>;
  /** Absent when no API is configured: Apps then run without governance. */
  governance?: GovernanceClient | undefined;
  cfg: BuildConfig;
  now: () => Date;
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

/** While a rollout is under way, look again at least this often even if no event arrives. */
const ROLLOUT_RECHECK_MS = 30_000;

const after = (ms: number | undefined): ReconcileResult | undefined => (ms ? { requeueAfterMs: ms } : undefined);

export function ownedBy(obj: KubeObject, app: AppObject): boolean {
  return (obj.metadata.ownerReferences ?? []).some((r) => r.controller && r.uid === app.metadata.uid);
}

/** Identity of a release: a hash of what runs (the pod template), not of the replica count. */
export function deploymentIdOf(name: string, children: KubeObject[]): string | undefined {
  const workload = children.find((c) => c.kind === "Deployment" || c.kind === "CronJob") as (k8s.V1Deployment | k8s.V1CronJob) | undefined;
  if (!workload) return undefined;
  const template = workload.kind === "CronJob" ? (workload as k8s.V1CronJob).spec?.jobTemplate : (workload as k8s.V1Deployment).spec?.template;
  return `${name}-${createHash("sha256").update(stableJson(template)).digest("hex").slice(0, 10)}`;
}

export class AppReconciler implements Reconciler {
  private readonly deps: AppReconcilerDeps;
  /** This reconciler's own writes, until the caches show them (see RecentWrites). */
  private readonly recent = new RecentWrites();
  /** Since when an App's status has differed from the written one by counts only (key → ms). */
  private readonly countsPendingSince = new Map<string, number>();

  constructor(deps: AppReconcilerDeps) {
    this.deps = deps;
    this.recent.track("App", deps.apps);
    for (const kind of Object.keys(CHILD_KINDS) as ChildKind[]) this.recent.track(kind, deps.children[kind]);
    this.recent.track("Secret", deps.secrets);
  }

  async reconcile({ namespace, name }: Request): Promise<ReconcileResult | void> {
    const { apps, children, client, cfg } = this.deps;
    const recent = this.recent;
    const app = recent.latest("App", namespace, name, apps.get(namespace, name));
    if (!app) { this.countsPendingSince.delete(keyOf({ namespace, name })); return; }
    if (app.metadata.deletionTimestamp) { await this.finalize(app); return; } // children go with it (owner references)
    const generation = app.metadata.generation ?? 0;
    const parsed = AppSpec.safeParse(app.spec);
    if (!parsed.success) {
      const invalid = parsed.error.issues.map((i) => `spec.${i.path.join(".")}: ${i.message}`).join("; ");
      return after(await this.writeStatus(app, computeStatus({ generation, spec: undefined, invalid, old: app.status, now: this.deps.now(), cfg })));
    }
    const spec = parsed.data;
    const ref = { name, namespace, uid: app.metadata.uid! };
    const live = (kind: ChildKind) => recent.latest(kind, namespace, name, children[kind].get(namespace, name));

    let deployment = live("Deployment") as k8s.V1Deployment | undefined;
    let cronJob = live("CronJob") as k8s.V1CronJob | undefined;
    // Governance comes first: the container must start with both variables already set.
    let gov: GovernanceState;
    try {
      gov = await this.governance(app, !!spec.image);
    } catch (err) {
      // First rollout: nothing starts without governance. Already running: the current Secret and
      // workload stay as they are. Either way the failure is reported and retried with backoff.
      const failed = { ready: false, reason: "ProvisioningFailed", message: err instanceof Error ? err.message : String(err) };
      await this.writeStatus(app, computeStatus({ generation, spec, old: app.status, deployment, cronJob, now: this.deps.now(), cfg, governance: failed }));
      throw err;
    }
    const desired = buildChildren(ref, spec, { deploymentReplicas: deployment?.spec?.replicas }, cfg, gov.ref);

    // A same-named object that this App does not own is never taken over. The caches hold only
    // objects labelled as ours: a child they hold is applied when it differs from the desired
    // state; one they lack is created by a create-only apply, which the API server refuses with
    // 409 when anything of that name exists, and only then is the object read to tell a cache that
    // lags behind (ours) from a foreign object. What refers to another child by name (the HPA to
    // the Deployment, the Ingress to the Service) is created only once that child is known to be
    // ours; otherwise children are independent and converge in parallel.
    const cached = desired.map((d) => live(d.kind as ChildKind));
    const converged: (KubeObject | undefined)[] = [];
    // The kind of a same-named object in the way (list items carry no kind: it comes from desired).
    let foreign = desired.find((_, i) => cached[i] && !ownedBy(cached[i], app))?.kind;
    const all = desired.map((_, i) => i);
    const refers = (i: number) => REFERS_TO_A_SIBLING.has(desired[i]!.kind!);
    const independent = all.filter((i) => !refers(i));
    const waves = independent.every((i) => cached[i]) ? [all] : [independent, all.filter(refers)];
    for (const wave of foreign ? [] : waves) {
      const results = await Promise.all(wave.map((i) => this.converge(app, desired[i]!, cached[i])));
      wave.forEach((i, j) => { converged[i] = results[j]!.live; if (results[j]!.foreign) foreign ??= desired[i]!.kind; });
      if (foreign) break;
    }
    if (foreign) {
      const invalid = `${foreign} ${namespace}/${name} already exists and is not owned by this App`;
      return after(await this.writeStatus(app, computeStatus({ generation, spec: undefined, invalid, old: app.status, now: this.deps.now(), cfg })));
    }
    converged.forEach((c, i) => {
      if (desired[i]!.kind === "Deployment") deployment = c as k8s.V1Deployment;
      if (desired[i]!.kind === "CronJob") cronJob = c as k8s.V1CronJob;
    });
    const wanted = new Set(desired.map((d) => d.kind));
    for (const kind of Object.keys(CHILD_KINDS) as ChildKind[]) {
      const obj = live(kind);
      if (wanted.has(kind) || !obj || !ownedBy(obj, app)) continue;
      await client.delete({ apiVersion: CHILD_KINDS[kind].apiVersion, kind, namespace, name });
      recent.deleted(kind, obj);
      if (kind === "Deployment") deployment = undefined;
      if (kind === "CronJob") cronJob = undefined;
    }

    const status = computeStatus({
      generation, spec, old: app.status, deployment, cronJob,
      deploymentId: deploymentIdOf(name, desired), now: this.deps.now(), cfg, governance: gov.condition,
    });
    const wait = await this.writeStatus(app, status);
    return after(status.phase === "deploying" ? Math.min(wait ?? ROLLOUT_RECHECK_MS, ROLLOUT_RECHECK_MS) : wait);
  }

  /**
   * Converges one child: the cached object is applied only when it differs; a child the cache
   * does not hold is created, never adopted (see reconcile). Returns the object as it now is, or
   * the foreign object that is in the way.
   */
  private async converge(app: AppObject, desired: KubeObject, cached: KubeObject | undefined): Promise<{ live?: KubeObject; foreign?: KubeObject }> {
    const kind = desired.kind!;
    const write = async (w: Promise<KubeObject>) => { const obj = await w; this.recent.remember(kind, obj); return { live: obj }; };
    const { client } = this.deps;
    if (cached) return upToDate(desired, cached) ? { live: cached } : write(client.apply(desired, OPERATOR_FIELD_MANAGER));
    try {
      return await write(client.applyNew(desired, OPERATOR_FIELD_MANAGER));
    } catch (err) {
      if (!isConflict(err)) throw err;
      const existing = await client.get<KubeObject>({ apiVersion: desired.apiVersion!, kind, namespace: desired.metadata.namespace!, name: desired.metadata.name! });
      if (!existing) throw err; // deleted in between: retried with backoff
      if (!ownedBy(existing, app)) return { foreign: existing };
      return upToDate(desired, existing) ? { live: existing } : write(client.apply(desired, OPERATOR_FIELD_MANAGER));
    }
  }

  /**
   * Makes sure the App's governance Secret holds a key of the wanted generation (asking the API to
   * provision when it does not), or that there is none when governance is off for the App.
   */
  private async governance(app: AppObject, deploys: boolean): Promise<GovernanceState> {
    const { governance, secrets, client } = this.deps;
    const namespace = app.metadata.namespace!, name = app.metadata.name!;
    const secretName = governanceSecretName(name);
    const secret = this.recent.latest("Secret", namespace, secretName, secrets.get(namespace, secretName));
    if (!governance) return {};
    const removeSecret = async () => {
      if (!secret || !ownedBy(secret, app)) return;
      await client.delete({ apiVersion: "v1", kind: "Secret", namespace, name: secretName });
      this.recent.deleted("Secret", secret);
    };
    if (governanceDisabled(app.metadata.annotations)) {
      await removeSecret();
      return { condition: { ready: false, reason: "Disabled", message: "Governance was removed for this App (DELETE .../provision)" } };
    }
    if (!deploys) return { condition: { ready: false, reason: "WaitingForDeployment", message: "Governance is provisioned on the first deployment" } };
    if (secret && !ownedBy(secret, app)) throw new Error(`Secret ${namespace}/${secretName} exists and is not owned by this App`);
    await this.ensureFinalizer(app);
    const generation = governanceGeneration(app.metadata.annotations);
    const have = Number(secret?.metadata.annotations?.[GOVERNANCE_GENERATION_LABEL] ?? 0);
    if (!secret || have !== generation) {
      try {
        const p = await governance.provision({ namespace, appName: name, appUid: app.metadata.uid!, generation });
        const written = await this.converge(app, buildGovernanceSecret({ name, namespace, uid: app.metadata.uid! }, { ...p, generation }) as KubeObject, secret);
        if (written.foreign) throw new Error(`Secret ${namespace}/${secretName} exists and is not owned by this App`);
      } catch (err) {
        if (!(err instanceof GovernanceDisabledError)) throw err;
        await removeSecret();
        return { condition: { ready: false, reason: "Disabled", message: err.message } };
      }
    }
    return { ref: { secretName, generation }, condition: { ready: true, reason: "Provisioned", message: `Governance store provisioned; key generation ${generation}` } };
  }

  private async ensureFinalizer(app: AppObject): Promise<void> {
    const finalizers = app.metadata.finalizers ?? [];
    if (finalizers.includes(GOVERNANCE_FINALIZER)) return;
    this.recent.remember("App", await this.deps.client.mergePatch(
      { apiVersion: API_VERSION, kind: "App", namespace: app.metadata.namespace!, name: app.metadata.name! },
      { metadata: { resourceVersion: app.metadata.resourceVersion, finalizers: [...finalizers, GOVERNANCE_FINALIZER] } }, OPERATOR_FIELD_MANAGER));
  }

  /** A deleted App: its store in the API's database goes too, then the finalizer is released. */
  private async finalize(app: AppObject): Promise<void> {
    const finalizers = app.metadata.finalizers ?? [];
    if (!finalizers.includes(GOVERNANCE_FINALIZER)) return;
    if (this.deps.governance) {
      await this.deps.governance.deprovision({ namespace: app.metadata.namespace!, appName: app.metadata.name!, appUid: app.metadata.uid! });
    }
    this.recent.remember("App", await this.deps.client.mergePatch(
      { apiVersion: API_VERSION, kind: "App", namespace: app.metadata.namespace!, name: app.metadata.name! },
      { metadata: { resourceVersion: app.metadata.resourceVersion, finalizers: finalizers.filter((f) => f !== GOVERNANCE_FINALIZER) } }, OPERATOR_FIELD_MANAGER));
  }

  /**
   * Writes `status` when it differs from the App's. A difference in replica counts only is held
   * back for up to countsDelayMs (the next transition carries it along); the answer is then how
   * long to wait before looking again, so the counts are written even if nothing else happens.
   */
  private async writeStatus(app: AppObject, status: AppStatus): Promise<number | undefined> {
    const key = keyOf({ namespace: app.metadata.namespace ?? "", name: app.metadata.name ?? "" });
    const d = decideStatusWrite(app.status, status, this.countsPendingSince.get(key), this.deps.now().getTime(), this.deps.countsDelayMs ?? DEFAULT_COUNTS_DELAY_MS);
    if (d.pendingSince === undefined) this.countsPendingSince.delete(key);
    else this.countsPendingSince.set(key, d.pendingSince);
    if (!d.write) return d.waitMs;
    this.recent.remember("App", await this.deps.client.applyStatus("apps", { apiVersion: API_VERSION, kind: "App", metadata: { name: app.metadata.name, namespace: app.metadata.namespace }, status }, OPERATOR_FIELD_MANAGER));
  }
}
