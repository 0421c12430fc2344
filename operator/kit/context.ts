// What operator/main.ts builds once and hands to each controller's wiring (app/controller.ts,
// release/controller.ts, domain/controller.ts): the Manager and its shared informers, one client,
// one Event recorder, the metrics, the configuration and the clock.
import type { KubeEventRecorder } from "../../kube/events.ts";
import type { ObjectClient } from "../../kube/objects.ts";
import type { OperatorConfig } from "../config.ts";
import type { Controller } from "../runtime/controller.ts";
import type { Manager } from "../runtime/manager.ts";
import type { Metrics } from "../runtime/metrics.ts";
import type { SharedInformers } from "./informers.ts";

export interface OperatorContext {
  manager: Manager;
  informers: SharedInformers;
  client: ObjectClient;
  events: KubeEventRecorder;
  metrics: Metrics;
  cfg: OperatorConfig;
  now: () => Date;
}

/** A controller as its wiring registered it, with what must stop with the operator beside it. */
export interface WiredController {
  controller: Controller;
  /** Called after the Manager stopped. */
  stop?: () => void;
}
