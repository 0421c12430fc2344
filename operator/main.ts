// The operator's composition root: config, client, shared informers, controllers, leader
// election, health and metrics. Nothing runs at import time of any other module.
import { createLogger, type Logger } from "../kube/logger.ts";
import { KubeEventRecorder } from "../kube/events.ts";
import { API_VERSION } from "../crds/schemas.ts";
// Only modules that do not load @kubernetes/client-node (its generated code alone is ~60 MiB).
import { loadLeanKubeConfig } from "../kube/kubeconfig.ts";
import type { Informer } from "../kube/informer.ts";
import { ObjectClient, type KubeObject } from "../kube/objects.ts";
import { Manager, Metrics, countKubeRequests, specChanged } from "./runtime/index.ts";
import { loadOperatorConfig, type OperatorConfig } from "./config.ts";
import { CHILD_KINDS, MANAGED_BY, childKinds, type BuildConfig, type ChildKind } from "./app/builders.ts";
import type { ReleaseObject } from "./release/builders.ts";
import { appOfRelease, releaseOfObject, releasesOfApp, ReleaseReconciler } from "./release/reconcile.ts";
import { BuildLogs } from "./release/build-log.ts";
import type { BuildSettings } from "./release/builders.ts";
import { AppReconciler, CHILD_STATUS_READ, appOfPod, sameSlugApps, type AppObject, type AppReconcilerDeps } from "./app/reconcile.ts";
import { HttpGovernanceClient } from "./app/governance.ts";
import { DomainReconciler, domainOfSecret, domainsOfApp, sameDomainClaims } from "./domain/reconcile.ts";
import { CERTIFICATE_API_VERSION } from "./domain/builders.ts";
import { ResolverDnsLookup } from "./domain/dns.ts";

/** The Lease the operator's replicas elect a leader on, in BERTH_LEADER_ELECTION_NAMESPACE. */
export const LEADER_ELECTION_LEASE = "berth-operator";

export interface RunningOperator {
  manager: Manager;
  metrics: Metrics;
  events: KubeEventRecorder;
  stop(): Promise<void>;
}

/** Builds and starts the operator; resolves once its caches are synced. */
export async function startOperator(cfg: OperatorConfig, log: Logger): Promise<RunningOperator> {
  const kc = await loadLeanKubeConfig(cfg.KUBECONFIG, { host: cfg.KUBERNETES_SERVICE_HOST, port: cfg.KUBERNETES_SERVICE_PORT });
  const metrics = new Metrics();
  const manager = new Manager({
    kc,
    log,
    metrics,
    health: { host: cfg.BERTH_OPERATOR_HEALTH_HOST, port: cfg.BERTH_OPERATOR_HEALTH_PORT },
    leaderElection: cfg.BERTH_LEADER_ELECTION
      ? { namespace: cfg.BERTH_LEADER_ELECTION_NAMESPACE, name: LEADER_ELECTION_LEASE, identity: cfg.identity }
      : false,
  });
  countKubeRequests(metrics, manager.rest);
  const client = new ObjectClient(manager.rest);

  const namespace = cfg.BERTH_WATCH_NAMESPACE;
  const buildConfig: BuildConfig = {
    baseDomain: cfg.BERTH_BASE_DOMAIN,
    ingressClassName: cfg.BERTH_INGRESS_CLASS,
    defaultTlsSecret: cfg.BERTH_DEFAULT_TLS_SECRET,
    nodeSelector: cfg.BERTH_WORKLOAD_NODE_SELECTOR,
    tolerations: cfg.BERTH_WORKLOAD_TOLERATIONS,
    edge: edgeConfig(cfg),
    reservedSlugs: cfg.BERTH_RESERVED_SLUGS,
    platformHosts: [cfg.BERTH_INGRESS_HOST, ...cfg.BERTH_PLATFORM_HOSTS],
    buildArea: { registry: cfg.BERTH_BUILD_REGISTRY, prefix: cfg.BERTH_BUILD_REPOSITORY_PREFIX },
  };
  const managedBy = Object.entries(MANAGED_BY)
    .map(([k, v]) => `${k}=${v}`)
    .join(",");
  // The operator never reads managedFields: its caches drop them (a third of each object).
  const apps = manager.informer<AppObject>({
    apiVersion: API_VERSION,
    kind: "App",
    plural: "apps",
    dropManagedFields: true,
    ...(namespace ? { namespace } : {}),
  });
  const children = Object.fromEntries(
    childKinds(buildConfig).map((kind) => [
      kind,
      manager.informer<KubeObject>({
        apiVersion: CHILD_KINDS[kind].apiVersion,
        kind,
        plural: CHILD_KINDS[kind].plural,
        labelSelector: managedBy,
        dropManagedFields: true,
        ...(namespace ? { namespace } : {}),
      }),
    ]),
  ) as AppReconcilerDeps["children"];

  const secrets = manager.informer<KubeObject>({
    apiVersion: "v1",
    kind: "Secret",
    plural: "secrets",
    labelSelector: managedBy,
    dropManagedFields: true,
    ...(namespace ? { namespace } : {}),
  });
  const pods = manager.informer<KubeObject>({
    apiVersion: "v1",
    kind: "Pod",
    plural: "pods",
    labelSelector: managedBy,
    dropManagedFields: true,
    ...(namespace ? { namespace } : {}),
  });
  const releases = manager.informer<ReleaseObject>({
    apiVersion: API_VERSION,
    kind: "Release",
    plural: "releases",
    dropManagedFields: true,
    ...(namespace ? { namespace } : {}),
  });
  const jobs = manager.informer<KubeObject>({
    apiVersion: "batch/v1",
    kind: "Job",
    plural: "jobs",
    labelSelector: managedBy,
    dropManagedFields: true,
    ...(namespace ? { namespace } : {}),
  });
  const events = new KubeEventRecorder(manager.rest, { component: "berth-operator", instance: cfg.identity, log });
  const governance = cfg.BERTH_OPERATOR_API_URL
    ? new HttpGovernanceClient({ baseUrl: cfg.BERTH_OPERATOR_API_URL, tokenFile: cfg.BERTH_OPERATOR_TOKEN_FILE })
    : undefined;

  manager.addController({
    name: "app",
    primary: apps as unknown as Informer<KubeObject>, // the controller only reads names and owner references
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
      { informer: releases as unknown as Informer<KubeObject>, map: appOfRelease },
      { informer: apps as unknown as Informer<KubeObject>, updates: specChanged, map: sameSlugApps(apps) },
    ],
    reconciler: new AppReconciler({
      client,
      apps,
      children,
      secrets,
      pods,
      releases,
      governance,
      events,
      now: () => new Date(),
      cfg: buildConfig,
    }),
    concurrency: cfg.BERTH_OPERATOR_CONCURRENCY,
    resyncPeriodMs: cfg.BERTH_OPERATOR_RESYNC_SECONDS * 1000,
  });
  // The release controller reads build results off the logs of running build pods and is woken
  // when one is printed.
  const buildLogs = new BuildLogs(manager.rest, (req) => releaseController.enqueue(req));
  const releaseController = manager.addController({
    name: "release",
    primary: releases as unknown as Informer<KubeObject>,
    owned: [jobs],
    watches: [
      { informer: pods, map: releaseOfObject },
      { informer: apps as unknown as Informer<KubeObject>, map: releasesOfApp(releases) },
    ],
    reconciler: new ReleaseReconciler({
      client,
      releases,
      apps,
      jobs,
      pods,
      buildLogs,
      metrics,
      build: buildSettings(cfg),
      cfg: buildConfig,
      events,
      now: () => new Date(),
    }),
    concurrency: cfg.BERTH_OPERATOR_CONCURRENCY,
    resyncPeriodMs: cfg.BERTH_OPERATOR_RESYNC_SECONDS * 1000,
  });

  // Domains are watched in every namespace (the claim rule compares them cluster-wide); only the
  // watched namespace's are reconciled. Certificates only when an issuer is configured (cert-manager
  // may not be installed otherwise).
  const domains = manager.informer<KubeObject>({ apiVersion: API_VERSION, kind: "Domain", plural: "domains", dropManagedFields: true });
  const certificates = cfg.BERTH_DOMAIN_ISSUER
    ? manager.informer<KubeObject>({
        apiVersion: CERTIFICATE_API_VERSION,
        kind: "Certificate",
        plural: "certificates",
        labelSelector: managedBy,
        dropManagedFields: true,
        ...(namespace ? { namespace } : {}),
      })
    : undefined;
  manager.addController({
    name: "domain",
    primary: domains,
    // The Domain's status reads its Certificate's; of its Service and Ingress only what it wrote.
    owned: [
      { informer: children.Service, updates: specChanged },
      { informer: children.Ingress, updates: specChanged },
      ...(certificates ? [certificates] : []),
    ],
    watches: [
      { informer: apps as unknown as Informer<KubeObject>, map: domainsOfApp(domains) },
      { informer: secrets, map: domainOfSecret },
      { informer: domains, map: sameDomainClaims(domains) },
    ],
    reconciler: new DomainReconciler({
      client,
      domains,
      apps,
      services: children.Service,
      ingresses: children.Ingress,
      certificates,
      secrets,
      dns: new ResolverDnsLookup(cfg.BERTH_DNS_RESOLVER),
      events,
      now: () => new Date(),
      cfg: {
        baseDomain: cfg.BERTH_BASE_DOMAIN,
        ingressHost: cfg.BERTH_INGRESS_HOST,
        issuer: cfg.BERTH_DOMAIN_ISSUER,
        ingressClassName: cfg.BERTH_INGRESS_CLASS,
        edge: buildConfig.edge,
        namespace,
      },
    }),
    concurrency: cfg.BERTH_OPERATOR_CONCURRENCY,
    resyncPeriodMs: cfg.BERTH_OPERATOR_RESYNC_SECONDS * 1000,
  });

  await manager.start();
  log.info({ identity: cfg.identity, healthPort: manager.healthPort, namespace: namespace ?? "(all)" }, "operator started");
  return {
    manager,
    metrics,
    events,
    stop: async () => {
      await manager.stop();
      buildLogs.stop();
      await events.flush();
    },
  };
}

/**
 * How private Apps are guarded (docs/shares.md): ingress-nginx's annotations when the ingress
 * class is nginx, otherwise a Traefik ForwardAuth Middleware; both call the API's forward-auth
 * endpoint: BERTH_FORWARD_AUTH_URL, or the governance API URL's, or the chart's default Service.
 */
export function edgeConfig(cfg: OperatorConfig): BuildConfig["edge"] {
  const api = cfg.BERTH_OPERATOR_API_URL?.replace(/\/+$/, "") ?? DEFAULT_API_URL;
  return {
    controller: cfg.BERTH_INGRESS_CLASS === "nginx" ? "nginx" : "traefik",
    forwardAuthUrl: cfg.BERTH_FORWARD_AUTH_URL ?? `${api}/api/v1/forward-auth`,
    signInUrl: cfg.BERTH_SIGN_IN_URL,
  };
}

/** The chart's API Service, when nothing else names the API. */
const DEFAULT_API_URL = "http://berth-api.berth-system.svc.cluster.local";

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
  };
}

async function main(): Promise<void> {
  const cfg = loadOperatorConfig();
  const log = createLogger({ level: cfg.BERTH_LOG_LEVEL, base: { component: "operator" } });
  const op = await startOperator(cfg, log);
  let stopping = false;
  const shutdown = (signal: string) => {
    if (stopping) return;
    stopping = true;
    log.info({ signal }, "shutting down");
    op.stop().then(
      () => process.exit(0),
      (err: unknown) => {
        log.error({ err }, "shutdown failed");
        process.exit(1);
      },
    );
  };
  process.on("SIGTERM", () => shutdown("SIGTERM"));
  process.on("SIGINT", () => shutdown("SIGINT"));
}

if (import.meta.main) {
  main().catch((err: unknown) => {
    process.stderr.write(`operator failed to start: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
    process.exit(1);
  });
}
