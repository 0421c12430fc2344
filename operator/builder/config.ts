// The build program's configuration (docs/builds.md, "The contract"): the environment of the build
// Job's container, read once. The builder image carries no node_modules, so this is checked by
// hand rather than with zod. A bad value is a ConfigError that names the step it belongs to.
import type { BaseImages } from "./detect.ts";
import { STACKS } from "./detect.ts";
import { parseCidrList } from "../../kube/addresses.ts";

export type Step = "clone" | "detect" | "build" | "push";

/**
 * The build program's last log line is this prefix and the result's JSON, the same as its
 * termination message: the operator reads it off the followed log, before the kubelet reports the
 * container's exit (operator/release/build-log.ts).
 */
export const RESULT_LINE_PREFIX = "[result] ";

export interface BuildConfig {
  repoUrl: string;
  commit: string;
  branch: string | undefined;
  /** relative path of the Dockerfile in the repository; undefined: detect the stack */
  dockerfile: string | undefined;
  /** the repository pushed to, without a tag */
  image: string;
  tag: string;
  /** plain HTTP to the registry */
  insecure: boolean;
  /**
   * The registry cache of this App (repository:tag), imported before and exported after the build
   * (BuildKit's `type=registry`, mode=max); undefined: buildkitd's own cache only.
   */
  cacheRef: string | undefined;
  baseImages: BaseImages;
  /** The suffix of the generated plans' BuildKit cache ids (BERTH_BUILD_CACHE_SCOPE): an App's own, which no other build can name. */
  cacheScope: string | undefined;
  /**
   * How RUN steps reach the network (BERTH_BUILD_NETWORK): "proxy" (the default), only through
   * BuildKit's own HTTP(S) proxy, whose requests the build's source policy judges, never to
   * loopback or private addresses; "daemon", on buildkitd's own network as it is configured.
   */
  network: "proxy" | "daemon";
  /**
   * Mutual TLS to buildkitd (BERTH_BUILDKIT_TLS_CA, _CERT, _KEY: PEM texts from the Secret
   * berth-buildkit-client the operator copies into the namespace; _SERVER_NAME optional): written to
   * files only buildctl reads, never passed on in an environment, an argument or a log line.
   * undefined: plain TCP, as buildkitd is reached without it.
   */
  tls: BuildkitTls | undefined;
  /** from the Job's Secret; only ever passed to git through its environment */
  credentials: { username: string; password: string } | undefined;
  /** where the JSON result goes (the container's termination log) */
  resultFile: string;
  /** the working directory (an emptyDir) */
  workspace: string;
  /** the buildctl binary (on PATH in the builder image) */
  buildctl: string;
  /** what git and buildctl inherit: PATH, BUILDKIT_HOST, proxies, CA bundles, TZ, LANG (never the Git credentials) */
  environment: Record<string, string>;
}

/** The client side of mutual TLS to buildkitd: PEM texts, each ending in a newline. */
export interface BuildkitTls {
  /** the CA that signed buildkitd's certificate */
  ca: string;
  /** the build's client certificate, which buildkitd checks against its own CA */
  cert: string;
  key: string;
  /** the name buildkitd's certificate is checked against; undefined: the host of BUILDKIT_HOST */
  serverName: string | undefined;
}

/** The variables that carry mutual TLS to buildkitd (docs/builds.md "mTLS"). */
export const TLS_VARIABLES = {
  ca: "BERTH_BUILDKIT_TLS_CA",
  cert: "BERTH_BUILDKIT_TLS_CERT",
  key: "BERTH_BUILDKIT_TLS_KEY",
  serverName: "BERTH_BUILDKIT_TLS_SERVER_NAME",
} as const;

/** The variables the commands inherit from the container's environment. */
export const INHERITED = [
  "PATH",
  "BUILDKIT_HOST",
  "LANG",
  "TZ",
  "SSL_CERT_FILE",
  "SSL_CERT_DIR",
  "GIT_SSL_CAINFO",
  "HTTP_PROXY",
  "HTTPS_PROXY",
  "NO_PROXY",
  "http_proxy",
  "https_proxy",
  "no_proxy",
];

export class ConfigError extends Error {
  readonly step: Step;
  constructor(step: Step, message: string) {
    super(message);
    this.step = step;
  }
}

/** A repository path without surprises: relative, no "..", no backslashes or NUL. */
export function safeRelativePath(p: string): boolean {
  return p !== "" && !p.startsWith("/") && !/[\\\0]/.test(p) && !p.split("/").some((s) => s === "..");
}

/**
 * An image repository without a tag or digest ("host[:port]/path"), as buildctl's CSV options take
 * it: no "@", no ":" after the host, and none of the CSV's own characters (",", "=", quotes) or spaces.
 */
function isRepository(r: string): boolean {
  return !/[@\s,="]/.test(r) && !/:/.test(r.replace(/^[^/]*\//, ""));
}

/** An image tag (the OCI distribution spec's grammar). */
const isTag = (t: string): boolean => /^[\w][\w.-]{0,127}$/.test(t);

export function parseConfig(env: Readonly<Record<string, string | undefined>>): BuildConfig {
  const value = (name: string) => {
    const v = env[name]?.trim();
    return v === "" ? undefined : v;
  };
  const required = (name: string, step: Step) => {
    const v = value(name);
    if (!v) throw new ConfigError(step, `${name} is not set`);
    return v;
  };

  const repoUrl = required("BERTH_BUILD_REPO_URL", "clone");
  let url: URL;
  try {
    url = new URL(repoUrl);
  } catch {
    throw new ConfigError("clone", `BERTH_BUILD_REPO_URL is not a URL`);
  }
  if (url.protocol !== "http:" && url.protocol !== "https:")
    throw new ConfigError("clone", `BERTH_BUILD_REPO_URL must be an http:// or https:// URL, not ${url.protocol}`);
  if (url.username || url.password)
    throw new ConfigError(
      "clone",
      "BERTH_BUILD_REPO_URL must not carry credentials: they come from GIT_USERNAME and GIT_PASSWORD (a Secret)",
    );
  const commit = required("BERTH_BUILD_COMMIT", "clone").toLowerCase();
  if (!/^[0-9a-f]{40}$/.test(commit)) throw new ConfigError("clone", "BERTH_BUILD_COMMIT must be a full commit sha (40 hex digits)");
  const username = env.GIT_USERNAME ?? "";
  const password = env.GIT_PASSWORD ?? "";

  const dockerfile = value("BERTH_BUILD_DOCKERFILE")?.replace(/^(\.\/)+/, "");
  if (dockerfile !== undefined && !safeRelativePath(dockerfile))
    throw new ConfigError("detect", "the Dockerfile path must be relative to the repository's root, without ..");
  let baseImages: BaseImages = {};
  const basesText = value("BERTH_BUILD_BASE_IMAGES");
  if (basesText) {
    let parsed: unknown;
    try {
      parsed = JSON.parse(basesText);
    } catch {
      throw new ConfigError("detect", "BERTH_BUILD_BASE_IMAGES is not JSON");
    }
    if (typeof parsed !== "object" || parsed === null || Array.isArray(parsed))
      throw new ConfigError("detect", "BERTH_BUILD_BASE_IMAGES must be a JSON object");
    const entries = Object.entries(parsed as Record<string, unknown>).filter(
      ([k, v]) => (STACKS as readonly string[]).includes(k) && typeof v === "string" && v.trim() !== "",
    );
    baseImages = Object.fromEntries(entries.map(([k, v]) => [k, (v as string).trim()]));
  }

  const cacheScope = value("BERTH_BUILD_CACHE_SCOPE");
  if (cacheScope !== undefined && !/^[a-z0-9]{8,64}$/.test(cacheScope))
    throw new ConfigError("detect", "BERTH_BUILD_CACHE_SCOPE must be 8-64 characters of a-z and 0-9");

  const network = value("BERTH_BUILD_NETWORK") ?? "proxy";
  if (network !== "proxy" && network !== "daemon") throw new ConfigError("build", "BERTH_BUILD_NETWORK must be proxy or daemon");

  const image = required("BERTH_BUILD_IMAGE", "build");
  if (!isRepository(image))
    throw new ConfigError("build", "BERTH_BUILD_IMAGE must be a repository without a tag or digest (e.g. 127.0.0.1:5000/apps/ns/app)");
  const tag = required("BERTH_BUILD_TAG", "build");
  if (!isTag(tag)) throw new ConfigError("build", "BERTH_BUILD_TAG is not a valid image tag");
  const cacheRef = value("BERTH_BUILD_CACHE_REF");
  const cacheTagAt = cacheRef?.lastIndexOf(":") ?? -1;
  if (cacheRef !== undefined && !(cacheTagAt > 0 && isRepository(cacheRef.slice(0, cacheTagAt)) && isTag(cacheRef.slice(cacheTagAt + 1)))) {
    throw new ConfigError(
      "build",
      "BERTH_BUILD_CACHE_REF must be a repository and a tag (e.g. 127.0.0.1:5000/apps/ns/app:buildcache), without a digest",
    );
  }

  const tls = tlsConfig(env);

  return {
    repoUrl,
    commit,
    branch: value("BERTH_BUILD_BRANCH"),
    dockerfile,
    image,
    tag,
    insecure: value("BERTH_BUILD_REGISTRY_INSECURE") === "true",
    cacheRef,
    baseImages,
    cacheScope,
    network,
    tls,
    credentials: username || password ? { username, password } : undefined,
    resultFile: value("BERTH_BUILD_RESULT_FILE") ?? "/dev/termination-log",
    workspace: value("BERTH_BUILD_WORKSPACE") ?? "/workspace",
    buildctl: value("BERTH_BUILDCTL") ?? "buildctl",
    environment: Object.fromEntries(INHERITED.flatMap((n) => (env[n] === undefined ? [] : [[n, env[n]]]))),
  };
}

/**
 * Mutual TLS to buildkitd from the environment: the CA, the certificate and the key together (PEM),
 * or none of them. A message names the variable that is wrong, never its text.
 */
function tlsConfig(env: Readonly<Record<string, string | undefined>>): BuildkitTls | undefined {
  const text = (name: string) => {
    const v = env[name];
    return v === undefined || v.trim() === "" ? undefined : `${v.trim()}\n`;
  };
  const ca = text(TLS_VARIABLES.ca);
  const cert = text(TLS_VARIABLES.cert);
  const key = text(TLS_VARIABLES.key);
  const serverName = env[TLS_VARIABLES.serverName]?.trim() || undefined;
  if (!ca && !cert && !key) {
    if (serverName) throw new ConfigError("build", `${TLS_VARIABLES.serverName} is set without ${TLS_VARIABLES.ca}, _CERT and _KEY`);
    return undefined;
  }
  const missing = (["ca", "cert", "key"] as const).filter((k) => !{ ca, cert, key }[k]).map((k) => TLS_VARIABLES[k]);
  if (missing.length)
    throw new ConfigError("build", `mutual TLS to buildkitd needs the CA, the certificate and the key: ${missing.join(" and ")} not set`);
  const certificate = /-----BEGIN CERTIFICATE-----[\s\S]+-----END CERTIFICATE-----/;
  if (!certificate.test(ca!)) throw new ConfigError("build", `${TLS_VARIABLES.ca} is not a PEM certificate`);
  if (!certificate.test(cert!)) throw new ConfigError("build", `${TLS_VARIABLES.cert} is not a PEM certificate`);
  if (!/-----BEGIN ([A-Z]+ )?PRIVATE KEY-----[\s\S]+-----END ([A-Z]+ )?PRIVATE KEY-----/.test(key!))
    throw new ConfigError("build", `${TLS_VARIABLES.key} is not a PEM private key`);
  if (serverName !== undefined && !/^[A-Za-z0-9.:-]{1,253}$/.test(serverName))
    throw new ConfigError("build", `${TLS_VARIABLES.serverName} must be a host name or an IP address`);
  return { ca: ca!, cert: cert!, key: key!, serverName };
}

/** The configuration of this process's environment. */
export function fromEnvironment(): BuildConfig {
  return parseConfig(process.env);
}

/** The builds' egress proxy (./egress.ts): where it listens and which ranges it opens or closes on top of the defaults. */
export interface EgressConfig {
  /** host:port (BERTH_EGRESS_LISTEN, default 0.0.0.0:3128: beside buildkitd in its pod) */
  listen: string;
  /** CIDRs reachable although refused by default (BERTH_EGRESS_ALLOW: an internal package mirror) */
  allow: string[];
  /** CIDRs refused on top of the defaults (BERTH_EGRESS_DENY: the cluster's ranges where they are public) */
  deny: string[];
}

export function egressConfig(env: Readonly<Record<string, string | undefined>> = process.env): EgressConfig {
  const listen = env.BERTH_EGRESS_LISTEN?.trim() || "0.0.0.0:3128";
  if (!/^(\[[0-9a-fA-F:.]+\]|[0-9.]+|[a-z0-9.-]+):\d{1,5}$/.test(listen)) throw new Error("BERTH_EGRESS_LISTEN must be host:port");
  const list = (name: string) => {
    try {
      return parseCidrList(env[name] ?? "");
    } catch (err) {
      throw new Error(`${name}: ${(err as Error).message}`, { cause: err });
    }
  };
  return { listen, allow: list("BERTH_EGRESS_ALLOW"), deny: list("BERTH_EGRESS_DENY") };
}
