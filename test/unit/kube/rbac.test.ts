// RBAC from code: the chart's Roles are rendered from the declarations next to the calls
// (kube/rbac.ts, operator/rbac.ts, api/rbac.ts); the committed templates must match, and the rule
// building refuses what RBAC cannot express or Berth must never hold.
import test from "ava";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { allows, checkAccess, renderRules, rulesOf, type Access } from "../../../kube/rbac.ts";
import { generateChartRbac } from "../../../hack/lib/chart-rbac.ts";
import { OPERATOR_ACCESS } from "../../../operator/rbac.ts";
import { API_ACCESS } from "../../../api/rbac.ts";

const root = join(import.meta.dirname, "../../..");

for (const [file, text] of generateChartRbac()) {
  test(`charts/berth/templates/${file} matches the code's declarations (run node hack/gen.ts when this fails)`, (t) => {
    t.is(readFileSync(join(root, "charts/berth/templates", file), "utf8"), text);
  });
}

const a = (over: Partial<Access>): Access => ({ group: "apps", resource: "deployments", verbs: ["get"], why: "w", ...over });

test("declarations of one resource merge their verbs (in RBAC's order) and reasons; scopes stay apart", (t) => {
  const rules = rulesOf(
    [
      a({ verbs: ["watch", "list"], why: "cache" }),
      a({ group: "", resource: "secrets", verbs: ["create"], why: "secret" }),
      a({ verbs: ["patch", "get"], why: "apply" }),
      a({ verbs: ["get"], why: "apply" }),
      a({ group: "coordination.k8s.io", resource: "leases", verbs: ["create"], scope: "release", why: "lease" }),
    ],
    "cluster",
  );
  t.deepEqual(rules, [
    { rule: { apiGroups: ["apps"], resources: ["deployments"], verbs: ["get", "list", "watch", "patch"] }, why: ["cache", "apply"] },
    { rule: { apiGroups: [""], resources: ["secrets"], verbs: ["create"] }, why: ["secret"] },
  ]);
});

test("named grants are their own rules, names sorted and deduplicated", (t) => {
  const rules = rulesOf(
    [
      a({ group: "coordination.k8s.io", resource: "leases", verbs: ["create"], scope: "release" }),
      a({ group: "coordination.k8s.io", resource: "leases", verbs: ["update", "get"], names: ["b", "a", "b"], scope: "release" }),
    ],
    "release",
  );
  t.deepEqual(
    rules.map((r) => r.rule),
    [
      { apiGroups: ["coordination.k8s.io"], resources: ["leases"], verbs: ["create"] },
      { apiGroups: ["coordination.k8s.io"], resources: ["leases"], resourceNames: ["a", "b"], verbs: ["get", "update"] },
    ],
  );
});

const refused: [string, Access, RegExp][] = [
  ["a wildcard resource", a({ resource: "*" }), /wildcards/],
  ["a wildcard group", a({ group: "*" }), /wildcards/],
  ["an escalation verb", a({ verbs: ["escalate" as "get"] }), /verb escalate/],
  ["deletecollection", a({ verbs: ["deletecollection" as "get"] }), /verb deletecollection/],
  ["no verbs", a({ verbs: [] }), /no verbs/],
  ["list narrowed by name", a({ verbs: ["list"], names: ["x"] }), /cannot narrow list/],
  ["create narrowed by name", a({ verbs: ["create"], names: ["x"] }), /cannot narrow create/],
  ["an empty names list", a({ names: [] }), /grant nothing/],
  ["bind on any ClusterRole", a({ group: "rbac.authorization.k8s.io", resource: "clusterroles", verbs: ["bind"] }), /bind is allowed only/],
  ["bind on something else", a({ verbs: ["bind"], names: ["x"] }), /bind is allowed only/],
];
for (const [what, access, message] of refused) {
  test(`a declaration is refused: ${what}`, (t) => {
    t.throws(() => checkAccess(access), { message });
    t.throws(() => rulesOf([access], "cluster"), { message });
  });
}

test("rules render as YAML list items with their reasons as comments", (t) => {
  t.is(
    renderRules(rulesOf([a({ verbs: ["get", "list"], why: "because" })], "cluster"), 2),
    '  # because\n  - apiGroups: ["apps"]\n    resources: ["deployments"]\n    verbs: ["get", "list"]',
  );
});

// What the processes do, against the rules they get: a change that drops a grant a call needs
// fails here before it fails in the integration tests.
const OP = [...rulesOf(OPERATOR_ACCESS, "cluster"), ...rulesOf(OPERATOR_ACCESS, "release")].map((r) => r.rule);
const API = rulesOf(API_ACCESS, "cluster").map((r) => r.rule);
/** What the API may do in a workspace namespace: its cluster grants and its workspace ClusterRole. */
const API_IN_WORKSPACE = [...API, ...rulesOf(API_ACCESS, "workspace").map((r) => r.rule)];
const OP_IN_WORKSPACE = [...OP, ...rulesOf(OPERATOR_ACCESS, "workspace").map((r) => r.rule)];

test("the operator may manage its finalizer and status but never an App's spec by update, nor create or delete Apps", (t) => {
  t.true(allows(OP, "patch", "berth.dev", "apps"));
  t.true(allows(OP, "patch", "berth.dev", "apps/status"));
  t.true(allows(OP, "update", "berth.dev", "apps/finalizers"));
  t.false(allows(OP, "update", "berth.dev", "apps"));
  t.false(allows(OP, "create", "berth.dev", "apps"));
  t.false(allows(OP, "delete", "berth.dev", "apps"));
  t.true(allows(OP_IN_WORKSPACE, "create", "", "secrets"));
  t.true(allows(OP, "update", "coordination.k8s.io", "leases", "berth-operator"));
  t.false(allows(OP, "update", "coordination.k8s.io", "leases", "kube-scheduler"));
  t.false(allows(OP, "create", "", "namespaces"));
});

test("the API never touches workloads; of Secrets it reads, creates and patches one at a time (a service's <app>-env and <app>-webhook)", (t) => {
  for (const [group, resource] of [
    ["apps", "deployments"],
    ["", "services"],
    ["batch", "jobs"],
  ] as const) {
    for (const verb of ["get", "list", "create", "patch", "delete"] as const)
      t.false(allows(API, verb, group, resource), `${verb} ${resource}`);
  }
  for (const verb of ["get", "create", "patch"] as const) t.true(allows(API_IN_WORKSPACE, verb, "", "secrets"), `${verb} secrets`);
  for (const verb of ["list", "watch", "update", "delete"] as const)
    t.false(allows(API_IN_WORKSPACE, verb, "", "secrets"), `${verb} secrets`);
  t.true(allows(API, "create", "berth.dev", "releases"));
  t.false(allows(API, "patch", "berth.dev", "releases/status"), "a release's status is the operator's");
  t.true(allows(API, "create", "berth.dev", "apps"));
  t.false(allows(API, "patch", "berth.dev", "apps/status"));
  t.false(allows(API, "delete", "", "namespaces"));
  t.true(allows(API, "list", "networking.k8s.io", "ingresses"), "a domain another Ingress serves is refused");
  for (const verb of ["get", "watch", "create", "patch", "update", "delete"] as const)
    t.false(allows(API, verb, "networking.k8s.io", "ingresses"), `${verb} ingresses`);
});

test("outside workspace namespaces the API reads no Secret, pod or pod log; it binds only its own workspace ClusterRole", (t) => {
  for (const verb of ["get", "list", "watch", "create", "patch", "update", "delete"] as const) {
    t.false(allows(API, verb, "", "secrets"), `${verb} secrets`);
    t.false(allows(API, verb, "", "pods"), `${verb} pods`);
    t.false(allows(API, verb, "", "pods/log"), `${verb} pods/log`);
  }
  t.true(allows(API, "bind", "rbac.authorization.k8s.io", "clusterroles", "<chart:api-workspace>"));
  t.true(allows(API, "bind", "rbac.authorization.k8s.io", "clusterroles", "<chart:operator-workspace>"));
  t.false(allows(API, "bind", "rbac.authorization.k8s.io", "clusterroles", "cluster-admin"));
  t.false(allows(API, "bind", "rbac.authorization.k8s.io", "clusterroles"));
  t.false(allows(API, "create", "rbac.authorization.k8s.io", "clusterrolebindings"));
  t.true(allows(API, "patch", "rbac.authorization.k8s.io", "rolebindings", "berth-api"));
  t.true(allows(API, "patch", "rbac.authorization.k8s.io", "rolebindings", "berth-operator"));
  t.false(allows(API, "patch", "rbac.authorization.k8s.io", "rolebindings", "admin"));
});

test("outside workspace namespaces the operator writes no workload, route or certificate and reads no build log; it reads them everywhere", (t) => {
  for (const [group, resource] of [
    ["apps", "deployments"],
    ["batch", "jobs"],
    ["batch", "cronjobs"],
    ["", "services"],
    ["networking.k8s.io", "ingresses"],
    ["autoscaling", "horizontalpodautoscalers"],
    ["traefik.io", "middlewares"],
    ["cert-manager.io", "certificates"],
  ] as const) {
    for (const verb of ["create", "patch", "delete"] as const) {
      t.false(allows(OP, verb, group, resource), `${verb} ${resource} outside the workspaces`);
      t.true(allows(OP_IN_WORKSPACE, verb, group, resource), `${verb} ${resource} in a workspace`);
    }
    for (const verb of ["get", "list", "watch"] as const) t.true(allows(OP, verb, group, resource), `${verb} ${resource}`);
  }
  t.false(allows(OP, "get", "", "pods/log"));
  t.true(allows(OP_IN_WORKSPACE, "get", "", "pods/log"));
});

test("outside workspace namespaces the operator reads and writes no Secret; it follows the namespaces", (t) => {
  for (const verb of ["get", "list", "watch", "create", "patch", "update", "delete"] as const)
    t.false(allows(OP, verb, "", "secrets", verb === "get" ? "any-secret" : undefined), `${verb} secrets`);
  t.true(allows(OP, "get", "", "secrets", "berth-buildkit-client"), "the build Jobs' client certificate, by name, in Berth's namespace");
  for (const verb of ["get", "list", "watch", "create", "patch", "delete"] as const)
    t.true(allows(OP_IN_WORKSPACE, verb, "", "secrets"), `${verb} secrets in a workspace`);
  t.false(allows(OP_IN_WORKSPACE, "update", "", "secrets"));
  t.true(allows(OP, "watch", "", "namespaces"));
  t.false(allows(OP, "patch", "", "namespaces"));
});
