import { Migration } from "@mikro-orm/migrations";

/**
 * Governance: provisioned apps, their scoped keys, observability configs and the global
 * guard templates. Each app's own data lives in a schema that provisioning creates at run time
 * (api/governance/stores/store-sql.ts), not here.
 */
export class Migration20261123000000_governance extends Migration {
  override up(): void {
    this.addSql(`create table "governance_projects" (
      "id" uuid primary key,
      "workspace_id" varchar(32) not null references "workspaces" ("id") on delete cascade,
      "app_id" varchar(63) not null,
      "app_uid" varchar(64) null,
      "schema_name" varchar(63) not null unique,
      "role_name" varchar(63) not null unique,
      "status" varchar(16) not null check ("status" in ('active', 'disabled')),
      "generation" integer not null default 1 check ("generation" >= 1),
      "created_at" timestamptz not null default now(),
      "provisioned_at" timestamptz not null default now(),
      "disabled_at" timestamptz null,
      unique ("workspace_id", "app_id"))`);
    this.addSql(`create table "governance_app_keys" (
      "id" uuid primary key,
      "workspace_id" varchar(32) not null,
      "app_id" varchar(63) not null,
      "name" varchar(100) not null,
      "prefix" varchar(16) not null,
      "hash" char(64) not null unique,
      "created_at" timestamptz not null default now(),
      "last_used_at" timestamptz null,
      "revoked_at" timestamptz null,
      foreign key ("workspace_id", "app_id") references "governance_projects" ("workspace_id", "app_id") on delete cascade)`);
    this.addSql(`create index "governance_app_keys_app_idx" on "governance_app_keys" ("workspace_id", "app_id")`);
    this.addSql(`create sequence "governance_config_version_seq"`);
    this.addSql(`create table "governance_app_configs" (
      "id" uuid primary key,
      "workspace_id" varchar(32) not null references "workspaces" ("id") on delete cascade,
      "app_id" varchar(63) not null,
      "config" jsonb not null,
      "templates" jsonb not null default '{}',
      "version" bigint not null,
      "updated_at" timestamptz not null default now(),
      unique ("workspace_id", "app_id"))`);
    this.addSql(`create table "governance_guard_templates" (
      "id" uuid primary key,
      "name" varchar(100) not null,
      "description" text null,
      "guard_type" varchar(32) not null check ("guard_type" in ('pii_detection', 'prompt_injection', 'toxicity', 'off_topic', 'custom')),
      "config" jsonb not null,
      "created_at" timestamptz not null default now(),
      "updated_at" timestamptz not null default now())`);
    this.addSql(`create index "governance_guard_templates_created_at_idx" on "governance_guard_templates" ("created_at", "id")`);
  }

  override down(): void {
    this.addSql(`drop table "governance_guard_templates"`);
    this.addSql(`drop table "governance_app_configs"`);
    this.addSql(`drop sequence "governance_config_version_seq"`);
    this.addSql(`drop table "governance_app_keys"`);
    this.addSql(`drop table "governance_projects"`);
  }
}
