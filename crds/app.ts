// What the API, the operator and kubectl users share about an App beyond its schema: the
// annotations and finalizer through which they talk, the defaults that are not CRD defaults, and
// the rule of the default URL. One definition each; both processes import them from here.
import { z } from "zod";
import { API_VERSION, DNS_LABEL, type AppSpec } from "./schemas.ts";

/** The reference of the App `name` in `namespace`, for reads and writes of it. */
export function appRef(namespace: string, name: string): { apiVersion: string; kind: "App"; namespace: string; name: string } {
  return { apiVersion: API_VERSION, kind: "App", namespace, name };
}

/**
 * App annotations written by the API and read by the operator: the governance key generation
 * the App's Secret must hold (POST .../provision bumps it), and governance switched off
 * (DELETE .../provision). The operator stamps the generation on the Secret and the pod template
 * under the same name.
 */
export const ANNOTATIONS = {
  governanceGeneration: "berth.dev/governance-generation",
  governanceDisabled: "berth.dev/governance-disabled",
} as const;

/**
 * Label of every object Berth writes for an App (children, Secrets): the operator's caches select
 * on it, so an object without it is invisible to the operator.
 */
export const MANAGED_BY = { "app.kubernetes.io/managed-by": "berth" } as const;

/** Finalizer by which the operator drops the App's governance store before the App goes. */
export const GOVERNANCE_FINALIZER = "berth.dev/governance";

type Annotations = Readonly<Record<string, string>> | undefined;

/** The key generation an App asks for: 1 when the annotation is absent or malformed. */
export function governanceGeneration(annotations: Annotations): number {
  const n = Number(annotations?.[ANNOTATIONS.governanceGeneration] ?? 1);
  return Number.isInteger(n) && n >= 1 ? n : 1;
}

/** Whether governance was switched off for the App. */
export function governanceDisabled(annotations: Annotations): boolean {
  return annotations?.[ANNOTATIONS.governanceDisabled] === "true";
}

/** The HPA's CPU target when the App sets none (percent). */
export const DEFAULT_CPU_TARGET = 80;

/** web and api Apps are served (Service, Ingress, a URL); workers and cron jobs are not. */
export function isServed(type: AppSpec["type"]): boolean {
  return type === "web" || type === "api";
}

/** The App's default host: `<slug>.<baseDomain>`. */
export function appHost(spec: Pick<AppSpec, "slug">, baseDomain: string): string {
  return `${spec.slug}.${baseDomain}`;
}

// ---- Hosts: one App per host in the whole platform ------------------------------------------
// Slugs are unique per workspace (the App's name is its slug), but the host <slug>.<baseDomain> is
// shared by every workspace: the first App to hold it keeps it. The API refuses a second one
// (409 host_taken); the operator routes only the holder (an App applied with kubectl that would
// take a held host is refused with reason HostTaken). Every App holds its host whatever its type,
// so that a worker cannot be turned into a web App to take a host another App was given.

/** Slugs no App may have by default: names a platform keeps for itself (BERTH_RESERVED_SLUGS). */
export const DEFAULT_RESERVED_SLUGS: readonly string[] = ["api", "www", "admin", "auth"];

/** BERTH_RESERVED_SLUGS, read alike by the API and the operator: comma-separated DNS labels. */
export const ReservedSlugsVariable = z
  .string()
  .default(DEFAULT_RESERVED_SLUGS.join(","))
  .transform((v) =>
    v
      .split(",")
      .map((x) => x.trim())
      .filter(Boolean),
  )
  .refine((l) => l.every((x) => new RegExp(DNS_LABEL).test(x)), "must be comma-separated DNS labels")
  .describe(
    "Comma-separated slugs no service may take (their hosts <slug>.<baseDomain> are the platform's); the API's and the ingress's own hosts are refused too",
  );

/** Why a slug may not be used: its host is reserved (a reserved slug, or one of the platform's own hosts). Pure. */
export function reservedHostReason(
  slug: string,
  o: { baseDomain: string; reservedSlugs: readonly string[]; platformHosts: readonly (string | undefined)[] },
): string | undefined {
  if (o.reservedSlugs.includes(slug)) return `${slug} is reserved by the platform (BERTH_RESERVED_SLUGS): choose another slug`;
  const host = appHost({ slug }, o.baseDomain);
  if (o.platformHosts.some((h) => h?.toLowerCase() === host)) return `${host} is one of the platform's own hosts: choose another slug`;
  return undefined;
}

type HostClaim = {
  metadata: { name?: string; namespace?: string; uid?: string; creationTimestamp?: Date | string; deletionTimestamp?: Date | string };
  spec?: unknown;
};

const slugOf = (a: HostClaim): string | undefined => (a.spec as { slug?: unknown } | undefined)?.slug as string | undefined;
const createdAt = (a: HostClaim): number =>
  a.metadata.creationTimestamp ? new Date(a.metadata.creationTimestamp).getTime() : Number.MAX_SAFE_INTEGER;

/**
 * The App that holds the host of `slug`: of the Apps with that slug that are not being deleted,
 * the first created (then the smaller uid, so every reader picks the same one). Pure.
 */
export function hostHolder<A extends HostClaim>(apps: readonly A[], slug: string): A | undefined {
  return apps
    .filter((a) => !a.metadata.deletionTimestamp && slugOf(a) === slug)
    .sort((a, b) => createdAt(a) - createdAt(b) || (a.metadata.uid ?? "").localeCompare(b.metadata.uid ?? ""))[0];
}

// ---- Built images: each workspace's own ---------------------------------------------------------
// Builds push to <registry>/<prefix>/<namespace>/<app>; that path is predictable, so without a
// rule a workspace could run (and so read) another's images by naming them as its image. The
// platform's other images in that registry (the base images, berth/...) stay open to all.

/** BERTH_BUILD_REGISTRY and BERTH_BUILD_REPOSITORY_PREFIX, as both the API and the operator read them. */
export interface BuildArea {
  registry?: string | undefined;
  prefix: string;
}

/** Why `image` may not run in `namespace`: it is another namespace's build. Pure. */
export function foreignBuildImage(image: string, namespace: string, area: BuildArea): string | undefined {
  if (!area.registry) return undefined;
  const root = [area.registry.toLowerCase(), ...area.prefix.split("/").filter(Boolean)].join("/") + "/";
  const ref = image.toLowerCase();
  if (!ref.startsWith(root)) return undefined;
  if (ref.startsWith(`${root}${namespace}/`)) return undefined;
  return `${image} is another workspace's build (${root}<namespace>/... belongs to that workspace): a service runs its own builds, or images from elsewhere`;
}

/** The App's default URL, https://<slug>.<baseDomain>; undefined for Apps that are not served. */
export function appUrl(spec: Pick<AppSpec, "slug" | "type">, baseDomain: string): string | undefined {
  return isServed(spec.type) ? `https://${appHost(spec, baseDomain)}` : undefined;
}

// ---- Environment variables -----------------------------------------------------------------
// A service's own variables live in one Secret per App, `<app>-env` in its namespace, written by
// the API (owned by the App, so permanent delete removes it) and mounted by the operator with
// envFrom. The names below are the operator's own: the API refuses to set them, and the operator
// gives its own values precedence anyway (see operator/app/builders.ts).

/** The Secret holding an App's environment variables. */
export function envSecretName(app: string): string {
  return `${app}-env`;
}

/**
 * Annotation of the env Secret: a JSON array of the names whose values may be read back (the
 * variables set with `secret: false`). Every other variable is secret: its value is never returned.
 */
export const ENV_PLAIN_ANNOTATION = "berth.dev/env-plain";

/** Pod template annotation: a hash of the env Secret's data, so that a change of the variables rolls the pods. */
export const ENV_HASH_ANNOTATION = "berth.dev/env-hash";

/**
 * Variables the operator sets in every container (PORT from the spec, the two governance
 * variables from `<app>-governance`). A service can neither set nor override them.
 */
export const OPERATOR_ENV_NAMES: readonly string[] = ["PORT", "GOVDB_CONNECTION", "GOVERNANCE_PROJECT"];

/** Names under this prefix are kept for Berth (the toolkit reads BERTH_GOVERNANCE, for one). */
export const RESERVED_ENV_PREFIX = "BERTH_";

/** POSIX-style variable names: a letter or underscore, then letters, digits and underscores. */
export const ENV_NAME_PATTERN = /^[A-Za-z_][A-Za-z0-9_]*$/;

/** Why `name` cannot be a service's variable, or undefined when it can. */
export function reservedEnvName(name: string): string | undefined {
  if (OPERATOR_ENV_NAMES.includes(name)) return `${name} is set by Berth and cannot be set or overridden`;
  if (name.startsWith(RESERVED_ENV_PREFIX)) return `names starting with ${RESERVED_ENV_PREFIX} are reserved for Berth`;
  return undefined;
}

/**
 * Private services at the edge (docs/shares.md): the ingress asks the API, before each request to
 * a private App, whether it may pass. The operator points the App's route at
 * `<forward-auth base URL>/<namespace>/<app>`; the API serves that path.
 */
export const FORWARD_AUTH = {
  /** The API route (relative to /api/v1) the ingress calls. */
  path: "/forward-auth/:namespace/:appId",
  /** The query parameter of a share link's first visit: ?berth_share=<token>. */
  shareParam: "berth_share",
  /** The query parameter by which the sign-in flow hands a signed-in viewer back to the App's host. */
  loginParam: "berth_login",
  /** The cookie, on the App's host only, that carries a viewer's grant after the first visit. */
  cookie: "berth_share",
  /**
   * The same cookie on an https request: `__Host-` makes the browser keep it only when it was set
   * Secure, for the exact host, on path / and without a Domain, so that no sibling host under the
   * base domain can plant or shadow it (cookie tossing). Plain http (local setups) keeps the plain
   * name, which browsers would refuse with the prefix.
   */
  secureCookie: "__Host-berth_share",
  /** Headers the ingress passes on to the App on an allowed request (set by the API, never by the client). */
  responseHeaders: ["X-Berth-Share", "X-Berth-User"],
  /** The client's headers the check is given (Traefik's authRequestHeaders): the viewer's cookies only. */
  requestHeaders: ["Cookie"],
  /**
   * The most of the API's answer the ingress reads (Traefik's maxResponseBodySize): a refusal is a
   * problem+json of a few hundred bytes, an allowed request's answer is empty.
   */
  maxResponseBytes: 64 * 1024,
} as const;

/** The address the ingress calls for the App `name` in `namespace`. */
export function forwardAuthAddress(baseUrl: string, namespace: string, name: string): string {
  return `${baseUrl.replace(/\/+$/, "")}/${encodeURIComponent(namespace)}/${encodeURIComponent(name)}`;
}
