// The App controller's wiring: its informers, what wakes an App, and its reconciler registered
// with the Manager. Everything it shares with the other controllers comes from kit/.
import { APP_LABEL } from "../../crds/schemas.ts";
import type { Informer } from "../../kube/informer.ts";
import type { KubeObject } from "../../kube/objects.ts";
import { specChanged, type Request } from "../runtime/controller.ts";
import type { OperatorConfig } from "../config.ts";
import type { OperatorContext, WiredController } from "../kit/context.ts";
import { edgeConfig } from "../kit/edge.ts";
import { workloadPlacement } from "../kit/pod.ts";
import { registryPullSettings } from "../kit/registry-pull.ts";
import type { AppObject, ReleaseObject } from "../kit/objects.ts";
import { childKinds, type BuildConfig, type ChildKind } from "./builders.ts";
import { HttpGovernanceClient } from "./governance.ts";
import { AppReconciler, type AppReconcilerDeps } from "./reconcile.ts";

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
/** The App of a Release (its appRef), to wake the App controller when a release moves. */
export function appOfRelease(obj: KubeObject): Request[] {
  const app = (obj as ReleaseObject).spec?.appRef?.name;
  return app && obj.metadata.namespace ? [{ namespace: obj.metadata.namespace, name: app }] : [];
}

/** The App controller's configuration of what it builds, from the operator's. */
export function appBuildConfig(cfg: OperatorConfig): BuildConfig {
  const pull = registryPullSettings(cfg);
  return {
    baseDomain: cfg.BERTH_BASE_DOMAIN,
    ingressClassName: cfg.BERTH_INGRESS_CLASS,
    defaultTlsSecret: cfg.BERTH_DEFAULT_TLS_SECRET,
    ...workloadPlacement(cfg),
    edge: edgeConfig(cfg),
    reservedSlugs: cfg.BERTH_RESERVED_SLUGS,
    platformHosts: [cfg.BERTH_INGRESS_HOST, ...cfg.BERTH_PLATFORM_HOSTS],
    buildArea: { registry: cfg.BERTH_BUILD_REGISTRY, prefix: cfg.BERTH_BUILD_REPOSITORY_PREFIX },
    ...(pull ? { registryPull: pull } : {}),
  };
}

/**
 * Registers the App controller. An App is looked at again when it changes (not when only its
 * status does: this controller is its status's only writer), when one of its children, its
 * Secrets, its pods or its releases change, and when another App with its slug does.
 */
export function wireAppController(op: OperatorContext): WiredController {
  const { cfg, informers } = op;
  const buildConfig = appBuildConfig(cfg);
  const apps = informers.apps();
  const children = Object.fromEntries(
    childKinds(buildConfig).map((kind) => [kind, informers.managed(kind)]),
  ) as AppReconcilerDeps["children"];
  const secrets = informers.secrets();
  const pods = informers.managed("Pod");
  const releases = informers.releases();
  const governance = cfg.BERTH_OPERATOR_API_URL
    ? new HttpGovernanceClient({
        baseUrl: cfg.BERTH_OPERATOR_API_URL,
        tokenFile: cfg.BERTH_OPERATOR_TOKEN_FILE,
        caFile: cfg.BERTH_OPERATOR_API_CA_FILE,
      })
    : undefined;
  const controller = op.manager.addController({
    name: "app",
    primary: apps, // the controller only reads names and owner references
    // Only this controller writes App status: its own status writes wake nothing.
    updates: specChanged,
    owned: [
      ...Object.entries(children).map(([kind, informer]) =>
        CHILD_STATUS_READ.has(kind as ChildKind) ? informer : { informer, updates: specChanged },
      ),
      secrets,
    ],
    watches: [
      { informer: pods, map: appOfPod },
      { informer: releases, map: appOfRelease },
      { informer: apps, updates: specChanged, map: sameSlugApps(apps) },
    ],
    reconciler: new AppReconciler({
      client: op.client,
      apps,
      children,
      secrets,
      pods,
      releases,
      governance,
      inWorkspace: informers.inWorkspace(),
      events: op.events,
      now: op.now,
      cfg: buildConfig,
    }),
    concurrency: cfg.BERTH_OPERATOR_CONCURRENCY,
    resyncPeriodMs: cfg.BERTH_OPERATOR_RESYNC_SECONDS * 1000,
  });
  return { controller };
}
