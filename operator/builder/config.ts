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
    credentials: username || password ? { username, password } : undefined,
    resultFile: value("BERTH_BUILD_RESULT_FILE") ?? "/dev/termination-log",
    workspace: value("BERTH_BUILD_WORKSPACE") ?? "/workspace",
    buildctl: value("BERTH_BUILDCTL") ?? "buildctl",
    environment: Object.fromEntries(INHERITED.flatMap((n) => (env[n] === undefined ? [] : [[n, env[n]]]))),
  };
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
