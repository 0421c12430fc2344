// The guard templates (governance_guard_templates, committed migrations
// Migration20261123000000_governance and Migration20261125000000_guard_template_owner): the
// governance table that MikroORM maps, read and written only through guard-templates.ts with the
// request's forked EntityManager.
//
// The module's other tables have no entity; each has one raw SQL module as its access path, because
// their hot statements (key verification, ingestion, provisioning's transaction with DDL) need the
// pool's own connections: governance_projects in stores/provisioning.ts, governance_app_keys in
// keys/app-keys.ts, governance_app_configs in configs/app-configs.ts. The per-app data itself
// (traces, evals, guard blocks, audit trail) lives in the app's own schema (stores/store-sql.ts).
import { defineEntity, p, type InferEntity } from "@mikro-orm/core";

export const GuardTemplate = defineEntity({
  name: "GuardTemplate",
  tableName: "governance_guard_templates",
  properties: {
    id: p.uuid().primary(),
    /** The owning workspace; null for a platform template (Migration20261125000000_guard_template_owner). */
    workspaceId: p.string().length(32).nullable(),
    name: p.string().length(100),
    description: p.text().nullable(),
    guardType: p.string().length(32),
    config: p.json<Record<string, unknown>>(),
    createdAt: p.datetime(),
    updatedAt: p.datetime(),
  },
});
export type GuardTemplate = InferEntity<typeof GuardTemplate>;
