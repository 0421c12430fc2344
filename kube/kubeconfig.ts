// Credentials for transport.ts without @kubernetes/client-node: a kubeconfig file (current
// context; CA, client certificate and key, bearer token or token file, basic auth, TLS server
// name, insecure-skip-tls-verify, impersonation) or the in-cluster ServiceAccount. A kubeconfig
// whose user needs an exec plugin or an auth provider, or whose cluster has a proxy-url, is
// handed to client-node's KubeConfig, which knows them all (and costs its memory only then).
import { readFileSync } from "node:fs";
import type https from "node:https";
import { dirname, isAbsolute, join } from "node:path";
import { load } from "js-yaml";
import type { KubeAuth } from "./transport.ts";

const SA_DIR = "/var/run/secrets/kubernetes.io/serviceaccount";
/** Token files (projected ServiceAccount tokens) rotate: read again at most this often. */
const TOKEN_REREAD_MS = 60_000;

export interface InClusterService {
  host?: string | undefined;
  port?: string | undefined;
}

interface Cluster {
  server: string;
  caData?: Buffer | undefined;
  caFile?: string | undefined;
  insecure?: boolean | undefined;
  tlsServerName?: string | undefined;
}
interface User {
  certData?: Buffer | undefined;
  certFile?: string | undefined;
  keyData?: Buffer | undefined;
  keyFile?: string | undefined;
  token?: string | undefined;
  tokenFile?: string | undefined;
  username?: string | undefined;
  password?: string | undefined;
  impersonate?: string | undefined;
}

type Raw = Record<string, unknown>;

/** Reads files on demand (a rotated certificate or token is picked up), caching each for a minute. */
class Files {
  private readonly cache = new Map<string, { at: number; data: Buffer }>();
  read(path: string): Buffer {
    const hit = this.cache.get(path);
    if (hit && Date.now() - hit.at < TOKEN_REREAD_MS) return hit.data;
    const data = readFileSync(path);
    this.cache.set(path, { at: Date.now(), data });
    return data;
  }
}

export class LeanKubeConfig implements KubeAuth {
  private readonly cluster: Cluster;
  private readonly user: User;
  private readonly files = new Files();

  constructor(cluster: Cluster, user: User) {
    this.cluster = cluster;
    this.user = user;
  }

  /**
   * The in-cluster ServiceAccount, as client-go's rest.InClusterConfig: `service` is what the
   * kubelet puts in KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT.
   */
  static inCluster(service: InClusterService): LeanKubeConfig {
    const { host, port } = service;
    if (!host || !port)
      throw new Error("not running in a cluster: KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT are unset; set KUBECONFIG");
    const server = `https://${host.includes(":") ? `[${host}]` : host}:${port}`;
    return new LeanKubeConfig({ server, caFile: `${SA_DIR}/ca.crt` }, { tokenFile: `${SA_DIR}/token` });
  }

  getCurrentCluster(): { server: string } {
    return { server: this.cluster.server };
  }

  applyToHTTPSOptions(opts: https.RequestOptions): Promise<void> {
    const { cluster: c, user: u } = this;
    const ca = c.caData ?? (c.caFile ? this.files.read(c.caFile) : undefined);
    if (ca) opts.ca = ca;
    if (c.insecure) opts.rejectUnauthorized = false;
    if (c.tlsServerName) opts.servername = c.tlsServerName;
    const cert = u.certData ?? (u.certFile ? this.files.read(u.certFile) : undefined);
    const key = u.keyData ?? (u.keyFile ? this.files.read(u.keyFile) : undefined);
    if (cert) opts.cert = cert;
    if (key) opts.key = key;
    const headers = (opts.headers ??= {}) as Record<string, string>;
    const token = u.token ?? (u.tokenFile ? this.files.read(u.tokenFile).toString("utf8").trim() : undefined);
    if (token) headers.Authorization = `Bearer ${token}`;
    else if (u.username) opts.auth = `${u.username}:${u.password ?? ""}`;
    if (u.impersonate) headers["Impersonate-User"] = u.impersonate;
    return Promise.resolve();
  }
}

const named = (list: unknown, name: unknown, key: string): Raw | undefined =>
  (Array.isArray(list) ? (list as Raw[]) : []).find((e) => e.name === name)?.[key] as Raw | undefined;

/**
 * Loads a kubeconfig file (its current context), or the in-cluster ServiceAccount when `path`
 * is unset (`inCluster`: the kubelet's KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT). What LeanKubeConfig does not speak (exec plugins, auth providers, proxies) is loaded
 * by client-node instead, whose KubeConfig is a KubeAuth too.
 */
export async function loadLeanKubeConfig(path: string | undefined, inCluster: InClusterService = {}): Promise<KubeAuth> {
  if (!path) return LeanKubeConfig.inCluster(inCluster);
  const doc = load(readFileSync(path, "utf8")) as Raw;
  const ctx = named(doc.contexts, doc["current-context"], "context");
  if (!ctx) throw new Error(`kubeconfig ${path}: no current context`);
  const cluster = named(doc.clusters, ctx.cluster, "cluster");
  const user = named(doc.users, ctx.user, "user") ?? {};
  const server = cluster?.server;
  if (!cluster || typeof server !== "string" || !server) throw new Error(`kubeconfig ${path}: the current context has no cluster server`);
  if (user.exec || user["auth-provider"] || cluster["proxy-url"]) {
    const k8s = await import("@kubernetes/client-node");
    const kc = new k8s.KubeConfig();
    kc.loadFromFile(path);
    return kc;
  }
  const file = (v: unknown) => (typeof v === "string" && v ? (isAbsolute(v) ? v : join(dirname(path), v)) : undefined);
  const data = (v: unknown) => (typeof v === "string" && v ? Buffer.from(v, "base64") : undefined);
  const str = (v: unknown) => (typeof v === "string" && v ? v : undefined);
  return new LeanKubeConfig(
    {
      server,
      caData: data(cluster["certificate-authority-data"]),
      caFile: file(cluster["certificate-authority"]),
      insecure: cluster["insecure-skip-tls-verify"] === true,
      tlsServerName: str(cluster["tls-server-name"]),
    },
    {
      certData: data(user["client-certificate-data"]),
      certFile: file(user["client-certificate"]),
      keyData: data(user["client-key-data"]),
      keyFile: file(user["client-key"]),
      token: str(user.token),
      tokenFile: file(user.tokenFile),
      username: str(user.username),
      password: str(user.password),
      impersonate: str(user.as),
    },
  );
}
