// The runtime's CPU and memory for pipeline-state, from the resource metrics API
// (metrics.k8s.io, served by metrics-server): the sum over the App's pods. null when the cluster
// has no metrics API or it does not answer: unknown, never a made-up zero. Any other failure (a
// refused call is a missing grant) is logged before it reads as unknown.
import type { Logger } from "../../kube/logger.ts";
import { UnknownKindError, type ObjectClient } from "../../kube/objects.ts";
import { statusCode } from "../../kube/transport.ts";
import { parseQuantity } from "../../kube/quantity.ts";
import type { Access } from "../../kube/rbac.ts";
import { APP_LABEL } from "../../crds/schemas.ts";

/** What the reader does in the cluster (RBAC from code, see api/rbac.ts). */
export const POD_METRICS_ACCESS: Access[] = [
  {
    group: "metrics.k8s.io",
    resource: "pods",
    verbs: ["list"],
    scope: "workspace",
    why: "pipeline-state reports an App's CPU and memory from the resource metrics API",
  },
];

export interface Usage {
  cpuMillicores: number;
  memoryMi: number;
}

export interface UsageReader {
  usage(namespace: string, app: string): Promise<Usage | null>;
}

interface PodMetrics {
  containers?: { usage?: { cpu?: string; memory?: string } }[];
}

/** The sum of containers' usage over pods: millicores and MiB, rounded to one decimal. */
export function sumUsage(pods: readonly PodMetrics[]): Usage {
  let cpu = 0,
    memory = 0;
  for (const p of pods) {
    for (const c of p.containers ?? []) {
      if (c.usage?.cpu) cpu += parseQuantity(c.usage.cpu);
      if (c.usage?.memory) memory += parseQuantity(c.usage.memory);
    }
  }
  return { cpuMillicores: Math.round(cpu * 10_000) / 10, memoryMi: Math.round((memory / 2 ** 20) * 10) / 10 };
}

/** No metrics API: not installed (no such group or kind) or not available (an aggregated API server that is down). */
function noMetricsApi(err: unknown): boolean {
  return err instanceof UnknownKindError || statusCode(err) === 404 || statusCode(err) === 503;
}

/** A cluster found without a metrics API is asked again after this long (it may be installed since). */
const ABSENT_TTL_MS = 60_000;

export class MetricsApiUsageReader implements UsageReader {
  readonly #client: Pick<ObjectClient, "list">;
  readonly #log: Logger;
  readonly #now: () => number;
  /** Until when the metrics API is known to be absent: no request is made before then. */
  #absentUntil = 0;

  constructor(client: Pick<ObjectClient, "list">, log: Logger, now: () => number = Date.now) {
    this.#client = client;
    this.#log = log;
    this.#now = now;
  }

  async usage(namespace: string, app: string): Promise<Usage | null> {
    if (this.#now() < this.#absentUntil) return null;
    try {
      const list = await this.#client.list<PodMetrics & { metadata: object }>("metrics.k8s.io/v1beta1", "PodMetrics", namespace, {
        labelSelector: `${APP_LABEL}=${app}`,
      });
      return list.items.length ? sumUsage(list.items) : null;
    } catch (err) {
      if (noMetricsApi(err)) this.#absentUntil = this.#now() + ABSENT_TTL_MS;
      else this.#log.warn({ err, namespace, app }, "could not read the resource metrics API");
      return null;
    }
  }
}
