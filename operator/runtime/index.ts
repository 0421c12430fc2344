// The operator's controller runtime: work queue, controllers, leader election, metrics,
// health endpoints and the Manager that ties them together. See docs/operator-runtime.md.
export * from "./queue.ts";
export * from "./controller.ts";
export * from "./leader.ts";
export * from "./metrics.ts";
export * from "./health.ts";
export * from "./manager.ts";
