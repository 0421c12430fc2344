// Extra simulated nodes for benchmarks that run more pods than the local cluster's one kwok node
// holds (hack/cluster's kwok-node-0: 2,000 pods). Each added node is a kwok node of the same shape.
import type * as k8s from "@kubernetes/client-node";

/** Pods one simulated node holds (as hack/cluster's kwok-node-0). */
export const KWOK_NODE_PODS = 2000;

/**
 * Nodes `<prefix>-1..n`, enough with kwok-node-0 for `pods` pods and 20% headroom (none when it
 * suffices); `add` creates them (an existing one is kept), `remove` deletes them.
 */
export function extraKwokNodes(
  core: k8s.CoreV1Api,
  prefix: string,
  pods: number,
): { count: number; add(): Promise<void>; remove(): Promise<void> } {
  const count = Math.max(0, Math.ceil((pods * 1.2) / KWOK_NODE_PODS) - 1);
  const name = (i: number) => `${prefix}-${i}`;
  const resources = { cpu: "256", memory: "1Ti", pods: String(KWOK_NODE_PODS) };
  return {
    count,
    async add() {
      for (let i = 1; i <= count; i++) {
        await core
          .createNode({
            body: {
              metadata: {
                name: name(i),
                annotations: { "kwok.x-k8s.io/node": "fake", "node.alpha.kubernetes.io/ttl": "0" },
                labels: { "kubernetes.io/hostname": name(i), "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64", type: "kwok" },
              },
              status: { allocatable: resources, capacity: resources },
            },
          })
          .catch(() => undefined);
      }
    },
    async remove() {
      for (let i = 1; i <= count; i++) await core.deleteNode({ name: name(i) }).catch(() => undefined);
    },
  };
}
