// What the registry's token service grants (docs/images.md "Pull credentials"). Pure.
//
// The registry endpoint the nodes pull from asks for a token (distribution's token authentication)
// naming the repositories and actions a pull needs; this decides which of them the caller gets:
//
// - a repository under the workspaces' prefix, `<prefix>/<namespace>/...`, only to the pull
//   credential of that namespace (kube/registry-credentials.ts), and only `pull`;
// - any other repository (the platform's images: berth/pause, the samples, the stacks' base
//   images) to every caller, anonymous or not, and only `pull`;
// - nothing else: no push, no delete, no catalog, no resource type but `repository`.
//
// A request for more than is granted is not refused: the token carries what was granted, and the
// registry answers the rest with 401 (the token specification's behaviour).

/** One entry of a token's `access` claim (and one requested scope). */
export interface Access {
  type: string;
  name: string;
  actions: string[];
}

/** A repository name as distribution accepts it (linear: no nested quantifiers on overlapping classes). */
const COMPONENT = "[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*";
const REPOSITORY = new RegExp(`^${COMPONENT}(?:/${COMPONENT})*$`);
const MAX_NAME = 255;
/** Scopes one request may name (a pull names one repository; a mount two). */
export const MAX_SCOPES = 16;

/**
 * The scopes of a token request: each `scope` parameter, which may itself hold several separated
 * by spaces, as `type:name:actions` (the name may hold a `:`, so the type ends at the first and the
 * actions start after the last). Malformed scopes are dropped; undefined when there are too many.
 */
export function parseScopes(params: readonly string[]): Access[] | undefined {
  const all = params.flatMap((p) => p.split(" ")).filter(Boolean);
  if (all.length > MAX_SCOPES) return undefined;
  const out: Access[] = [];
  for (const s of all) {
    const first = s.indexOf(":");
    const last = s.lastIndexOf(":");
    if (first <= 0 || last === first) continue;
    const actions = s
      .slice(last + 1)
      .split(",")
      .filter(Boolean);
    out.push({ type: s.slice(0, first), name: s.slice(first + 1, last), actions });
  }
  return out;
}

/** Who asks: nobody, or the pull credential of one namespace. */
export type Caller = { kind: "anonymous" } | { kind: "namespace"; namespace: string };

/**
 * What `caller` is granted of `requested`, with the workspaces' images under `prefix/` (the
 * operator's BERTH_BUILD_REPOSITORY_PREFIX, not empty). Scopes granted nothing are left out.
 */
export function grant(caller: Caller, requested: readonly Access[], prefix: string): Access[] {
  if (!prefix) throw new Error("the workspaces' repository prefix must not be empty");
  const under = `${prefix.replace(/\/+$/, "")}/`;
  const out: Access[] = [];
  for (const r of requested) {
    if (r.type !== "repository" || r.name.length > MAX_NAME || !REPOSITORY.test(r.name)) continue;
    if (!r.actions.includes("pull")) continue;
    if (r.name === under.slice(0, -1)) continue; // the prefix itself is no platform image
    if (r.name.startsWith(under)) {
      // a workspace's image is <prefix>/<namespace>/<app>; <prefix>/<namespace> alone is none
      const [namespace, app] = r.name.slice(under.length).split("/");
      if (!app || caller.kind !== "namespace" || caller.namespace !== namespace) continue;
    }
    out.push({ type: "repository", name: r.name, actions: ["pull"] });
  }
  return out;
}
