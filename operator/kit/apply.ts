// Server-side apply of children, shared by the controllers: the applied-hash that tells a child's
// last apply, the comparison of a desired object with the live one, and converging one child
// without ever adopting a foreign object (docs/operator-runtime.md "What the App reconciler asks
// of the API server").
import { createHash } from "node:crypto";
import type { KubeObject } from "../../kube/objects.ts";
import { isConflict } from "../../kube/transport.ts";
import type { ReadYourWritesCache } from "../../kube/read-your-writes.ts";
import type { Access } from "../../kube/rbac.ts";
import { refOf } from "./objects.ts";

export { MANAGED_BY } from "../../crds/app.ts";
export const HASH_ANNOTATION = "berth.dev/applied-hash";

/** Stamps the hash of the desired object so that a later reconcile can tell its own last apply. */
export function withHash(obj: KubeObject): KubeObject {
  const hash = createHash("sha256").update(stableJson(obj)).digest("hex").slice(0, 16);
  return { ...obj, metadata: { ...obj.metadata, annotations: { ...obj.metadata.annotations, [HASH_ANNOTATION]: hash } } };
}

/** JSON with object keys sorted: equal values, equal text. */
export function stableJson(v: unknown): string {
  if (Array.isArray(v)) return `[${v.map(stableJson).join(",")}]`;
  if (v && typeof v === "object") {
    return `{${Object.keys(v)
      .sort()
      .map((k) => `${JSON.stringify(k)}:${stableJson((v as Record<string, unknown>)[k])}`)
      .join(",")}}`;
  }
  return JSON.stringify(v);
}

/**
 * True when `live` already holds everything `desired` sets: same applied hash and every desired
 * field present with an equal value (so hand edits of owned fields are detected and reverted).
 * Fields the API server adds (defaults, status, clusterIP, ...) are ignored.
 */
export function upToDate(desired: KubeObject, live: KubeObject | undefined): boolean {
  if (!live) return false;
  if (live.metadata.annotations?.[HASH_ANNOTATION] !== desired.metadata.annotations?.[HASH_ANNOTATION]) return false;
  // List items carry no apiVersion/kind, so only metadata and the rest of the body are compared.
  const { metadata: dm, apiVersion: _da, kind: _dk, ...dRest } = desired;
  const { metadata: lm, apiVersion: _la, kind: _lk, ...lRest } = live;
  return (
    contains({ labels: dm.labels, annotations: dm.annotations }, { labels: lm.labels, annotations: lm.annotations }) &&
    contains(dRest, lRest)
  );
}

export function contains(want: unknown, have: unknown): boolean {
  if (want === undefined) return true;
  if (Array.isArray(want)) {
    return Array.isArray(have) && want.length === have.length && want.every((w, i) => contains(w, have[i]));
  }
  if (want && typeof want === "object") {
    if (!have || typeof have !== "object" || Array.isArray(have)) return false;
    return Object.entries(want).every(([k, v]) => contains(v, (have as Record<string, unknown>)[k]));
  }
  return want === have;
}

/** How converging one child ended: the object as it now is (and whether this call created it), or the foreign object in the way. */
export type Converged = { live: KubeObject; created: boolean } | { foreign: KubeObject };

/**
 * Converges one child. A cached child is applied only when it differs from `desired`; one the
 * cache lacks is created by a create-only apply, which the API server refuses with 409 when
 * anything of that name exists, and only then is the object read, to tell a cache that lags
 * behind (ours: applied when it differs) from a foreign object (returned, never touched).
 * `ours` says whether an object is the owner's.
 */
export async function convergeChild(
  cache: ReadYourWritesCache,
  desired: KubeObject,
  cached: KubeObject | undefined,
  ours: (obj: KubeObject) => boolean,
): Promise<Converged> {
  if (cached) {
    if (!ours(cached)) return { foreign: cached };
    return { live: upToDate(desired, cached) ? cached : await cache.apply(desired), created: false };
  }
  try {
    return { live: await cache.applyNew(desired), created: true };
  } catch (err) {
    if (!isConflict(err)) throw err;
    const existing = await cache.fetch<KubeObject>(refOf(desired));
    if (!existing) throw err; // deleted in between: retried with backoff
    if (!ours(existing)) return { foreign: existing };
    return { live: upToDate(desired, existing) ? existing : await cache.apply(desired), created: false };
  }
}

/**
 * The grants of a kind the operator writes as children: read across the cluster (its informers
 * watch them label-selected, and a refused create is read back; these kinds hold no secret), and
 * created, changed (server-side apply) and deleted only in workspace namespaces, where the API
 * binds the operator's workspace ClusterRole. So the operator cannot create a pod-bearing workload
 * (which could mount any Secret of its namespace) or a route anywhere else (docs/security.md
 * "Least privilege").
 */
export function childAccess(group: string, resource: string, why: string, opts: { delete?: boolean } = {}): Access[] {
  return [
    { group, resource, verbs: ["get", "list", "watch"], why: `${why}: watched (label-selected) and read back after a refused create` },
    {
      group,
      resource,
      verbs: opts.delete === false ? ["create", "patch"] : ["create", "patch", "delete"],
      scope: "workspace",
      why: `${why}: applied${opts.delete === false ? "" : " and deleted"}, in workspace namespaces only`,
    },
  ];
}
