import { Migration } from "@mikro-orm/migrations";

/** Workspaces and their API keys. */
export class Migration20261121000000_workspaces extends Migration {
  override up(): void {
    this.addSql(`create table "workspaces" (
      "id" varchar(32) primary key,
      "name" varchar(100) not null,
      "namespace" varchar(63) not null unique,
      "created_at" timestamptz not null default now())`);
    this.addSql(`create table "api_keys" (
      "id" uuid primary key,
      "workspace_id" varchar(32) not null references "workspaces" ("id") on delete cascade,
      "name" varchar(100) not null,
      "prefix" varchar(16) not null,
      "hash" char(64) not null unique,
      "created_at" timestamptz not null default now(),
      "last_used_at" timestamptz null,
      "revoked_at" timestamptz null)`);
    this.addSql(`create index "api_keys_workspace_id_idx" on "api_keys" ("workspace_id")`);
  }

  override down(): void {
    this.addSql(`drop table "api_keys"`);
    this.addSql(`drop table "workspaces"`);
  }
}
