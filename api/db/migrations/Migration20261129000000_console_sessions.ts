import { Migration } from "@mikro-orm/migrations";

/**
 * Console sessions (api/console/sessions.ts): a workspace key exchanged for an HttpOnly cookie.
 * A session goes with its key and its workspace (cascade); expired rows are pruned when sessions
 * are opened.
 */
export class Migration20261129000000_console_sessions extends Migration {
  override up(): void {
    this.addSql(`create table "console_sessions" (
      "id" uuid not null primary key,
      "hash" char(64) not null unique,
      "workspace_id" varchar(32) not null references "workspaces" ("id") on delete cascade,
      "api_key_id" uuid not null references "api_keys" ("id") on delete cascade,
      "created_at" timestamptz not null,
      "expires_at" timestamptz not null,
      "revoked_at" timestamptz null
    )`);
    this.addSql(`create index "console_sessions_expires_at_index" on "console_sessions" ("expires_at")`);
    this.addSql(`create index "console_sessions_api_key_id_index" on "console_sessions" ("api_key_id")`);
  }

  override down(): void {
    this.addSql(`drop table "console_sessions"`);
  }
}
