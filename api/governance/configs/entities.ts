// The governance module's tables in the public schema (committed migration
// Migration20261123000000_governance): one row per provisioned app (its store's names, status and
// key generation), the app's scoped keys (hashes only), its observability config (with the guard
// templates it references, resolved and kept), and the global guard templates. The per-app data
// itself (traces, evals, guard blocks, audit trail) lives in the app's own schema (store-sql.ts).
import { defineEntity, p, type InferEntity } from "@mikro-orm/core";
import { keyProperties } from "../../auth/entities.ts";

export const PROJECT_STATUSES = ["active", "disabled"] as const;
export type ProjectStatus = (typeof PROJECT_STATUSES)[number];

export const GovernanceProject = defineEntity({
  name: "GovernanceProject",
  tableName: "governance_projects",
  properties: {
    id: p.uuid().primary(),
    workspaceId: p.string().length(32),
    appId: p.string().length(63),
    /** metadata.uid of the App the store was made for (null when made through the public API first) */
    appUid: p.string().length(64).nullable(),
    schemaName: p.string().length(63).unique(),
    roleName: p.string().length(63).unique(),
    /** active: the store exists; disabled: de-provisioned through the public DELETE, no store */
    status: p.enum(PROJECT_STATUSES),
    /** key generation: the App annotation berth.dev/governance-generation the operator follows */
    generation: p.integer(),
    /** the store template version the store was made (or last completed) with (store-sql.ts) */
    storeVersion: p.integer(),
    createdAt: p.datetime(),
    provisionedAt: p.datetime(),
    disabledAt: p.datetime().nullable(),
  },
});
export type GovernanceProject = InferEntity<typeof GovernanceProject>;

/** gov_sk_ keys: only the SHA-256 digest and a display prefix are stored. */
export const GovernanceAppKey = defineEntity({
  name: "GovernanceAppKey",
  tableName: "governance_app_keys",
  properties: {
    ...keyProperties(),
    workspaceId: p.string().length(32),
    appId: p.string().length(63),
  },
});
export type GovernanceAppKey = InferEntity<typeof GovernanceAppKey>;

export const GovernanceAppConfig = defineEntity({
  name: "GovernanceAppConfig",
  tableName: "governance_app_configs",
  properties: {
    id: p.uuid().primary(),
    workspaceId: p.string().length(32),
    appId: p.string().length(63),
    /** the observability config, every default applied (ObservabilityConfig) */
    config: p.json<Record<string, unknown>>(),
    /** template_id -> { name, guardType, config }: the templates the config references, as they were when applied */
    templates: p.json<Record<string, unknown>>(),
    /** from governance_config_version_seq: never reused, so it keys the compiled-engine cache */
    version: p.bigint("number"),
    updatedAt: p.datetime(),
  },
});
export type GovernanceAppConfig = InferEntity<typeof GovernanceAppConfig>;

export const GuardTemplate = defineEntity({
  name: "GuardTemplate",
  tableName: "governance_guard_templates",
  properties: {
    id: p.uuid().primary(),
    name: p.string().length(100),
    description: p.text().nullable(),
    guardType: p.string().length(32),
    config: p.json<Record<string, unknown>>(),
    createdAt: p.datetime(),
    updatedAt: p.datetime(),
  },
});
export type GuardTemplate = InferEntity<typeof GuardTemplate>;
