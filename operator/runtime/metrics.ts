// Prometheus metrics of the operator, on a Registry of its own (never prom-client's global
// default registry): one Metrics is built by main and passed down (docs/design.md §5.8).
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from "prom-client";
import type { KubeRest } from "../../kube/transport.ts";

export type ReconcileResultLabel = "success" | "error" | "requeue" | "terminal";

export class Metrics {
  readonly registry: Registry;
  /** berth_reconcile_total{controller,result}: reconciles by outcome. */
  readonly reconcileTotal: Counter<"controller" | "result">;
  /** berth_reconcile_errors_total{controller}: reconciles that threw (retried or terminal). */
  readonly reconcileErrors: Counter<"controller">;
  /** berth_reconcile_duration_seconds{controller}: time spent in reconcile. */
  readonly reconcileDuration: Histogram<"controller">;
  /** berth_workqueue_depth{controller}: keys waiting to be reconciled. */
  readonly workqueueDepth: Gauge<"controller">;
  /** berth_workqueue_adds_total{controller}: keys added to the queue (after dedupe). */
  readonly workqueueAdds: Counter<"controller">;
  /**
   * berth_watch_events_total{controller,kind,result}: the informer events each controller
   * received, by the kind watched; result "filtered" when its update predicate (specChanged) found
   * nothing worth a reconcile, else "enqueued" (mapped to keys, which the queue may dedupe).
   */
  readonly watchEvents: Counter<"controller" | "kind" | "result">;
  /** berth_leader{identity}: 1 while this process holds the leader Lease. */
  readonly leader: Gauge<"identity">;
  /** berth_kube_requests_total{verb,resource,code}: requests to the API server (see countKubeRequests). */
  readonly kubeRequests: Counter<"verb" | "resource" | "code">;
  /** berth_build_results_total{source}: build outcomes taken, from the build log's last line ("log") or the pod's exit ("exit"). */
  readonly buildResults: Counter<"source">;

  constructor() {
    const registers = [(this.registry = new Registry())];
    this.reconcileTotal = new Counter({
      name: "berth_reconcile_total",
      help: "Reconciles by controller and result.",
      labelNames: ["controller", "result"],
      registers,
    });
    this.reconcileErrors = new Counter({
      name: "berth_reconcile_errors_total",
      help: "Reconciles that failed with an error.",
      labelNames: ["controller"],
      registers,
    });
    this.reconcileDuration = new Histogram({
      name: "berth_reconcile_duration_seconds",
      help: "Duration of reconciles.",
      labelNames: ["controller"],
      registers,
      buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60],
    });
    this.workqueueDepth = new Gauge({
      name: "berth_workqueue_depth",
      help: "Keys waiting in the work queue.",
      labelNames: ["controller"],
      registers,
    });
    this.workqueueAdds = new Counter({
      name: "berth_workqueue_adds_total",
      help: "Keys added to the work queue.",
      labelNames: ["controller"],
      registers,
    });
    this.watchEvents = new Counter({
      name: "berth_watch_events_total",
      help: "Informer events received by each controller, by kind watched and whether they were enqueued or filtered.",
      labelNames: ["controller", "kind", "result"],
      registers,
    });
    this.leader = new Gauge({
      name: "berth_leader",
      help: "1 while this process is the elected leader.",
      labelNames: ["identity"],
      registers,
    });
    this.kubeRequests = new Counter({
      name: "berth_kube_requests_total",
      help: "Requests to the Kubernetes API server by verb, resource and HTTP status.",
      labelNames: ["verb", "resource", "code"],
      registers,
    });
    this.buildResults = new Counter({
      name: "berth_build_results_total",
      help: "Build outcomes taken by the release controller, by where they were read: the build log's last line or the pod's exit.",
      labelNames: ["source"],
      registers,
    });
    collectDefaultMetrics({ register: this.registry });
  }
}

/** Counts every request `rest` sends in `berth_kube_requests_total` (lists, watches, the Lease, reconciles). */
export function countKubeRequests(metrics: Metrics, rest: KubeRest): void {
  rest.onRequest = (r) => metrics.kubeRequests.inc({ ...describeKubeRequest(r.method, r.path, r.contentType), code: String(r.status) });
}

/** kube-apiserver's verb and resource (plural[/subresource]) of a request, as its audit log names them. */
export function describeKubeRequest(method: string, path: string, contentType?: string): { verb: string; resource: string } {
  const [p = "", query = ""] = path.split("?");
  const parts = p.split("/").filter(Boolean);
  // /api/v1/... or /apis/<group>/<version>/...; then optional namespaces/<ns>/; then plural[/name[/sub]]
  let rest = parts[0] === "api" ? parts.slice(2) : parts[0] === "apis" ? parts.slice(3) : [];
  if (rest[0] === "namespaces" && rest.length > 2) rest = rest.slice(2);
  if (rest.length === 0) return { verb: method === "GET" ? "get" : method.toLowerCase(), resource: "discovery" };
  const [plural = "", name, sub] = rest;
  const resource = sub ? `${plural}/${sub}` : plural;
  const watch = /(^|&)watch=(true|1)(&|$)/.test(query);
  const verb =
    method === "GET"
      ? watch
        ? "watch"
        : name
          ? "get"
          : "list"
      : method === "POST"
        ? "create"
        : method === "PUT"
          ? "update"
          : method === "DELETE"
            ? "delete"
            : method === "PATCH"
              ? contentType?.includes("apply-patch")
                ? "apply"
                : "patch"
              : method.toLowerCase();
  return { verb, resource };
}
