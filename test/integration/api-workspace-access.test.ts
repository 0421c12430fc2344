// The API's grants end at the workspaces (docs/security.md "Least privilege"). Secrets, pods and
// their logs, quota, limits and NetworkPolicies are the API's only in workspace namespaces, by a
// RoleBinding it applies as it ensures each one; the chart's admission policy keeps it from binding
// anywhere else or making another namespace a workspace. Tried as a compromised API would, with
// the API's own token (the chart's ServiceAccount), against the real API server.
import test from "ava";
import * as k8s from "@kubernetes/client-node";
import { loadKubeConfig } from "../../kube/client.ts";
import { OPERATOR_WORKSPACE_BINDING, WORKSPACE_BINDING } from "../../api/workspaces/access.ts";
import { startApi, type TestApi } from "../helpers/api.ts";
import { bindOperatorWorkspaceRole, identity, usernameOf } from "../helpers/identities.ts";
import { kubectl } from "../helpers/binaries.ts";
import { apiError, deleteNamespace, eventually, kube, testNamespace, uniqueName } from "../helpers/kube.ts";

const k = kube();
const rbacAdmin = k.kc.makeApiClient(k8s.RbacAuthorizationV1Api);
let api: TestApi;
/** A namespace that is not a workspace, with a Secret a compromised API would want. */
let victim: string;
/** The API's own clients: nothing but its ServiceAccount's token. */
let asApi: { core: k8s.CoreV1Api; rbac: k8s.RbacAuthorizationV1Api };
const WORKSPACE_ROLE = "berth-api-workspace";

test.before(async () => {
  api = await startApi();
  victim = await testNamespace(k, "victim");
  await k.core.createNamespacedSecret({
    namespace: victim,
    body: { metadata: { name: "db-password" }, stringData: { password: "hunter2" } },
  });
  const kc = loadKubeConfig((await identity("api")).kubeconfig);
  asApi = { core: kc.makeApiClient(k8s.CoreV1Api), rbac: kc.makeApiClient(k8s.RbacAuthorizationV1Api) };
});
test.after.always(async () => {
  await api?.stop();
  if (victim) await deleteNamespace(k, victim);
});

/** What RBAC alone says of the API's user (kubectl auth can-i --as). */
const rbacAllows = async (verb: string, resource: string, ns: string) =>
  (await kubectl(["auth", "can-i", verb, resource, "-n", ns, `--as=${usernameOf("api")}`])).code === 0;

const refusal = async (p: Promise<unknown>) => {
  try {
    await p;
  } catch (err) {
    return apiError(err);
  }
  return undefined;
};

const apiSubject = () => ({ kind: "ServiceAccount", namespace: "berth-system", name: "berth-api" });

test("a workspace namespace gets the API's RoleBinding; the API reads Secrets there and nowhere else", async (t) => {
  const binding = await rbacAdmin.readNamespacedRoleBinding({ namespace: api.namespace, name: WORKSPACE_BINDING });
  t.is(binding.roleRef.name, WORKSPACE_ROLE);
  t.deepEqual(
    binding.subjects?.map((s) => ({ kind: s.kind, namespace: s.namespace, name: s.name })),
    [apiSubject()],
  );
  await k.core.createNamespacedSecret({ namespace: api.namespace, body: { metadata: { name: "mine" }, stringData: { a: "b" } } });
  const mine = await asApi.core.readNamespacedSecret({ namespace: api.namespace, name: "mine" });
  t.is(Buffer.from(mine.data!.a!, "base64").toString(), "b", "the API's own token reads a workspace's Secret");

  const read = await refusal(asApi.core.readNamespacedSecret({ namespace: victim, name: "db-password" }));
  t.is(read?.code, 403, "a Secret outside the workspaces");
  const pods = await refusal(asApi.core.listNamespacedPod({ namespace: "kube-system" }));
  t.is(pods?.code, 403, "pods (their specs, their logs) outside the workspaces");
});

test("with the workspace ClusterRole bound in a namespace, the API reads its Secrets: the binding is the wall", async (t) => {
  // What the admission policy below keeps the API from doing for itself, done by an admin.
  const ns = await testNamespace(k, "bound");
  t.teardown(() => deleteNamespace(k, ns));
  await k.core.createNamespacedSecret({ namespace: ns, body: { metadata: { name: "s" }, stringData: { a: "b" } } });
  t.is((await refusal(asApi.core.readNamespacedSecret({ namespace: ns, name: "s" })))?.code, 403);
  await rbacAdmin.createNamespacedRoleBinding({
    namespace: ns,
    body: {
      metadata: { name: WORKSPACE_BINDING },
      roleRef: { apiGroup: "rbac.authorization.k8s.io", kind: "ClusterRole", name: WORKSPACE_ROLE },
      subjects: [apiSubject()],
    },
  });
  await eventually("the binding to take effect", () => asApi.core.readNamespacedSecret({ namespace: ns, name: "s" }), 15_000);
  t.pass();
});

test("the API cannot bind its workspace role outside the workspaces: RBAC would allow it, the admission policy refuses", async (t) => {
  t.true(await rbacAllows("create", "rolebindings", victim), "RBAC alone lets the API create RoleBindings anywhere");
  const err = await refusal(
    asApi.rbac.createNamespacedRoleBinding({
      namespace: victim,
      body: {
        metadata: { name: WORKSPACE_BINDING },
        roleRef: { apiGroup: "rbac.authorization.k8s.io", kind: "ClusterRole", name: WORKSPACE_ROLE },
        subjects: [apiSubject()],
      },
    }),
  );
  t.is(err?.code, 403);
  t.regex(err!.message, /ValidatingAdmissionPolicy 'berth-api-workspace'.*binds roles only in workspace namespaces/);
  t.is((await refusal(asApi.core.readNamespacedSecret({ namespace: victim, name: "db-password" })))?.code, 403);
});

test("the API cannot make another namespace a workspace: RBAC would allow the label, the admission policy refuses", async (t) => {
  t.true(await rbacAllows("patch", "namespaces", victim));
  const err = await refusal(
    asApi.core.patchNamespace(
      { name: victim, body: { metadata: { labels: { "berth.dev/workspace": "wsvictim0000" } } } },
      k8s.setHeaderOptions("Content-Type", k8s.PatchStrategy.MergePatch),
    ),
  );
  t.is(err?.code, 403);
  t.regex(err!.message, /does not add, change or remove the workspace label/);
  const created = await refusal(
    asApi.core.createNamespace({
      body: { metadata: { name: uniqueName("kube-evil"), labels: { "berth.dev/workspace": "wsevil000000" } } },
    }),
  );
  t.is(created?.code, 403);
  t.regex(created!.message, /named berth-<workspace id>/);
  // Nor another workspace's: the label of an existing workspace namespace stays.
  const moved = await refusal(
    asApi.core.patchNamespace(
      { name: api.namespace, body: { metadata: { labels: { "berth.dev/workspace": "wsother00000" } } } },
      k8s.setHeaderOptions("Content-Type", k8s.PatchStrategy.MergePatch),
    ),
  );
  t.is(moved?.code, 403);
});

test("the API changes no namespace but a workspace's, nor creates one that is not", async (t) => {
  // RBAC alone lets the API patch any namespace (patch cannot be narrowed by label): for example
  // lift kube-system's Pod Security level, or label a namespace into another product's policies
  t.true(await rbacAllows("patch", "namespaces", "kube-system"));
  const lifted = await refusal(
    asApi.core.patchNamespace(
      { name: victim, body: { metadata: { labels: { "pod-security.kubernetes.io/enforce": "privileged" } } } },
      k8s.setHeaderOptions("Content-Type", k8s.PatchStrategy.MergePatch),
    ),
  );
  t.is(lifted?.code, 403);
  t.regex(lifted!.message, /changes only workspace namespaces/);
  const plain = await refusal(asApi.core.createNamespace({ body: { metadata: { name: uniqueName("plain") } } }));
  t.is(plain?.code, 403, "a namespace without the workspace label");
  t.regex(plain!.message, /is a workspace's/);
  // its own workspace's namespace it still keeps (a label of its own, as ensure() applies them)
  const own = await asApi.core.patchNamespace(
    { name: api.namespace, body: { metadata: { labels: { "app.kubernetes.io/managed-by": "berth" } } } },
    k8s.setHeaderOptions("Content-Type", k8s.PatchStrategy.MergePatch),
  );
  t.is(own.metadata?.name, api.namespace);
});

test("in a workspace, the API binds only its own role, only to itself", async (t) => {
  const bind = (name: string, role: string, subject: k8s.RbacV1Subject) =>
    refusal(
      asApi.rbac.createNamespacedRoleBinding({
        namespace: api.namespace,
        body: {
          metadata: { name },
          roleRef: { apiGroup: "rbac.authorization.k8s.io", kind: "ClusterRole", name: role },
          subjects: [subject],
        },
      }),
    );
  const admin = await bind(uniqueName("x"), "admin", apiSubject());
  t.is(admin?.code, 403, "a built-in role: RBAC's escalation check (bind is granted on the workspace role only)");
  const other = await bind(uniqueName("x"), WORKSPACE_ROLE, { kind: "ServiceAccount", namespace: api.namespace, name: "default" });
  t.is(other?.code, 403, "its role to another subject: the admission policy");
  t.regex(other!.message, /binds its own workspace ClusterRole to itself/);
});

test("the victim is still served: variables of a service in the workspace, and a new workspace", async (t) => {
  const created = await api.fetchJson("POST", `/workspaces/${api.workspaceId}/apps`, {
    body: { name: "Shop", slug: "shop", image: "registry.invalid/shop:1" },
  });
  t.is(created.status, 201, created.text);
  const set = await api.fetchJson("PATCH", `/workspaces/${api.workspaceId}/apps/shop/env`, { body: { set: { TOKEN: "s3cret" } } });
  t.is(set.status, 200, set.text);
  const other = await api.createWorkspace("another");
  const binding = await rbacAdmin.readNamespacedRoleBinding({ namespace: other.namespace, name: WORKSPACE_BINDING });
  t.is(binding.roleRef.name, WORKSPACE_ROLE);
});

test("a workspace made before its binding existed gets it again when the API starts (ensureAll)", async (t) => {
  const ws = await api.createWorkspace("older");
  await rbacAdmin.deleteNamespacedRoleBinding({ namespace: ws.namespace, name: WORKSPACE_BINDING });
  await k.core.createNamespacedSecret({ namespace: ws.namespace, body: { metadata: { name: "s" }, stringData: { a: "b" } } });
  await eventually(
    "the API to lose the Secret",
    async () => (await refusal(asApi.core.readNamespacedSecret({ namespace: ws.namespace, name: "s" })))?.code === 403,
    15_000,
  );
  const { failed } = await api.services.workspaces.ensureAll();
  t.is(failed, 0);
  await eventually("the API to read it again", () => asApi.core.readNamespacedSecret({ namespace: ws.namespace, name: "s" }), 15_000);
  t.pass();
});

// The operator's Secret grants end at the workspaces too: a ClusterRole the chart renders unbound,
// bound by the API (RoleBinding berth-operator) in each workspace namespace it ensures.
test("a workspace namespace gets the operator's RoleBinding; the operator reads Secrets there and nowhere else", async (t) => {
  const binding = await rbacAdmin.readNamespacedRoleBinding({ namespace: api.namespace, name: OPERATOR_WORKSPACE_BINDING });
  t.is(binding.roleRef.name, "berth-operator-workspace");
  t.deepEqual(
    binding.subjects?.map((s) => ({ kind: s.kind, namespace: s.namespace, name: s.name })),
    [{ kind: "ServiceAccount", namespace: "berth-system", name: "berth-operator" }],
  );
  const asOperator = loadKubeConfig((await identity("operator")).kubeconfig).makeApiClient(k8s.CoreV1Api);
  await k.core.createNamespacedSecret({ namespace: api.namespace, body: { metadata: { name: "op-mine" }, stringData: { a: "b" } } });
  const mine = await asOperator.readNamespacedSecret({ namespace: api.namespace, name: "op-mine" });
  t.is(Buffer.from(mine.data!.a!, "base64").toString(), "b", "the operator's own token reads a workspace's Secret");
  t.is((await refusal(asOperator.readNamespacedSecret({ namespace: victim, name: "db-password" })))?.code, 403, "outside the workspaces");
  t.is((await refusal(asOperator.listSecretForAllNamespaces()))?.code, 403, "and across the cluster");

  // the binding is the wall: the same RoleBinding in the victim's namespace lets the read through
  const ns = await testNamespace(k, "op-bound");
  t.teardown(() => deleteNamespace(k, ns));
  await k.core.createNamespacedSecret({ namespace: ns, body: { metadata: { name: "s" }, stringData: { a: "b" } } });
  t.is((await refusal(asOperator.readNamespacedSecret({ namespace: ns, name: "s" })))?.code, 403, "before the binding");
  await bindOperatorWorkspaceRole(ns);
  await eventually(
    "the operator to read the Secret once bound",
    async () => (await asOperator.readNamespacedSecret({ namespace: ns, name: "s" }).catch(() => undefined)) !== undefined,
  );
  t.pass();
});

test("the operator creates workloads in workspace namespaces only: a pod-bearing object elsewhere could mount that namespace's Secrets", async (t) => {
  const asOperator = loadKubeConfig((await identity("operator")).kubeconfig).makeApiClient(k8s.AppsV1Api);
  const deployment = (name: string): k8s.V1Deployment => ({
    metadata: { name },
    spec: {
      selector: { matchLabels: { app: name } },
      replicas: 0,
      template: {
        metadata: { labels: { app: name } },
        spec: {
          containers: [{ name: "c", image: "registry.invalid/x:1", volumeMounts: [{ name: "s", mountPath: "/s" }] }],
          volumes: [{ name: "s", secret: { secretName: "db-password" } }],
        },
      },
    },
  });
  const elsewhere = await refusal(asOperator.createNamespacedDeployment({ namespace: victim, body: deployment("thief") }));
  t.is(elsewhere?.code, 403, "a Deployment mounting the victim namespace's Secret");
  const inWorkspace = await asOperator.createNamespacedDeployment({ namespace: api.namespace, body: deployment("allowed") });
  t.is(inWorkspace.metadata?.namespace, api.namespace, "in a workspace, the same create goes through");
  await k.kc.makeApiClient(k8s.AppsV1Api).deleteNamespacedDeployment({ namespace: api.namespace, name: "allowed" });
});

test("the API cannot bind the operator's workspace ClusterRole to anyone but the operator, nor under another name", async (t) => {
  // RBAC alone lets it: create cannot be narrowed by name, and bind is granted on that role
  t.true(await rbacAllows("create", "rolebindings", api.namespace));
  t.true(await rbacAllows("bind", "clusterroles.rbac.authorization.k8s.io/berth-operator-workspace", api.namespace));
  const role = { apiGroup: "rbac.authorization.k8s.io", kind: "ClusterRole", name: "berth-operator-workspace" };
  const toApi = await refusal(
    asApi.rbac.createNamespacedRoleBinding({
      namespace: api.namespace,
      body: { metadata: { name: OPERATOR_WORKSPACE_BINDING + "-x" }, roleRef: role, subjects: [apiSubject()] },
    }),
  );
  t.is(toApi?.code, 403, "the operator's Secrets for the API itself");
  const intruder = { kind: "ServiceAccount", namespace: api.namespace, name: "default" };
  const toPod = await refusal(
    asApi.rbac.createNamespacedRoleBinding({
      namespace: api.namespace,
      body: { metadata: { name: OPERATOR_WORKSPACE_BINDING }, roleRef: role, subjects: [intruder] },
    }),
  );
  t.is(toPod?.code, 403, "the operator's Secrets for a workspace's pods");
});
