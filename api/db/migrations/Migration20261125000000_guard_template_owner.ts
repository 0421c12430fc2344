import { Migration } from "@mikro-orm/migrations";

/**
 * Guard templates owned by a workspace (api/governance/configs/guard-templates.ts): null is a
 * platform template (written with a platform admin key, read-only to workspaces); a workspace id is
 * a template of that workspace, visible to it alone and removed with it. Templates that exist now
 * were written with admin keys, so they stay platform templates.
 */
export class Migration20261125000000_guard_template_owner extends Migration {
  override up(): void {
    this.addSql(
      `alter table "governance_guard_templates" add column "workspace_id" varchar(32) null references "workspaces" ("id") on delete cascade`,
    );
    this.addSql(
      `create index "governance_guard_templates_workspace_idx" on "governance_guard_templates" ("workspace_id", "created_at", "id")`,
    );
  }

  override down(): void {
    this.addSql(`drop index "governance_guard_templates_workspace_idx"`);
    this.addSql(`alter table "governance_guard_templates" drop column "workspace_id"`);
  }
}
