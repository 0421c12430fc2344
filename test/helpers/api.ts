// The real API server, in-process on 127.0.0.1 (port 0), on a fresh database cloned from the
// migrated template, with a workspace whose namespace is real (the running control plane) and a
// key for it. It talks to Kubernetes as the chart's API ServiceAccount, under the chart's RBAC
// (helpers/identities.ts), and accepts the chart's operator ServiceAccount on operator routes. BERTH_VALIDATE_RESPONSES is on: every response is checked
// against its route's documented schema, so a test that passes proves the OpenAPI document true.
//
//   const api = await startApi({ routes: (s) => appRoutes(...) });
//   t.teardown(() => api.stop());   // or test.after.always
//   const r = await api.fetchJson("POST", `/workspaces/${api.workspaceId}/apps`, { body: {...} });
import { createWriteStream, mkdirSync, type WriteStream } from "node:fs";
import { basename, join } from "node:path";
import { fileURLToPath } from "node:url";
import test from "ava";
import type { MikroORM } from "@mikro-orm/postgresql";
import { loadConfig, type Config } from "../../api/config.ts";
import { openOrm } from "../../api/db/orm.ts";
import { createLogger } from "../../kube/logger.ts";
import { buildServices, composeRoutes, serviceReadiness, startServices, stopServices, type Services } from "../../api/main.ts";
import { buildServer, listenAll, type ReadinessCheck, type RunningServer } from "../../api/server.ts";
import type { AppKeyVerifier, RouteDef } from "../../api/http/route.ts";
import type { NamespaceEnsurer } from "../../api/workspaces/service.ts";
import { KubeClient, loadKubeConfig } from "../../kube/client.ts";
import { resolveShareKey } from "../../api/shares/cookie-key.ts";
import { adminUrl, freshDatabase, query, type TestDatabase } from "./db.ts";
import { deleteNamespace, kube } from "./kube.ts";
import { identity } from "./identities.ts";

export interface StartApiOptions {
  /** Extra routes, or a function building them from the services (workspaces, keys, orm, kubeConfig...). */
  routes?: RouteDef[] | ((services: Services) => RouteDef[]);
  /** Mount the platform's own routes (workspaces, API keys); default true. */
  defaultRoutes?: boolean;
  readiness?: ReadinessCheck[];
  appKeyVerifier?: AppKeyVerifier;
  /** Configuration variables on top of the test defaults (e.g. { BERTH_BODY_LIMIT_BYTES: "2048" }). */
  env?: Record<string, string>;
  /** Replaces the real namespace creation (default: the running control plane). */
  namespaces?: NamespaceEnsurer;
  /** The scoring threads' module (default the real one): test/fixtures/scoring/runaway-worker.ts makes a task run away on demand. */
  scoringWorkerUrl?: URL;
  /** Name of the first workspace. */
  workspaceName?: string;
  /** The clock of the rate limits, in ms (default Date.now): a test moves it instead of waiting. */
  now?: () => number;
  /** Connections in the API's PostgreSQL pool (default 5). */
  poolMax?: number;
}

export interface ApiResponse {
  status: number;
  headers: Headers;
  /** Parsed JSON when the response is JSON (application/json or application/problem+json), else undefined. */
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  body: any;
  text: string;
}

export interface FetchOptions {
  /** JSON-encoded with Content-Type: application/json. */
  body?: unknown;
  /** Sent as is (set the Content-Type yourself in `headers`). */
  rawBody?: string | Uint8Array;
  /** The bearer key; default the first workspace's key; null sends no Authorization header. */
  key?: string | null;
  headers?: Record<string, string>;
  signal?: AbortSignal;
}

export interface TestWorkspace {
  workspaceId: string;
  namespace: string;
  apiKey: string;
  apiKeyId: string;
}

export interface TestApi extends TestWorkspace {
  /** http://127.0.0.1:<port> (the server root; the API is under /api/v1). */
  url: string;
  /** A platform admin key (pa_sk_...). */
  adminKey: string;
  config: Config;
  db: TestDatabase;
  orm: MikroORM;
  services: Services;
  server: RunningServer;
  /** The internal TLS listener (https://127.0.0.1:<port>) when the test gave BERTH_INTERNAL_TLS_* in `env`. */
  internal: RunningServer | undefined;
  /** Every log line the server wrote so far, parsed. */
  logs: Record<string, unknown>[];
  /**
   * A request to the server. `path` is relative to /api/v1 ("/workspaces/..."), except paths that
   * start with /api/ or are the root endpoints /healthz and /readyz, which are used as given.
   */
  fetchJson(method: string, path: string, opts?: FetchOptions): Promise<ApiResponse>;
  /** Another workspace, with a real namespace and a key (cleaned up by stop()). */
  createWorkspace(name?: string): Promise<TestWorkspace>;
  /** Stops the server, closes the ORM, drops the database and deletes the namespaces made here. */
  stop(): Promise<void>;
}

function resolvePath(path: string): string {
  if (path.startsWith("/api/") || /^\/(healthz|readyz)(\?|$)/.test(path)) return path;
  return `/api/v1${path.startsWith("/") ? "" : "/"}${path}`;
}

/**
 * Drops the governance roles (govr_<workspace>_...) of these workspaces. Roles belong to the
 * PostgreSQL cluster, not to a database, so dropping a test database leaves them behind.
 */
export async function dropGovernanceRoles(workspaceIds: readonly string[]): Promise<void> {
  for (const ws of workspaceIds) {
    const roles = await query<{ rolname: string }>(adminUrl(), `select rolname from pg_roles where rolname like $1`, [`govr\\_${ws}\\_%`]);
    for (const r of roles) await query(adminUrl(), `drop role if exists "${r.rolname.replaceAll('"', '""')}"`);
  }
}

export async function startApi(opts: StartApiOptions = {}): Promise<TestApi> {
  const db = await freshDatabase();
  const workspaceIds: string[] = [];
  // runs last (cleanup runs in reverse): after the database, which holds the roles' grants, is gone
  const cleanup: (() => Promise<unknown>)[] = [() => dropGovernanceRoles(workspaceIds), () => db.drop()];
  const runCleanup = async () => {
    for (const f of cleanup.reverse()) await f().catch(() => undefined);
  };
  try {
    const config = loadConfig({
      DATABASE_URL: db.url,
      KUBECONFIG: (await identity("api")).kubeconfig,
      BERTH_API_HOST: "127.0.0.1",
      BERTH_API_PORT: "0",
      BERTH_VALIDATE_RESPONSES: "true",
      BERTH_LOG_LEVEL: "info",
      BERTH_SHUTDOWN_TIMEOUT_MS: "5000",
      // the workspaces' NetworkPolicies as this cluster's node needs them (hack/cluster env)
      ...(process.env.BERTH_WORKSPACE_NETWORK ? { BERTH_WORKSPACE_NETWORK: process.env.BERTH_WORKSPACE_NETWORK } : {}),
      ...opts.env,
    });
    const logs: Record<string, unknown>[] = [];
    const file = logFile();
    cleanup.push(() => new Promise<void>((resolve) => (file ? file.end(resolve) : resolve())));
    const logger = createLogger({
      level: config.BERTH_LOG_LEVEL,
      base: { component: "api" },
      destination: {
        write: (line: string) => {
          logs.push(JSON.parse(line) as Record<string, unknown>);
          file?.write(line);
        },
      },
    });
    const orm = await openOrm(db.url, { poolMax: opts.poolMax ?? 5 });
    cleanup.push(() => orm.close());
    const kubeConfig = loadKubeConfig(config.KUBECONFIG);
    // The share cookie key as the API's main() finds it (under the API's identity).
    const shareKey = await resolveShareKey({
      configured: config.BERTH_SHARE_COOKIE_KEY,
      namespace: config.BERTH_NAMESPACE,
      kube: new KubeClient(kubeConfig),
      log: logger,
    });
    const services = buildServices({
      config,
      orm,
      logger,
      kubeConfig,
      shareKey,
      ...(opts.namespaces ? { namespaces: opts.namespaces } : {}),
      ...(opts.scoringWorkerUrl ? { scoringWorkerUrl: opts.scoringWorkerUrl } : {}),
    });
    await startServices(services);
    cleanup.push(() => stopServices(services));
    const extra = typeof opts.routes === "function" ? opts.routes(services) : (opts.routes ?? []);
    const routes = [...(opts.defaultRoutes === false ? [] : composeRoutes(services)), ...extra];
    const app = buildServer({
      config,
      orm,
      logger,
      routes,
      readiness: [...serviceReadiness(services), ...(opts.readiness ?? [])],
      keys: services.keys,
      adminKeys: services.adminKeys,
      appKeyVerifier: opts.appKeyVerifier ?? services.appKeyVerifier,
      operatorVerifier: services.operatorVerifier,
      sessions: services.sessions,
      console: services.console,
      ...(opts.now ? { now: opts.now } : {}),
    });
    // the listeners as main() opens them: plain, and the internal TLS one when BERTH_INTERNAL_TLS_* are given
    const listeners = await listenAll(app, config, logger);
    const server = listeners.plain;
    cleanup.push(() => listeners.close());

    const k = opts.namespaces ? undefined : kube();
    const createWorkspace = async (name = "test workspace"): Promise<TestWorkspace> => {
      const em = orm.em.fork();
      const { workspace } = await services.workspaces.create(em, { name });
      workspaceIds.push(workspace.id);
      if (k) cleanup.splice(2, 0, () => deleteNamespace(k, workspace.namespace)); // after the server stops
      const { key, secret } = await services.keys.create(em, workspace.id, "test");
      return { workspaceId: workspace.id, namespace: workspace.namespace, apiKey: secret, apiKeyId: key.id };
    };
    const first = await createWorkspace(opts.workspaceName);
    const admin = await services.adminKeys.create(orm.em.fork(), "test admin");

    const fetchJson = async (method: string, path: string, o: FetchOptions = {}): Promise<ApiResponse> => {
      const headers: Record<string, string> = { Accept: "application/json" };
      const key = o.key === undefined ? first.apiKey : o.key;
      if (key !== null) headers.Authorization = `Bearer ${key}`;
      let body: string | Uint8Array | undefined;
      if (o.rawBody !== undefined) body = o.rawBody;
      else if (o.body !== undefined) {
        body = JSON.stringify(o.body);
        headers["Content-Type"] = "application/json";
      }
      Object.assign(headers, o.headers);
      const res = await fetch(server.url + resolvePath(path), { method, headers, body, ...(o.signal ? { signal: o.signal } : {}) });
      const text = await res.text();
      const type = res.headers.get("content-type") ?? "";
      const json = /^application\/(problem\+)?json/.test(type) && text !== "";
      return { status: res.status, headers: res.headers, body: json ? JSON.parse(text) : undefined, text };
    };

    let stopped: Promise<void> | undefined;
    return {
      ...first,
      url: server.url,
      adminKey: admin.secret,
      config,
      db,
      orm,
      services,
      server,
      internal: listeners.internal,
      logs,
      fetchJson,
      createWorkspace,
      stop: () => (stopped ??= runCleanup()),
    };
  } catch (err) {
    await runCleanup();
    throw err;
  }
}

let apiCount = 0;

/**
 * Under ./hack/test, each API's log also goes, line by line, to
 * `$BERTH_LOCAL/logs/api/<test file>-<pid>-<n>.jsonl`: a run that hangs or fails keeps what the API
 * said (tests read `logs`, in memory). Elsewhere, nowhere.
 */
function logFile(): WriteStream | undefined {
  const root = process.env.BERTH_LOCAL;
  if (!root) return undefined;
  const dir = join(root, "logs", "api");
  mkdirSync(dir, { recursive: true });
  const name = basename(fileURLToPath(test.meta.file)).replace(/\.test\.ts$/, "");
  return createWriteStream(join(dir, `${name}-${process.pid}-${++apiCount}.jsonl`), { flags: "w" });
}

/**
 * A ServiceAccount `name` in `namespace` (created when missing) and a fresh token for it from the
 * TokenRequest API: a caller of the internal governance endpoints that is not the operator. The
 * operator's own token is identity("operator") (helpers/identities.ts).
 */
export async function serviceAccountToken(namespace: string, name: string): Promise<string> {
  const k = kube();
  await k.core.createNamespacedServiceAccount({ namespace, body: { metadata: { name } } }).catch((err: unknown) => {
    if ((err as { code?: number }).code !== 409) throw err;
  });
  const tr = await k.core.createNamespacedServiceAccountToken({
    namespace,
    name,
    body: { spec: { audiences: [], expirationSeconds: 3600 } },
  });
  const token = tr.status?.token;
  if (!token) throw new Error(`no token for ServiceAccount ${namespace}/${name}`);
  return token;
}
