// What the API may do only in workspace namespaces. The grants of scope "workspace" (Secrets, Job
// pods and their logs, pod metrics, quota, limits and NetworkPolicies: kube/rbac.ts) are a
// ClusterRole the chart renders without a cluster-wide binding; each workspace namespace gets a
// RoleBinding of it to the API's own user, applied here as the namespace is ensured. So the API
// cannot read a Secret, a pod's log or a pod's spec outside the workspaces. The chart's
// ValidatingAdmissionPolicy (templates/api-workspace-policy.yaml) keeps the API from binding it
// anywhere else, or from labelling a namespace it did not create as a workspace
// (docs/security.md "Least privilege").
import * as k8s from "@kubernetes/client-node";
import { chartName, type Access } from "../../kube/rbac.ts";
import { API_FIELD_MANAGER, statusCode } from "../../kube/client.ts";
import type { KubeObject, ObjectClient } from "../../kube/objects.ts";

/** The RoleBinding of the API's workspace ClusterRole in every workspace namespace. */
export const WORKSPACE_BINDING = "berth-api";

export const WORKSPACE_BINDING_ACCESS: Access[] = [
  {
    group: "rbac.authorization.k8s.io",
    resource: "rolebindings",
    verbs: ["create"],
    why: "A workspace namespace gets the RoleBinding berth-api of the API's workspace ClusterRole (create cannot be narrowed by name; the chart's admission policy allows it in workspace namespaces only)",
  },
  {
    group: "rbac.authorization.k8s.io",
    resource: "rolebindings",
    verbs: ["get", "patch"],
    names: [WORKSPACE_BINDING],
    why: "A workspace namespace's RoleBinding berth-api is applied server-side",
  },
  {
    group: "rbac.authorization.k8s.io",
    resource: "clusterroles",
    verbs: ["bind"],
    names: [chartName("api-workspace")],
    why: "The API binds its own workspace ClusterRole, and no other, in each workspace namespace",
  },
];

/** The RBAC subject of a Kubernetes user name: a ServiceAccount's, or a plain user's. */
export function subjectOf(username: string): k8s.RbacV1Subject {
  const sa = /^system:serviceaccount:([^:]+):([^:]+)$/.exec(username);
  if (sa) return { kind: "ServiceAccount", namespace: sa[1]!, name: sa[2]! };
  return { kind: "User", apiGroup: "rbac.authorization.k8s.io", name: username };
}

/** The RoleBinding that gives `subject` the ClusterRole `role` in namespace `ns`. */
export function workspaceBinding(ns: string, role: string, subject: k8s.RbacV1Subject): KubeObject {
  return {
    apiVersion: "rbac.authorization.k8s.io/v1",
    kind: "RoleBinding",
    metadata: { name: WORKSPACE_BINDING, namespace: ns, labels: { "app.kubernetes.io/managed-by": "berth" } },
    roleRef: { apiGroup: "rbac.authorization.k8s.io", kind: "ClusterRole", name: role },
    subjects: [subject],
  } as KubeObject;
}

/** How long the steps after a new binding retry a 403 while the authorizer's cache catches up. */
const BINDING_WAIT_MS = 20_000;

/**
 * Binds the API's workspace ClusterRole in workspace namespaces. Its own user is asked of the API
 * server once (a SelfSubjectReview, which every authenticated user may make).
 */
export class WorkspaceAccess {
  readonly #kc: k8s.KubeConfig;
  readonly #objects: ObjectClient;
  readonly #role: string;
  #subject: Promise<k8s.RbacV1Subject> | undefined;

  constructor(kc: k8s.KubeConfig, objects: ObjectClient, role: string) {
    this.#kc = kc;
    this.#objects = objects;
    this.#role = role;
  }

  /** Applies the namespace's RoleBinding (idempotent). */
  async bind(ns: string): Promise<void> {
    await this.#objects.apply(workspaceBinding(ns, this.#role, await this.#self()), API_FIELD_MANAGER);
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
