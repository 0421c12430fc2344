// What the benchmarks that run workloads on the real node share (realnode.ts, deploys.ts,
// pod-start.ts): the cluster's settings from `./hack/cluster env`, and where workloads go.
import { REAL_NODE_SELECTOR, REAL_NODE_TOLERATIONS } from "../lib/local-values.ts";

/** A setting of `./hack/cluster env`; throws, saying how to get it, when it is not set. */
export function need(name: string): string {
  const v = process.env[name];
  if (!v) throw new Error(`${name} is not set: eval "$(BERTH_REAL_NODE=1 ./hack/cluster env)" first`);
  return v;
}

/** The real node's selector and toleration, as pod specs and Berth's workload settings take them. */
export const placement = { nodeSelector: { ...REAL_NODE_SELECTOR }, tolerations: REAL_NODE_TOLERATIONS.map((t) => ({ ...t })) };
