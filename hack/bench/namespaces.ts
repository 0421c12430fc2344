// Fresh namespaces for the benchmarks that run workloads on the real node (realnode.ts, deploys.ts).
import type * as k8s from "@kubernetes/client-node";

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * A new namespace `<prefix>-<time>`, returned once its default ServiceAccount exists: before it,
 * pods are refused and the ReplicaSet controller backs off for seconds, which the side of a
 * comparison that starts at once would measure.
 */
export async function benchNamespace(core: k8s.CoreV1Api, prefix: string): Promise<string> {
  const name = `${prefix}-${Date.now().toString(36)}`;
  await core.createNamespace({ body: { metadata: { name } } });
  for (;;) {
    try { await core.readNamespacedServiceAccount({ name: "default", namespace: name }); return name; } catch { await sleep(100); }
  }
}

/** Deletes the namespace and waits until it is gone. */
export async function dropNamespace(core: k8s.CoreV1Api, name: string): Promise<void> {
  await core.deleteNamespace({ name }).catch(() => undefined);
  for (;;) { try { await core.readNamespace({ name }); } catch { return; } await sleep(500); }
}
