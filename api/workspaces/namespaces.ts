// The real NamespaceEnsurer: creates the namespace; when it already exists (409), checks it is not
// terminating nor another workspace's, and merge-patches the missing labels.
import * as k8s from "@kubernetes/client-node";
import { WORKSPACE_LABEL } from "../../crds/schemas.ts";
import { statusCode } from "../../kube/client.ts";
import { ConflictError, UnavailableError } from "../errors.ts";
import type { NamespaceEnsurer } from "./service.ts";
import type { Access } from "../../kube/rbac.ts";

/** What the ensurer does in the cluster (RBAC from code, see api/rbac.ts). Namespaces are never deleted. */
export const NAMESPACE_ENSURER_ACCESS: Access[] = [
  { group: "", resource: "namespaces", verbs: ["get", "create", "patch"], why: "A workspace is a namespace labelled berth.dev/workspace=<id>: created, or read and labelled when it exists" },
];

export class KubeNamespaceEnsurer implements NamespaceEnsurer {
  readonly #core: k8s.CoreV1Api;

  constructor(kc: k8s.KubeConfig) {
    this.#core = kc.makeApiClient(k8s.CoreV1Api);
  }

  async ensure(name: string, labels: Record<string, string>): Promise<void> {
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
    if (Object.entries(labels).every(([k, v]) => existing[k] === v)) return;
    await this.#core.patchNamespace({ name, body: { metadata: { labels } } },
      k8s.setHeaderOptions("Content-Type", k8s.PatchStrategy.MergePatch));
  }
}
