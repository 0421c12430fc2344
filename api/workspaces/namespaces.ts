// The real NamespaceEnsurer: creates the namespace; when it already exists (409), checks it is not
// terminating nor another workspace's, and merge-patches the missing labels. Then the workspace's
// capacity: a ResourceQuota and a LimitRange, applied server-side (docs/security.md "Capacity"),
// and its NetworkPolicies (./network.ts, docs/security.md "Network"). Before those, the RoleBinding
// that lets the API do them, and touch Secrets, in this namespace only (./access.ts).
import * as k8s from "@kubernetes/client-node";
import { WORKSPACE_LABEL } from "../../crds/schemas.ts";
import { API_FIELD_MANAGER, statusCode } from "../../kube/client.ts";
import { ObjectClient, type KubeObject } from "../../kube/objects.ts";
import { ConflictError, UnavailableError } from "../errors.ts";
import type { NamespaceEnsurer } from "./service.ts";
import type { Access } from "../../kube/rbac.ts";
import { BUILD_NETWORK_POLICY, NETWORK_POLICY, workspaceNetworkPolicies, type WorkspaceNetwork } from "./network.ts";
import { WORKSPACE_BINDING_ACCESS, WorkspaceAccess, type OperatorWorkspaceRole } from "./access.ts";

/** What the ensurer does in the cluster (RBAC from code, see api/rbac.ts). Namespaces are never deleted. */
export const NAMESPACE_ENSURER_ACCESS: Access[] = [
  {
    group: "",
    resource: "namespaces",
    verbs: ["get", "create", "patch"],
    why: "A workspace is a namespace labelled berth.dev/workspace=<id>: created, or read and labelled when it exists (the chart's admission policy refuses the label on a namespace that is not already Berth's)",
  },
  ...WORKSPACE_BINDING_ACCESS,
  {
    group: "",
    resource: "resourcequotas",
    verbs: ["get", "create", "patch", "delete"],
    scope: "workspace",
    why: "A workspace's namespace gets its ResourceQuota (berth-workspace) by server-side apply; one the quota controller counted before it knew Berth's resources is made again",
  },
  {
    group: "",
    resource: "limitranges",
    verbs: ["get", "create", "patch"],
    scope: "workspace",
    why: "A workspace's namespace gets its LimitRange (berth-workspace) by server-side apply",
  },
  {
    group: "networking.k8s.io",
    resource: "networkpolicies",
    verbs: ["get", "create", "patch", "delete"],
    scope: "workspace",
    why: "A workspace's namespace gets its NetworkPolicies (berth-workspace, berth-workspace-builds) by server-side apply; removed when the platform turns them off",
  },
];

/** The capacity of each workspace (BERTH_WORKSPACE_QUOTA, BERTH_WORKSPACE_LIMITS): a ResourceQuota's hard limits and a LimitRange's container defaults. */
export interface WorkspaceCapacity {
  quota: Record<string, string>;
  limits: { default?: Record<string, string> | undefined; defaultRequest?: Record<string, string> | undefined };
}

/** How long a workspace's creation waits for the quota controller to count its quota. */
const QUOTA_COUNT_WAIT_MS = 90_000;
/** How long a quota may stay uncounted before it is made again. */
const QUOTA_REMAKE_MS = 5_000;

/** The name of the ResourceQuota and the LimitRange Berth keeps in every workspace namespace. */
export const CAPACITY_OBJECT = "berth-workspace";

/** What every workspace namespace gets besides its labels: capacity (BERTH_WORKSPACE_QUOTA, _LIMITS) and network (BERTH_WORKSPACE_NETWORK). */
export interface WorkspaceSetup {
  capacity?: WorkspaceCapacity | undefined;
  network?: WorkspaceNetwork | undefined;
  /** The API's workspace ClusterRole (BERTH_WORKSPACE_ROLE), bound in each workspace namespace; none: no binding (an API with cluster-wide grants). */
  role?: string | undefined;
  /** The operator's workspace ClusterRole and user, bound in each workspace namespace with the API's. */
  operator?: OperatorWorkspaceRole | undefined;
}

/** The setup the API's configuration asks for. */
export function workspaceSetup(config: {
  BERTH_WORKSPACE_QUOTA: Record<string, string>;
  BERTH_WORKSPACE_LIMITS: WorkspaceCapacity["limits"];
  BERTH_WORKSPACE_NETWORK: WorkspaceNetwork;
  BERTH_WORKSPACE_ROLE: string;
  BERTH_OPERATOR_WORKSPACE_ROLE: string;
  BERTH_OPERATOR_USERNAME: string;
}): WorkspaceSetup {
  return {
    capacity: { quota: config.BERTH_WORKSPACE_QUOTA, limits: config.BERTH_WORKSPACE_LIMITS },
    network: config.BERTH_WORKSPACE_NETWORK,
    role: config.BERTH_WORKSPACE_ROLE,
    operator: { role: config.BERTH_OPERATOR_WORKSPACE_ROLE, username: config.BERTH_OPERATOR_USERNAME },
  };
}

export class KubeNamespaceEnsurer implements NamespaceEnsurer {
  readonly #core: k8s.CoreV1Api;
  readonly #objects: ObjectClient;
  readonly #capacity: WorkspaceCapacity | undefined;
  readonly #network: WorkspaceNetwork | undefined;
  readonly #access: WorkspaceAccess | undefined;

  constructor(kc: k8s.KubeConfig, setup: WorkspaceSetup = {}) {
    this.#core = kc.makeApiClient(k8s.CoreV1Api);
    this.#objects = new ObjectClient(kc);
    this.#capacity = setup.capacity;
    this.#network = setup.network;
    this.#access = setup.role ? new WorkspaceAccess(kc, this.#objects, setup.role, setup.operator) : undefined;
  }

  async ensure(name: string, labels: Record<string, string>): Promise<void> {
    await this.#namespace(name, labels);
    // What the API does in a workspace namespace, it may do once this binding holds.
    await this.#access?.bind(name);
    const bound = <T>(step: () => Promise<T>) => (this.#access ? this.#access.once(step) : step());
    // The walls before the capacity: a namespace is never without its policies once it has pods.
    await bound(() => this.#policies(name));
    await bound(() => this.#quota(name));
  }

  async #policies(name: string): Promise<void> {
    const n = this.#network;
    if (!n) return;
    if (!n.enabled) {
      for (const policy of [NETWORK_POLICY, BUILD_NETWORK_POLICY]) {
        await this.#objects.delete({ apiVersion: "networking.k8s.io/v1", kind: "NetworkPolicy", namespace: name, name: policy });
      }
      return;
    }
    for (const policy of workspaceNetworkPolicies(name, n)) await this.#objects.apply(policy, API_FIELD_MANAGER);
  }

  async #quota(name: string): Promise<void> {
    const c = this.#capacity;
    if (!c) return;
    const meta = { name: CAPACITY_OBJECT, namespace: name, labels: { "app.kubernetes.io/managed-by": "berth" } };
    if (c.limits.default || c.limits.defaultRequest) {
      await this.#objects.apply(
        { apiVersion: "v1", kind: "LimitRange", metadata: meta, spec: { limits: [{ type: "Container", ...c.limits }] } },
        API_FIELD_MANAGER,
      );
    }
    type Quota = KubeObject & { status?: { hard?: Record<string, string>; used?: Record<string, string> } };
    const quotaObject: Quota = { apiVersion: "v1", kind: "ResourceQuota", metadata: meta, spec: { hard: c.quota } };
    const ref = { apiVersion: "v1", kind: "ResourceQuota", namespace: name, name: CAPACITY_OBJECT };
    // Until the quota controller has counted what the namespace holds, the API server refuses every
    // object the quota counts ("status unknown for quota"): the workspace is ready once it has. A
    // count of Berth's own resources is counted only once the controller has discovered them (up
    // to half a minute after their CRDs were installed), and a quota it counted before that keeps
    // lacking them until its next full resync: such a quota is made again, every few seconds.
    const counted = (q: Quota | undefined) =>
      Object.keys(c.quota).every((k) => q?.status?.hard?.[k] !== undefined && q.status.used?.[k] !== undefined);
    const start = Date.now();
    let q: Quota | undefined = await this.#objects.apply<Quota>(quotaObject, API_FIELD_MANAGER);
    let made = start;
    while (!counted(q)) {
      if (Date.now() - start > QUOTA_COUNT_WAIT_MS)
        throw new UnavailableError(
          "namespace_unavailable",
          `The quota of namespace ${name} was not counted in time; retry with the same id to finish.`,
        );
      await new Promise((r) => setTimeout(r, 100));
      if (Date.now() - made > QUOTA_REMAKE_MS) {
        await this.#objects.delete(ref).catch(() => undefined);
        q = await this.#objects.apply<Quota>(quotaObject, API_FIELD_MANAGER);
        made = Date.now();
        continue;
      }
      q = await this.#objects.get<Quota>(ref);
    }
  }

  async #namespace(name: string, labels: Record<string, string>): Promise<void> {
    try {
      await this.#core.createNamespace({ body: { metadata: { name, labels } } });
      return;
    } catch (err) {
      if (statusCode(err) !== 409) throw err;
    }
    const ns = await this.#core.readNamespace({ name });
    if (ns.status?.phase === "Terminating" || ns.metadata?.deletionTimestamp) {
      throw new UnavailableError("namespace_terminating", `Namespace ${name} is being deleted; retry once it is gone.`);
    }
    const existing = ns.metadata?.labels ?? {};
    const owner = existing[WORKSPACE_LABEL];
    if (owner !== undefined && labels[WORKSPACE_LABEL] !== undefined && owner !== labels[WORKSPACE_LABEL]) {
      throw new ConflictError("namespace_conflict", `Namespace ${name} belongs to workspace ${owner}.`);
    }
    // A namespace Berth did not create is never made a workspace: its Secrets, pods and policies
    // would come under the API's workspace grants (./access.ts).
    if (owner === undefined && labels[WORKSPACE_LABEL] !== undefined) {
      throw new ConflictError(
        "namespace_conflict",
        `Namespace ${name} exists and is not a Berth workspace's; Berth does not take it over.`,
      );
    }
    if (Object.entries(labels).every(([k, v]) => existing[k] === v)) return;
    await this.#core.patchNamespace(
      { name, body: { metadata: { labels } } },
      k8s.setHeaderOptions("Content-Type", k8s.PatchStrategy.MergePatch),
    );
  }
}
