// The composition root: configuration, logger, ORM, Kubernetes client, services, routes, server.
// Usage: node api/main.ts [--migrate | --migrate-only]
//   --migrate       run pending committed migrations, then serve
//   --migrate-only  run pending committed migrations and exit (the Helm pre-install/upgrade hook)
// Nothing runs when this module is imported (a script may import composeRoutes to write the
// OpenAPI document).
import { randomBytes } from "node:crypto";
import * as k8s from "@kubernetes/client-node";
import type { MikroORM } from "@mikro-orm/postgresql";
import { loadConfig, type Config } from "./config.ts";
import { migrateUp, openOrm } from "./db/orm.ts";
import { createLogger, type Logger } from "../kube/logger.ts";
import { ApiKeyService, PlatformAdminKeyService } from "./auth/keys.ts";
import { apiKeyRoutes } from "./auth/routes.ts";
import type { AppKeyVerifier, OperatorVerifier, RouteDef } from "./http/route.ts";
import { kubeTokenReviewer, operatorVerifier } from "./auth/operator.ts";
import { Governance } from "./governance/service.ts";
import { governanceRoutes } from "./governance/routes.ts";
import { analyticsRoutes } from "./governance/reads/analytics/routes.ts";
import { buildOpenApiDocument, type OpenApiDocument, type OpenApiInfo } from "./http/openapi.ts";
import { Outbound } from "./http/outbound.ts";
import { OutboundPolicy } from "../kube/addresses.ts";
import { RateLimiter } from "./http/limits.ts";
import { consoleRoutes } from "./console/routes.ts";
import { ConsoleSessions } from "./console/sessions.ts";
import { ConsoleSignIn } from "./console/oidc.ts";
import { loadConsole, type ConsoleFiles } from "./console/static.ts";
import { allRoutes, buildServer, listenAll, type ReadinessCheck } from "./server.ts";
import { KubeNamespaceEnsurer, workspaceSetup } from "./workspaces/namespaces.ts";
import { API_FIELD_MANAGER, KubeClient, loadKubeConfig } from "../kube/client.ts";
import { ReadYourWritesCache } from "../kube/read-your-writes.ts";
import { ListWatchInformer, type Informer } from "../kube/informer.ts";
import { API_VERSION } from "../crds/schemas.ts";
import { appRoutes } from "./apps/routes.ts";
import { deploymentRoutes } from "./deployments/routes.ts";
import { DeploymentsService } from "./deployments/service.ts";
import { AppsService, type AppObject } from "./apps/service.ts";
import { EnvService } from "./apps/env.ts";
import { MetricsApiUsageReader } from "./apps/metrics.ts";
import { memberRoutes, workspaceRoutes } from "./workspaces/routes.ts";
import { MembersService } from "./workspaces/members.ts";
import { SharesService, type ShareObject } from "./shares/service.ts";
import { ForwardAuth } from "./shares/forward-auth.ts";
import { OidcSignIn } from "./shares/oidc.ts";
import { resolveShareKey } from "./shares/cookie-key.ts";
import { PgTicketLedger } from "./shares/tickets.ts";
import { shareRoutes } from "./shares/routes.ts";
import { DomainsService } from "./domains/service.ts";
import { domainRoutes } from "./domains/routes.ts";
import { WorkspaceService, type NamespaceEnsurer } from "./workspaces/service.ts";

/** What the route modules are built from. */
export interface Services {
  config: Config;
  orm: MikroORM;
  logger: Logger;
  kubeConfig: k8s.KubeConfig;
  workspaces: WorkspaceService;
  keys: ApiKeyService;
  adminKeys: PlatformAdminKeyService;
  /** Workspace members (console sign-in with the identity provider), managed with the platform admin key. */
  members: MembersService;
  kube: KubeClient;
  /** Watch cache of every App; list, search and stats read it. Started by startServices. */
  appCache: Informer<AppObject>;
  apps: AppsService;
  deployments: DeploymentsService;
  /** A service's environment variables (its `<app>-env` Secret). */
  env: EnvService;
  /** Watch cache of every Share: share links and the edge check of private services read it. Started by startServices. */
  shareCache: Informer<ShareObject>;
  shares: SharesService;
  forwardAuth: ForwardAuth;
  /** The forward-auth check's budget per viewer (BERTH_RATE_LIMIT_EDGE_*). */
  edgeLimiter: RateLimiter;
  /** Viewers' sign-in for requireAuth shares; undefined without an identity provider. */
  signIn: OidcSignIn | undefined;
  domains: DomainsService;
  /** Stores, keys, ingestion, configs and templates of the governance layer. */
  governance: Governance;
  /** Verifies gov_sk_ keys on "app-key" routes (given to buildServer). */
  appKeyVerifier: AppKeyVerifier;
  /** Verifies the operator's ServiceAccount token on "operator" routes (given to buildServer). */
  operatorVerifier: OperatorVerifier;
  /** Console sessions (given to buildServer: a session cookie stands for its key or member). */
  sessions: ConsoleSessions;
  /** Workspace members' console sign-in with the identity provider; undefined without one. */
  consoleSignIn: ConsoleSignIn | undefined;
  /** The console's files (BERTH_CONSOLE_DIR), served under /console; undefined when not configured. */
  console: ConsoleFiles | undefined;
}

export function buildServices(deps: {
  config: Config;
  orm: MikroORM;
  logger: Logger;
  kubeConfig: k8s.KubeConfig;
  namespaces?: NamespaceEnsurer;
  /** The share cookie key (resolveShareKey); a random key of this process when absent (scripts). */
  shareKey?: Buffer;
  /** The scoring threads' module (tests); the real one when absent. */
  scoringWorkerUrl?: URL;
}): Services {
  const { config, orm, logger, kubeConfig } = deps;
  const workspaces = new WorkspaceService({
    orm,
    namespaces: deps.namespaces ?? new KubeNamespaceEnsurer(kubeConfig, workspaceSetup(config)),
    log: logger.child({ component: "workspaces" }),
  });
  const kube = new KubeClient(kubeConfig);
  const appCache = new ListWatchInformer<AppObject>(
    kubeConfig,
    { apiVersion: API_VERSION, kind: "App", plural: "apps" },
    logger.child({ component: "app-cache" }),
  );
  const namespaceOf = (id: string) => workspaces.namespaceOf(id);
  const shareCache = new ListWatchInformer<ShareObject>(
    kubeConfig,
    { apiVersion: API_VERSION, kind: "Share", plural: "shares", dropManagedFields: true },
    logger.child({ component: "share-cache" }),
  );
  // One read-your-writes cache of Apps (and Shares) for every service: what one writes, the others read back.
  const apps = new ReadYourWritesCache(kube, API_FIELD_MANAGER).track("App", appCache).track("Share", shareCache);
  const shareKey = deps.shareKey ?? (config.BERTH_SHARE_COOKIE_KEY ? Buffer.from(config.BERTH_SHARE_COOKIE_KEY, "utf8") : randomBytes(32));
  const signIn =
    config.BERTH_OIDC_ISSUER_URL && config.BERTH_OIDC_CLIENT_ID && config.BERTH_OIDC_CLIENT_SECRET && config.BERTH_OIDC_REDIRECT_URL
      ? new OidcSignIn({
          settings: {
            issuer: config.BERTH_OIDC_ISSUER_URL,
            clientId: config.BERTH_OIDC_CLIENT_ID,
            clientSecret: config.BERTH_OIDC_CLIENT_SECRET,
            redirectUrl: config.BERTH_OIDC_REDIRECT_URL,
            scopes: config.BERTH_OIDC_SCOPES,
          },
          key: shareKey,
          baseDomain: config.BERTH_BASE_DOMAIN,
          log: logger.child({ component: "sign-in" }),
          now: () => new Date(),
        })
      : undefined;
  const keys = new ApiKeyService({ log: logger, maxPerWorkspace: config.BERTH_MAX_KEYS_PER_WORKSPACE });
  const members = new MembersService({ maxPerWorkspace: config.BERTH_MAX_MEMBERS_PER_WORKSPACE });
  const sessions = new ConsoleSessions({
    keys,
    ttlSeconds: config.BERTH_CONSOLE_SESSION_SECONDS,
    maxPerKey: config.BERTH_CONSOLE_MAX_SESSIONS_PER_KEY,
    secure: config.BERTH_PUBLIC_URL?.startsWith("https:") ?? false,
  });
  const governance = new Governance({
    orm,
    apps,
    namespaceOf,
    host: config.BERTH_GOVERNANCE_HOST,
    prices: config.BERTH_MODEL_PRICES,
    workers: config.BERTH_INGEST_WORKERS,
    scoringTaskTimeoutMs: config.BERTH_SCORING_TASK_TIMEOUT_MS,
    scoringWorkerUrl: deps.scoringWorkerUrl,
    modelBudget: { perSecond: config.BERTH_RATE_LIMIT_MODEL_PER_SECOND, burst: config.BERTH_RATE_LIMIT_MODEL_BURST },
    log: logger.child({ component: "governance" }),
  });
  const appsService = new AppsService({
    apps,
    namespaceOf,
    baseDomain: config.BERTH_BASE_DOMAIN,
    governance,
    usage: new MetricsApiUsageReader(kube, logger.child({ component: "metrics" })),
    hosts: {
      reservedSlugs: config.BERTH_RESERVED_SLUGS,
      platformHosts: [config.BERTH_INGRESS_HOST, config.BERTH_PUBLIC_URL ? new URL(config.BERTH_PUBLIC_URL).hostname : undefined],
      ownsNamespace: (ns) => workspaces.ownsNamespace(ns),
    },
    buildArea: { registry: config.BERTH_BUILD_REGISTRY, prefix: config.BERTH_BUILD_REPOSITORY_PREFIX },
  });
  return {
    config,
    orm,
    logger,
    kubeConfig,
    workspaces,
    kube,
    appCache,
    governance,
    shareCache,
    signIn,
    shares: new SharesService({
      cache: apps,
      apps: appsService,
      baseDomain: config.BERTH_BASE_DOMAIN,
      signInConfigured: !!signIn,
      now: () => new Date(),
    }),
    edgeLimiter: new RateLimiter({ perSecond: config.BERTH_RATE_LIMIT_EDGE_PER_SECOND, burst: config.BERTH_RATE_LIMIT_EDGE_BURST }),
    forwardAuth: new ForwardAuth({
      cache: apps,
      key: shareKey,
      sessionSeconds: config.BERTH_SHARE_SESSION_SECONDS,
      signIn,
      tickets: new PgTicketLedger(orm),
      log: logger.child({ component: "forward-auth" }),
      now: () => new Date(),
    }),
    keys,
    adminKeys: new PlatformAdminKeyService({ log: logger }),
    members,
    apps: appsService,
    deployments: new DeploymentsService({
      kube,
      apps: appsService,
      orm,
      publicUrl: config.BERTH_PUBLIC_URL,
      log: logger.child({ component: "deployments" }),
      outbound: new Outbound(new OutboundPolicy({ allow: config.BERTH_OUTBOUND_ALLOW, deny: config.BERTH_OUTBOUND_DENY })),
    }),
    env: new EnvService({ apps: appsService, kube }),
    domains: new DomainsService({
      kube,
      apps: appsService,
      baseDomain: config.BERTH_BASE_DOMAIN,
      ingressHost: config.BERTH_INGRESS_HOST,
      verifyWaitMs: config.BERTH_DOMAIN_VERIFY_WAIT_MS,
      platformHosts: config.BERTH_PUBLIC_URL ? [new URL(config.BERTH_PUBLIC_URL).hostname] : [],
    }),
    appKeyVerifier: governance.keys.verifier(),
    operatorVerifier: operatorVerifier({
      review: kubeTokenReviewer(kubeConfig, config.BERTH_OPERATOR_TOKEN_AUDIENCE),
      username: config.BERTH_OPERATOR_USERNAME,
      audience: config.BERTH_OPERATOR_TOKEN_AUDIENCE,
    }),
    sessions,
    consoleSignIn: signIn ? new ConsoleSignIn({ oidc: signIn, key: shareKey, members, sessions, now: () => new Date() }) : undefined,
    console: config.BERTH_CONSOLE_DIR ? loadConsole(config.BERTH_CONSOLE_DIR) : undefined,
  };
}

/**
 * Starts what the services need before the server takes requests: the watch caches, and governance
 * stores made by an older store template completed to the current one (the analytics read the
 * rollups it adds).
 */
export async function startServices(s: Services): Promise<void> {
  await s.governance.provisioning.upgradeStores();
  await Promise.all([s.appCache.start(), s.shareCache.start()]);
}

export async function stopServices(s: Services): Promise<void> {
  await s.appCache.stop();
  await s.shareCache.stop();
  await s.governance.close();
}

/** Readiness of the services themselves (the server adds the database). */
export function serviceReadiness(s: Services): ReadinessCheck[] {
  return [
    { name: "app-cache", check: () => Promise.resolve(s.appCache.synced) },
    { name: "share-cache", check: () => Promise.resolve(s.shareCache.synced) },
  ];
}

/** Every module's routes. */
export function composeRoutes(s: Services): RouteDef[] {
  return [
    ...workspaceRoutes({ workspaces: s.workspaces, keys: s.keys }),
    ...memberRoutes({ members: s.members }),
    ...apiKeyRoutes({ keys: s.keys }),
    ...appRoutes(s.apps, s.env),
    ...deploymentRoutes(s.deployments),
    ...shareRoutes({
      shares: s.shares,
      forwardAuth: s.forwardAuth,
      signIn: () => s.signIn,
      otherFlows: () => (s.consoleSignIn ? [s.consoleSignIn] : []),
      edgeLimiter: s.edgeLimiter,
    }),
    ...domainRoutes(s.domains),
    ...governanceRoutes(s.governance, { ingestBodyLimitBytes: () => s.config.BERTH_INGEST_BODY_LIMIT_BYTES }),
    ...analyticsRoutes({ governance: s.governance }),
    ...consoleRoutes({ sessions: s.sessions, signIn: () => s.consoleSignIn }),
    // ---- Module routes are added here. ----------------------------------------------------
  ];
}

/**
 * The OpenAPI document of the whole API, without a database or a cluster: route factories only
 * keep their services for the handlers, which never run here. For scripts that write it to disk.
 */
export function openApiDocument(info?: OpenApiInfo): OpenApiDocument {
  const unavailable = (what: string): never => {
    throw new Error(`${what} is not available when only documenting the API`);
  };
  const services = new Proxy(
    {},
    {
      get: (_t, name) => new Proxy(() => undefined, { get: () => unavailable(String(name)), apply: () => unavailable(String(name)) }),
    },
  ) as Services;
  return buildOpenApiDocument(allRoutes(composeRoutes(services), info), info);
}

export function kubeReadiness(kc: k8s.KubeConfig): ReadinessCheck {
  const version = kc.makeApiClient(k8s.VersionApi);
  return {
    name: "kubernetes",
    check: async () => {
      await version.getCode();
      return true;
    },
  };
}

async function main(argv: string[]): Promise<void> {
  const config = loadConfig();
  const logger = createLogger({ level: config.BERTH_LOG_LEVEL, base: { component: "api" } });
  const orm = await openOrm(config.DATABASE_URL, { debug: config.BERTH_DB_DEBUG });
  if (argv.includes("--migrate") || argv.includes("--migrate-only")) {
    const applied = await migrateUp(orm);
    logger.info({ applied }, applied.length ? "migrations applied" : "no pending migrations");
    if (argv.includes("--migrate-only")) {
      await orm.close();
      return;
    } // the Helm migration hook
  }
  const kubeConfig = loadKubeConfig(config.KUBECONFIG);
  const shareKey = await resolveShareKey({
    configured: config.BERTH_SHARE_COOKIE_KEY,
    namespace: config.BERTH_NAMESPACE,
    kube: new KubeClient(kubeConfig),
    log: logger.child({ component: "share-key" }),
  });
  const services = buildServices({ config, orm, logger, kubeConfig, shareKey });
  await startServices(services);
  const app = buildServer({
    config,
    orm,
    logger,
    routes: composeRoutes(services),
    readiness: [kubeReadiness(kubeConfig), ...serviceReadiness(services)],
    keys: services.keys,
    adminKeys: services.adminKeys,
    appKeyVerifier: services.appKeyVerifier,
    operatorVerifier: services.operatorVerifier,
    sessions: services.sessions,
    console: services.console,
  });
  const running = await listenAll(app, config, logger);
  logger.info({ url: running.plain.url, docs: `${running.plain.url}/api/v1/docs` }, `listening on ${running.plain.url}`);
  if (running.internal) logger.info({ url: running.internal.url }, `listening on ${running.internal.url} (internal, TLS)`);
  // What this version gives a workspace namespace reaches the ones made before it (in the background).
  const ensuring = new AbortController();
  void services.workspaces
    .ensureAll(ensuring.signal)
    .catch((err: unknown) => logger.error({ err }, "could not list the workspaces to ensure their namespaces"));

  let stopping = false;
  const stop = (signal: string) => {
    if (stopping) {
      logger.warn({ signal }, "second signal: exiting now");
      process.exit(1);
    }
    stopping = true;
    ensuring.abort();
    logger.info({ signal }, "stopping");
    void running
      .close()
      .then(() => stopServices(services))
      .then(() => orm.close())
      .then(() => {
        logger.info("stopped");
        process.exit(0);
      })
      .catch((err: unknown) => {
        logger.error({ err }, "shutdown failed");
        process.exit(1);
      });
  };
  process.on("SIGTERM", () => stop("SIGTERM"));
  process.on("SIGINT", () => stop("SIGINT"));
}

if (import.meta.main) {
  try {
    await main(process.argv.slice(2));
  } catch (err) {
    process.stderr.write(`berth-api: ${err instanceof Error ? err.message : String(err)}\n`);
    process.exit(1);
  }
}
