// Fresh namespaces for the benchmarks that run workloads on the real node (realnode.ts, deploys.ts).
import type * as k8s from "@kubernetes/client-node";
import { WorkspaceNetworkSchema, workspaceNetworkPolicies } from "../../api/workspaces/network.ts";
import { API_FIELD_MANAGER } from "../../kube/client.ts";
import { ObjectClient } from "../../kube/objects.ts";

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * A new namespace `<prefix>-<time>`, returned once its default ServiceAccount exists: before it,
 * pods are refused and the ReplicaSet controller backs off for seconds, which the side of a
 * comparison that starts at once would measure. With `walls` (a KubeConfig) and
 * BERTH_BENCH_POLICIES=1, it gets a workspace's NetworkPolicies as the API writes them
 * (BERTH_WORKSPACE_NETWORK from hack/cluster env), so both sides run under them.
 */
export async function benchNamespace(core: k8s.CoreV1Api, prefix: string, walls?: k8s.KubeConfig): Promise<string> {
  const name = `${prefix}-${Date.now().toString(36)}`;
  await core.createNamespace({ body: { metadata: { name } } });
  if (walls && process.env.BERTH_BENCH_POLICIES === "1") {
    const network = WorkspaceNetworkSchema.parse(JSON.parse(process.env.BERTH_WORKSPACE_NETWORK ?? "{}"));
    const objects = new ObjectClient(walls);
    for (const p of workspaceNetworkPolicies(name, network)) await objects.apply(p, API_FIELD_MANAGER);
  }
  for (;;) {
    try {
      await core.readNamespacedServiceAccount({ name: "default", namespace: name });
      return name;
    } catch {
      await sleep(100);
    }
  }
}

/** Deletes the namespace and waits until it is gone. */
export async function dropNamespace(core: k8s.CoreV1Api, name: string): Promise<void> {
  await core.deleteNamespace({ name }).catch(() => undefined);
  for (;;) {
    try {
      await core.readNamespace({ name });
    } catch {
      return;
    }
    await sleep(500);
  }
}
