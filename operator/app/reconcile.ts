// The App reconciler: read the world from the watch caches, converge the children by server-side
// apply (skipping objects that already hold the desired state), delete children no longer wanted,
// and write status only when it changed. Level-based: no branch depends on which event fired.
import { createHash } from "node:crypto";
import type * as k8s from "@kubernetes/client-node";
import { API_VERSION, AppSpec, type AppStatus } from "../../crds/schemas.ts";
import { OPERATOR_FIELD_MANAGER, type KubeClient, type KubeObject } from "../../crds/kube/client.ts";
import type { Informer } from "../../crds/kube/informer.ts";
import type { ReconcileResult, Reconciler, Request } from "../runtime/controller.ts";
import { buildChildren, buildGovernanceSecret, CHILD_KINDS, GOVERNANCE_GENERATION_LABEL, governanceSecretName, stableJson, upToDate, type BuildConfig, type ChildKind, type GovernanceRef } from "./builders.ts";
import { GOVERNANCE_FINALIZER, GovernanceDisabledError, governanceDisabled, governanceGeneration, type GovernanceClient } from "./governance.ts";
import { computeStatus, statusEqual } from "./status.ts";

export type AppObject = KubeObject & { spec: unknown; status?: AppStatus };

export interface AppReconcilerDeps {
  client: KubeClient;
  apps: Informer<AppObject>;
  children: Record<ChildKind, Informer<KubeObject>>;
  /** The operator's Secrets (the `<app>-governance` ones). */
  secrets: Informer<KubeObject>;
  /** Absent when no API is configured: Apps then run without governance. */
  governance?: GovernanceClient | undefined;
  cfg: BuildConfig;
  now: () => Date;
}

type GovernanceState = { ref?: GovernanceRef; condition?: { ready: boolean; reason: string; message: string } };

/** While a rollout is under way, look again at least this often even if no event arrives. */
const ROLLOUT_RECHECK_MS = 30_000;

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
  constructor(deps: AppReconcilerDeps) { this.deps = deps; }

  async reconcile({ namespace, name }: Request): Promise<ReconcileResult | void> {
    const { apps, children, client, cfg } = this.deps;
    const app = apps.get(namespace, name);
    if (!app) return;
    if (app.metadata.deletionTimestamp) { await this.finalize(app); return; } // children go with it (owner references)
    const generation = app.metadata.generation ?? 0;
    const parsed = AppSpec.safeParse(app.spec);
    if (!parsed.success) {
      const invalid = parsed.error.issues.map((i) => `spec.${i.path.join(".")}: ${i.message}`).join("; ");
      await this.writeStatus(app, computeStatus({ generation, spec: undefined, invalid, old: app.status, now: this.deps.now(), cfg }));
      return;
    }
    const spec = parsed.data;
    const ref = { name, namespace, uid: app.metadata.uid! };
    const live = (kind: ChildKind) => children[kind].get(namespace, name);

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
    // objects labelled as ours, so an object about to be created is looked up directly first.
    // Children are independent of each other: look-ups and applies run in parallel.
    const existing = await Promise.all(desired.map(async (d) => {
      const kind = d.kind as ChildKind;
      return live(kind) ?? await client.get<KubeObject>({ apiVersion: CHILD_KINDS[kind].apiVersion, kind, namespace, name });
    }));
    const foreignAt = existing.findIndex((e) => e && !ownedBy(e, app));
    if (foreignAt >= 0) {
      const invalid = `${desired[foreignAt]!.kind} ${namespace}/${name} already exists and is not owned by this App`;
      await this.writeStatus(app, computeStatus({ generation, spec: undefined, invalid, old: app.status, now: this.deps.now(), cfg }));
      return;
    }

    const applied = await Promise.all(desired.map((obj, i) => (upToDate(obj, existing[i]) ? Promise.resolve(undefined) : client.apply(obj, OPERATOR_FIELD_MANAGER))));
    applied.forEach((a, i) => {
      if (!a) return;
      if (desired[i]!.kind === "Deployment") deployment = a as k8s.V1Deployment;
      if (desired[i]!.kind === "CronJob") cronJob = a as k8s.V1CronJob;
    });
    const wanted = new Set(desired.map((d) => d.kind));
    for (const kind of Object.keys(CHILD_KINDS) as ChildKind[]) {
      const obj = live(kind);
      if (wanted.has(kind) || !obj || !ownedBy(obj, app)) continue;
      await client.delete({ apiVersion: CHILD_KINDS[kind].apiVersion, kind, namespace, name });
      if (kind === "Deployment") deployment = undefined;
      if (kind === "CronJob") cronJob = undefined;
    }

    const status = computeStatus({
      generation, spec, old: app.status, deployment, cronJob,
      deploymentId: deploymentIdOf(name, desired), now: this.deps.now(), cfg, governance: gov.condition,
    });
    await this.writeStatus(app, status);
    return status.phase === "deploying" ? { requeueAfterMs: ROLLOUT_RECHECK_MS } : undefined;
  }

  /**
   * Makes sure the App's governance Secret holds a key of the wanted generation (asking the API to
   * provision when it does not), or that there is none when governance is off for the App.
   */
  private async governance(app: AppObject, deploys: boolean): Promise<GovernanceState> {
    const { governance, secrets, client } = this.deps;
    const namespace = app.metadata.namespace!, name = app.metadata.name!;
    const secretName = governanceSecretName(name);
    const secret = secrets.get(namespace, secretName);
    if (!governance) return {};
    const removeSecret = async () => {
      if (secret && ownedBy(secret, app)) await client.delete({ apiVersion: "v1", kind: "Secret", namespace, name: secretName });
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
        await client.apply(buildGovernanceSecret({ name, namespace, uid: app.metadata.uid! }, { ...p, generation }) as KubeObject, OPERATOR_FIELD_MANAGER);
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
    await this.deps.client.mergePatch(
      { apiVersion: API_VERSION, kind: "App", namespace: app.metadata.namespace!, name: app.metadata.name! },
      { metadata: { resourceVersion: app.metadata.resourceVersion, finalizers: [...finalizers, GOVERNANCE_FINALIZER] } }, OPERATOR_FIELD_MANAGER);
  }

  /** A deleted App: its store in the API's database goes too, then the finalizer is released. */
  private async finalize(app: AppObject): Promise<void> {
    const finalizers = app.metadata.finalizers ?? [];
    if (!finalizers.includes(GOVERNANCE_FINALIZER)) return;
    if (this.deps.governance) {
      await this.deps.governance.deprovision({ namespace: app.metadata.namespace!, appName: app.metadata.name!, appUid: app.metadata.uid! });
    }
    await this.deps.client.mergePatch(
      { apiVersion: API_VERSION, kind: "App", namespace: app.metadata.namespace!, name: app.metadata.name! },
      { metadata: { resourceVersion: app.metadata.resourceVersion, finalizers: finalizers.filter((f) => f !== GOVERNANCE_FINALIZER) } }, OPERATOR_FIELD_MANAGER);
  }

  private async writeStatus(app: AppObject, status: AppStatus): Promise<void> {
    if (statusEqual(app.status, status)) return;
    await this.deps.client.applyStatus("apps", { apiVersion: API_VERSION, kind: "App", metadata: { name: app.metadata.name, namespace: app.metadata.namespace }, status }, OPERATOR_FIELD_MANAGER);
  }
}
