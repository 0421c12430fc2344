// Prometheus metrics of the operator, on a Registry of its own (never prom-client's global
// default registry): one Metrics is built by main and passed down (DESIGN.md §5.8).
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from "prom-client";

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
  /** berth_leader{identity}: 1 while this process holds the leader Lease. */
  readonly leader: Gauge<"identity">;

  constructor() {
    const registers = [this.registry = new Registry()];
    this.reconcileTotal = new Counter({ name: "berth_reconcile_total", help: "Reconciles by controller and result.", labelNames: ["controller", "result"], registers });
    this.reconcileErrors = new Counter({ name: "berth_reconcile_errors_total", help: "Reconciles that failed with an error.", labelNames: ["controller"], registers });
    this.reconcileDuration = new Histogram({
      name: "berth_reconcile_duration_seconds", help: "Duration of reconciles.", labelNames: ["controller"], registers,
      buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60],
    });
    this.workqueueDepth = new Gauge({ name: "berth_workqueue_depth", help: "Keys waiting in the work queue.", labelNames: ["controller"], registers });
    this.workqueueAdds = new Counter({ name: "berth_workqueue_adds_total", help: "Keys added to the work queue.", labelNames: ["controller"], registers });
    this.leader = new Gauge({ name: "berth_leader", help: "1 while this process is the elected leader.", labelNames: ["identity"], registers });
    collectDefaultMetrics({ register: this.registry });
  }
}
