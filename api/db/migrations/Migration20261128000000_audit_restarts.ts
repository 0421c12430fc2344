import { Migration } from "@mikro-orm/migrations";

/**
 * The restarts of each app's audit chain (api/governance/stores/provisioning.ts): a store's chain
 * lives in the store and goes with it when the store is dropped (POST or DELETE .../provision, a
 * new App of the same id, the App's deletion). Before it goes, its length and head are recorded
 * here, outside the store, so that verification reports every restart and never presents a
 * chain that began again as the whole history. And the App an observability config belongs to
 * (its uid), so that a later App of the same id never inherits it.
 */
export class Migration20261128000000_audit_restarts extends Migration {
  override up(): void {
    this.addSql(`create table "governance_audit_restarts" (
      "id" uuid primary key,
      "workspace_id" varchar(32) not null references "workspaces" ("id") on delete cascade,
      "app_id" varchar(63) not null,
      "restarted_at" timestamptz not null default now(),
      "reason" varchar(32) not null,
      "actor" varchar(200) not null,
      "previous_entries" bigint not null,
      "previous_head_hash" varchar(64) null
    )`);
    this.addSql(
      `create index "governance_audit_restarts_app_index" on "governance_audit_restarts" ("workspace_id", "app_id", "restarted_at")`,
    );
    // the App an observability config was written for: a later App of the same id never reads it
    this.addSql(`alter table "governance_app_configs" add column "app_uid" varchar(64) null`);
  }

  override down(): void {
    this.addSql(`alter table "governance_app_configs" drop column "app_uid"`);
    this.addSql(`drop table "governance_audit_restarts"`);
  }
}
