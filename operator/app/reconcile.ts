// The App reconciler: read the world from the watch caches, converge the children by server-side
// apply (skipping objects that already hold the desired state), delete children no longer wanted,
// and write status only when it changed. Level-based: no branch depends on which event fired.
import { createHash } from "node:crypto";
import type * as k8s from "@kubernetes/client-node";
import { API_VERSION, AppSpec, type AppStatus } from "../../crds/schemas.ts";
import { OPERATOR_FIELD_MANAGER, type KubeClient, type KubeObject } from "../../crds/kube/client.ts";
import type { Informer } from "../../crds/kube/informer.ts";
import type { ReconcileResult, Reconciler, Request } from "../runtime/controller.ts";
import { buildChildren, CHILD_KINDS, stableJson, upToDate, type BuildConfig, type ChildKind } from "./builders.ts";
import { computeStatus, statusEqual } from "./status.ts";

export type AppObject = KubeObject & { spec: unknown; status?: AppStatus };

export interface AppReconcilerDeps {
  client: KubeClient;
  apps: Informer<AppObject>;
  children: Record<ChildKind, Informer<KubeObject>>;
  cfg: BuildConfig;
  now: () => Date;
}

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
    if (!app || app.metadata.deletionTimestamp) return; // children go with it (owner references)
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
    const desired = buildChildren(ref, spec, { deploymentReplicas: deployment?.spec?.replicas }, cfg);

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
      deploymentId: deploymentIdOf(name, desired), now: this.deps.now(), cfg,
    });
    await this.writeStatus(app, status);
    return status.phase === "deploying" ? { requeueAfterMs: ROLLOUT_RECHECK_MS } : undefined;
  }

  private async writeStatus(app: AppObject, status: AppStatus): Promise<void> {
    if (statusEqual(app.status, status)) return;
    await this.deps.client.applyStatus("apps", { apiVersion: API_VERSION, kind: "App", metadata: { name: app.metadata.name, namespace: app.metadata.namespace }, status }, OPERATOR_FIELD_MANAGER);
  }
}
