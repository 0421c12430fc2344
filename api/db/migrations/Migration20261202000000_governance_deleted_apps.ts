import { Migration } from "@mikro-orm/migrations";

/**
 * The Apps whose stores the operator's finalizer dropped, by uid (api/governance/stores/provisioning.ts):
 * a provisioning call for one of them that arrives late (sent by an operator killed before it was
 * answered, and run after the drop) is refused instead of making the store again, or replacing the
 * store of a new App of the same name. Rows older than a day are pruned: no call waits that long.
 */
export class Migration20261202000000_governance_deleted_apps extends Migration {
  override up(): void {
    this.addSql(`create table "governance_deleted_apps" (
      "workspace_id" varchar(32) not null references "workspaces" ("id") on delete cascade,
      "app_id" varchar(63) not null,
      "app_uid" varchar(64) not null,
      "deleted_at" timestamptz not null default now(),
      primary key ("workspace_id", "app_id", "app_uid"))`);
    this.addSql(`create index "governance_deleted_apps_deleted_at_idx" on "governance_deleted_apps" ("deleted_at")`);
  }

  override down(): void {
    this.addSql(`drop table "governance_deleted_apps"`);
  }
}
