// Workspaces and their API keys. A workspace maps to one namespace labelled
// berth.dev/workspace=<id>. Keys are stored only as SHA-256 digests of their secret.
import { defineEntity, p, type InferEntity } from "@mikro-orm/core";
import { keyProperties } from "../auth/entities.ts";

export const Workspace = defineEntity({
  name: "Workspace",
  tableName: "workspaces",
  properties: {
    id: p.string().primary().length(32),
    name: p.string().length(100),
    namespace: p.string().length(63).unique(),
    createdAt: p.datetime().onCreate(() => new Date()),
  },
});
export type Workspace = InferEntity<typeof Workspace>;

export const ApiKey = defineEntity({
  name: "ApiKey",
  tableName: "api_keys",
  properties: {
    ...keyProperties(),
    workspace: () => p.manyToOne(Workspace).deleteRule("cascade"),
  },
});
export type ApiKey = InferEntity<typeof ApiKey>;
