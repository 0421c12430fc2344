// What the API and the operator may do only in workspace namespaces. The grants of scope
// "workspace" (kube/rbac.ts) are ClusterRoles the chart renders without a cluster-wide binding:
// the API's (Secrets, Job pods and their logs, pod metrics, quota, limits and NetworkPolicies) and
// the operator's (Berth's Secrets, and its writes of workloads, routes and certificates: a
// pod-bearing object could mount any Secret of its namespace). Each workspace namespace gets a
// RoleBinding of each, to the API's own user and to the operator's, applied here as the namespace
// is ensured. So neither can read a Secret outside the workspaces, nor the operator create a
// workload there, nor the API read a pod's log or spec. The chart's
// ValidatingAdmissionPolicy (templates/api-workspace-policy.yaml) keeps the API from binding them
// anywhere else or to anyone else, or from labelling a namespace it did not create as a workspace
// (docs/security.md "Least privilege").
import * as k8s from "@kubernetes/client-node";
import { chartName, type Access } from "../../kube/rbac.ts";
import { API_FIELD_MANAGER, statusCode } from "../../kube/client.ts";
import type { KubeObject, ObjectClient } from "../../kube/objects.ts";

/** The RoleBinding of the API's workspace ClusterRole in every workspace namespace. */
export const WORKSPACE_BINDING = "berth-api";
/** The RoleBinding of the operator's workspace ClusterRole in every workspace namespace. */
export const OPERATOR_WORKSPACE_BINDING = "berth-operator";

export const WORKSPACE_BINDING_ACCESS: Access[] = [
  {
    group: "rbac.authorization.k8s.io",
    resource: "rolebindings",
    verbs: ["create"],
    why: "A workspace namespace gets the RoleBindings berth-api and berth-operator of the API's and the operator's workspace ClusterRoles (create cannot be narrowed by name; the chart's admission policy allows them in workspace namespaces only)",
  },
  {
    group: "rbac.authorization.k8s.io",
    resource: "rolebindings",
    verbs: ["get", "patch"],
    names: [WORKSPACE_BINDING, OPERATOR_WORKSPACE_BINDING],
    why: "A workspace namespace's RoleBindings berth-api and berth-operator are applied server-side",
  },
  {
    group: "rbac.authorization.k8s.io",
    resource: "clusterroles",
    verbs: ["bind"],
    names: [chartName("api-workspace"), chartName("operator-workspace")],
    why: "The API binds its own workspace ClusterRole to itself and the operator's to the operator, and no other, in each workspace namespace",
  },
];

/** The RBAC subject of a Kubernetes user name: a ServiceAccount's, or a plain user's. */
export function subjectOf(username: string): k8s.RbacV1Subject {
  const sa = /^system:serviceaccount:([^:]+):([^:]+)$/.exec(username);
  if (sa) return { kind: "ServiceAccount", namespace: sa[1]!, name: sa[2]! };
  return { kind: "User", apiGroup: "rbac.authorization.k8s.io", name: username };
}

/** The RoleBinding `name` that gives `subject` the ClusterRole `role` in namespace `ns`. */
export function workspaceBinding(ns: string, role: string, subject: k8s.RbacV1Subject, name = WORKSPACE_BINDING): KubeObject {
  return {
    apiVersion: "rbac.authorization.k8s.io/v1",
    kind: "RoleBinding",
    metadata: { name, namespace: ns, labels: { "app.kubernetes.io/managed-by": "berth" } },
    roleRef: { apiGroup: "rbac.authorization.k8s.io", kind: "ClusterRole", name: role },
    subjects: [subject],
  } as KubeObject;
}

/** How long the steps after a new binding retry a 403 while the authorizer's cache catches up. */
const BINDING_WAIT_MS = 20_000;

/** The operator's workspace ClusterRole and its Kubernetes user, bound in each workspace namespace. */
export interface OperatorWorkspaceRole {
  /** BERTH_OPERATOR_WORKSPACE_ROLE */
  role: string;
  /** BERTH_OPERATOR_USERNAME */
  username: string;
}

/**
 * Binds the API's workspace ClusterRole, and the operator's, in workspace namespaces. The API's
 * own user is asked of the API server once (a SelfSubjectReview, which every authenticated user
 * may make).
 */
export class WorkspaceAccess {
  readonly #kc: k8s.KubeConfig;
  readonly #objects: ObjectClient;
  readonly #role: string;
  readonly #operator: OperatorWorkspaceRole | undefined;
  #subject: Promise<k8s.RbacV1Subject> | undefined;

  constructor(kc: k8s.KubeConfig, objects: ObjectClient, role: string, operator?: OperatorWorkspaceRole) {
    this.#kc = kc;
    this.#objects = objects;
    this.#role = role;
    this.#operator = operator;
  }

  /** Applies the namespace's RoleBindings (idempotent). */
  async bind(ns: string): Promise<void> {
    await this.#objects.apply(workspaceBinding(ns, this.#role, await this.#self()), API_FIELD_MANAGER);
    const op = this.#operator;
    if (op) await this.#objects.apply(workspaceBinding(ns, op.role, subjectOf(op.username), OPERATOR_WORKSPACE_BINDING), API_FIELD_MANAGER);
  }

  /**
   * Runs `step` (a call the binding allows), retrying a 403 for a while: the API server's
   * authorizer follows a new RoleBinding from its watch cache, moments after it is created.
   */
  async once<T>(step: () => Promise<T>): Promise<T> {
    const start = Date.now();
    for (let delay = 50; ; delay = Math.min(delay * 2, 1000)) {
      try {
        return await step();
      } catch (err) {
        if (statusCode(err) !== 403 || Date.now() - start > BINDING_WAIT_MS) throw err;
      }
      await new Promise((r) => setTimeout(r, delay));
    }
  }

  #self(): Promise<k8s.RbacV1Subject> {
    this.#subject ??= (async () => {
      const review = await this.#kc
        .makeApiClient(k8s.AuthenticationV1Api)
        .createSelfSubjectReview({ body: { apiVersion: "authentication.k8s.io/v1", kind: "SelfSubjectReview" } });
      const username = review.status?.userInfo?.username;
      if (!username) throw new Error("the API server did not say who the API is (SelfSubjectReview)");
      return subjectOf(username);
    })();
    this.#subject.catch(() => (this.#subject = undefined));
    return this.#subject;
  }
}
