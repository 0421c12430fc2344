export * from "./client.ts";
export * from "./conditions.ts";
export * from "./informer.ts";
export * from "./per-namespace-informer.ts";
