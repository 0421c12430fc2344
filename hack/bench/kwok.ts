// Extra simulated nodes for benchmarks that run more pods than the local cluster's one kwok node
// holds (hack/cluster's kwok-node-0: 2,000 pods and 256 CPUs, so 512 pods of an App's default
// 500m request). Each added node holds 2,000 such pods: its CPUs are sized to them.
import type * as k8s from "@kubernetes/client-node";
import { DEFAULTS } from "../../crds/schemas.ts";

/** Pods one simulated node holds (as hack/cluster's kwok-node-0). */
export const KWOK_NODE_PODS = 2000;
/** hack/cluster's kwok-node-0's CPUs. */
const KWOK_NODE_0_CPUS = 256;

/**
 * Nodes `<prefix>-1..n`, enough with kwok-node-0 for `pods` pods of `podMillicores` each and 20%
 * headroom (none when kwok-node-0 suffices); `add` creates them (an existing one is kept),
 * `remove` deletes them.
 */
export function extraKwokNodes(
  core: k8s.CoreV1Api,
  prefix: string,
  pods: number,
  podMillicores: number = DEFAULTS.cpuLimitMillicores,
): { count: number; add(): Promise<void>; remove(): Promise<void> } {
  const node0 = Math.min(KWOK_NODE_PODS, Math.floor((KWOK_NODE_0_CPUS * 1000) / podMillicores));
  const count = pods <= node0 ? 0 : Math.ceil(((pods - node0) * 1.2) / KWOK_NODE_PODS);
  const name = (i: number) => `${prefix}-${i}`;
  const resources = { cpu: String(Math.ceil((KWOK_NODE_PODS * podMillicores) / 1000)), memory: "1Ti", pods: String(KWOK_NODE_PODS) };
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
