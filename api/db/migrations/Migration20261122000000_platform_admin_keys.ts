import { Migration } from "@mikro-orm/migrations";

/** Platform admin keys (pa_sk_...), stored only as SHA-256 digests like workspace keys. */
export class Migration20261122000000_platform_admin_keys extends Migration {
  override up(): void {
    this.addSql(`create table "platform_admin_keys" (
      "id" uuid primary key,
      "name" varchar(100) not null,
      "prefix" varchar(16) not null,
      "hash" char(64) not null unique,
      "created_at" timestamptz not null default now(),
      "last_used_at" timestamptz null,
      "revoked_at" timestamptz null)`);
  }

  override down(): void {
    this.addSql(`drop table "platform_admin_keys"`);
  }
}
