// The Release controller's wiring: its informers, what wakes a release, and its reconciler
// registered with the Manager. Everything it shares with the other controllers comes from kit/.
import { APP_LABEL } from "../../crds/schemas.ts";
import { phaseOf, RELEASE_LABEL } from "../../crds/release.ts";
import type { Informer } from "../../kube/informer.ts";
import type { KubeObject } from "../../kube/objects.ts";
import type { Request } from "../runtime/controller.ts";
import type { OperatorConfig } from "../config.ts";
import type { OperatorContext, WiredController } from "../kit/context.ts";
import type { ReleaseObject } from "../kit/objects.ts";
import { workloadPlacement } from "../kit/pod.ts";
import { BuildLogs } from "./build-log.ts";
import type { BuildSettings } from "./builders.ts";
import { ReleaseReconciler } from "./reconcile.ts";

/** The Release a Job or a Job's pod belongs to (its berth.dev/release label). */
export function releaseOfObject(obj: KubeObject): Request[] {
  const r = obj.metadata.labels?.[RELEASE_LABEL];
  return r && obj.metadata.namespace ? [{ namespace: obj.metadata.namespace, name: r }] : [];
}

/**
 * The releases of an App, to wake the Release controller when the App appears or changes: a
 * release created right after its App may arrive before the App is in the cache, and a change of
 * the App's status may end a release's rollout.
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

/**
 * The deploying releases of the App an object belongs to (its berth.dev/app label: the App's
 * Deployment, CronJob and pods): a change of the App's workload may end their rollout. An App
 * with no release deploying wakes nothing.
 */
export function deployingReleasesOf(releases: Informer<ReleaseObject>): (obj: KubeObject) => Request[] {
  return (obj) => {
    const app = obj.metadata.labels?.[APP_LABEL];
    const namespace = obj.metadata.namespace;
    if (!app || !namespace) return [];
    return releases
      .list(namespace)
      .filter((r) => r.spec?.appRef?.name === app && phaseOf(r) === "deploying")
      .map((r) => ({ namespace, name: r.metadata.name! }));
  };
}

/** Build settings from the configuration; undefined (builds off) without a builder image, BuildKit and a registry. */
export function buildSettings(cfg: OperatorConfig): BuildSettings | undefined {
  if (!cfg.BERTH_BUILDER_IMAGE || !cfg.BERTH_BUILDKIT_HOST || !cfg.BERTH_BUILD_REGISTRY) return undefined;
  return {
    builderImage: cfg.BERTH_BUILDER_IMAGE,
    buildkitHost: cfg.BERTH_BUILDKIT_HOST,
    registry: cfg.BERTH_BUILD_REGISTRY,
    repositoryPrefix: cfg.BERTH_BUILD_REPOSITORY_PREFIX,
    registryInsecure: cfg.BERTH_BUILD_REGISTRY_INSECURE,
    baseImages: cfg.BERTH_BUILD_BASE_IMAGES ?? {},
    cpuMillicores: cfg.BERTH_BUILD_CPU_MILLICORES,
    memoryMi: cfg.BERTH_BUILD_MEMORY_MI,
    maxPerWorkspace: cfg.BERTH_BUILD_MAX_PER_WORKSPACE,
    storageMi: cfg.BERTH_BUILD_STORAGE_MI,
    timeoutSeconds: cfg.BERTH_BUILD_TIMEOUT_SECONDS,
    cache: cfg.BERTH_BUILD_CACHE,
    network: cfg.BERTH_BUILD_NETWORK,
    ...(cfg.BERTH_BUILDKIT_TLS ? { tls: { secretNamespace: cfg.BERTH_NAMESPACE, serverName: cfg.BERTH_BUILDKIT_TLS_SERVER_NAME } } : {}),
  };
}

/**
 * Registers the Release controller. A release is looked at again when it changes, when its Jobs
 * or their pods do, when a running build pod prints its result (BuildLogs), when its App changes,
 * and, while it deploys, when the App's workload or pods do. The build log streams stop with the
 * operator.
 */
export function wireReleaseController(op: OperatorContext): WiredController {
  const { cfg, informers } = op;
  const releases = informers.releases();
  const apps = informers.apps();
  const jobs = informers.managed("Job");
  const pods = informers.managed("Pod");
  const deployments = informers.managed("Deployment");
  const cronJobs = informers.managed("CronJob");
  const build = buildSettings(cfg);
  // the copies of buildkitd's client certificate (mutual TLS), in the App controller's cache of Berth's Secrets
  const secrets = build?.tls ? informers.secrets() : undefined;
  const deploying = deployingReleasesOf(releases);
  // Build results are read off the logs of running build pods; a printed one wakes its release.
  const buildLogs = new BuildLogs(op.manager.rest, (req) => controller.enqueue(req));
  const controller = op.manager.addController({
    name: "release",
    primary: releases,
    owned: [jobs],
    watches: [
      { informer: pods, map: (pod) => [...releaseOfObject(pod), ...deploying(pod)] },
      { informer: apps, map: releasesOfApp(releases) },
      { informer: deployments, map: deploying },
      { informer: cronJobs, map: deploying },
    ],
    reconciler: new ReleaseReconciler({
      client: op.client,
      releases,
      apps,
      jobs,
      pods,
      deployments,
      cronJobs,
      secrets,
      buildLogs,
      metrics: op.metrics,
      build,
      placement: workloadPlacement(cfg),
      events: op.events,
      now: op.now,
    }),
    concurrency: cfg.BERTH_OPERATOR_CONCURRENCY,
    resyncPeriodMs: cfg.BERTH_OPERATOR_RESYNC_SECONDS * 1000,
  });
  return { controller, stop: () => buildLogs.stop() };
}
