// RBAC from code. Each module that talks to the Kubernetes API declares, next to the calls it
// makes, what it does to which resource (an Access). A process's Roles are the union of its
// modules' declarations (operator/rbac.ts, api/rbac.ts), rendered into the Helm chart by
// hack/gen.ts; a test fails when the chart and the code disagree, and every integration test runs
// the processes under those Roles, so a call that is not declared fails a test. Pure: no I/O.

/**
 * The verbs Berth uses. Never wildcards, escalate, impersonate or deletecollection; `bind` only on
 * ClusterRoles named in the grant (Berth's own, to bind them in its workspace namespaces).
 */
export const VERBS = ["get", "list", "watch", "create", "update", "patch", "delete", "bind"] as const;
export type Verb = (typeof VERBS)[number];

/** Verbs that RBAC can narrow to object names (create, list and watch cannot be). */
const NAMEABLE: ReadonlySet<Verb> = new Set(["get", "update", "patch", "delete", "bind"]);

/** Where a grant holds. */
export type Scope = "cluster" | "release" | "workspace";

/**
 * A name the chart gives (it depends on the release): `chartName("api-workspace")` renders as the
 * chart's `berth.componentName` of that component, e.g. berth-api-workspace for release "berth".
 */
export function chartName(component: string): string {
  return `<chart:${component}>`;
}

export interface Access {
  /** API group: "" for the core group. */
  group: string;
  /** Plural resource, or "resource/subresource". */
  resource: string;
  verbs: readonly Verb[];
  /** Only these object names (get, update, patch and delete only). */
  names?: readonly string[];
  /**
   * cluster: in every namespace (a ClusterRole, as Apps live in every workspace namespace);
   * release: only in the namespace Berth is installed in (a Role); workspace: only in workspace
   * namespaces (a ClusterRole the chart renders unbound, bound by a RoleBinding in each workspace
   * namespace as the API creates it: api/workspaces/access.ts). Default cluster.
   */
  scope?: Scope;
  /** Why the grant is needed; rendered as a comment above the rule. */
  why: string;
}

export interface PolicyRule {
  apiGroups: string[];
  resources: string[];
  resourceNames?: string[];
  verbs: Verb[];
}

/** The API group of an apiVersion ("apps/v1" → "apps", "v1" → ""). */
export function groupOf(apiVersion: string): string {
  return apiVersion.includes("/") ? apiVersion.slice(0, apiVersion.indexOf("/")) : "";
}

/** Refuses declarations that RBAC cannot express or that Berth must never hold. */
export function checkAccess(a: Access): void {
  const what = `${a.group || "core"}/${a.resource}`;
  if (!a.resource || a.resource.includes("*") || a.group.includes("*")) throw new Error(`${what}: wildcards are not allowed`);
  if (a.verbs.length === 0) throw new Error(`${what}: no verbs`);
  for (const v of a.verbs) if (!(VERBS as readonly string[]).includes(v)) throw new Error(`${what}: verb ${v} is not allowed`);
  if (a.verbs.includes("bind") && (a.group !== "rbac.authorization.k8s.io" || a.resource !== "clusterroles" || !a.names))
    throw new Error(`${what}: bind is allowed only on ClusterRoles named in the grant`);
  if (a.names) {
    if (a.names.length === 0) throw new Error(`${what}: an empty names list would grant nothing`);
    const unnameable = a.verbs.filter((v) => !NAMEABLE.has(v));
    if (unnameable.length) throw new Error(`${what}: RBAC cannot narrow ${unnameable.join(", ")} by name`);
  }
}

export interface RuleWithReasons {
  rule: PolicyRule;
  why: string[];
}

/**
 * The union of declarations of one scope as rules, one per resource (and names): the verbs and
 * reasons of every declaration of that resource merged. Order follows the first declaration, so
 * the output is stable for a stable input.
 */
export function rulesOf(accesses: readonly Access[], scope: Scope): RuleWithReasons[] {
  const rules = new Map<string, { group: string; resource: string; names: string[] | undefined; verbs: Set<Verb>; why: string[] }>();
  for (const a of accesses) {
    checkAccess(a);
    if ((a.scope ?? "cluster") !== scope) continue;
    const names = a.names ? [...new Set(a.names)].sort() : undefined;
    const key = JSON.stringify([a.group, a.resource, names ?? null]);
    const e = rules.get(key) ?? { group: a.group, resource: a.resource, names, verbs: new Set<Verb>(), why: [] };
    for (const v of a.verbs) e.verbs.add(v);
    if (!e.why.includes(a.why)) e.why.push(a.why);
    rules.set(key, e);
  }
  return [...rules.values()].map((e) => ({
    rule: {
      apiGroups: [e.group],
      resources: [e.resource],
      ...(e.names ? { resourceNames: e.names } : {}),
      verbs: VERBS.filter((v) => e.verbs.has(v)),
    },
    why: e.why,
  }));
}

/** True when `rules` allow `verb` on `group/resource` (named `name`, when given): RBAC's own matching. */
export function allows(rules: readonly PolicyRule[], verb: Verb, group: string, resource: string, name?: string): boolean {
  return rules.some(
    (r) =>
      r.apiGroups.includes(group) &&
      r.resources.includes(resource) &&
      r.verbs.includes(verb) &&
      (!r.resourceNames || (name !== undefined && r.resourceNames.includes(name))),
  );
}

/** Rules as YAML list items (with their reasons as comments), indented by `indent` spaces. */
export function renderRules(rules: readonly RuleWithReasons[], indent: number): string {
  const pad = " ".repeat(indent);
  const list = (xs: readonly string[]) => `[${xs.map((x) => JSON.stringify(x)).join(", ")}]`;
  return rules
    .map(({ rule, why }) =>
      [
        ...why.map((w) => `${pad}# ${w}`),
        `${pad}- apiGroups: ${list(rule.apiGroups)}`,
        `${pad}  resources: ${list(rule.resources)}`,
        ...(rule.resourceNames ? [`${pad}  resourceNames: ${list(rule.resourceNames)}`] : []),
        `${pad}  verbs: ${list(rule.verbs)}`,
      ].join("\n"),
    )
    .join("\n");
}
