import { Migration } from "@mikro-orm/migrations";

/**
 * Console sessions opened by a workspace member's sign-in with the identity provider
 * (api/console/oidc.ts): a session belongs to an API key or to a member, exactly one, and goes
 * with it (cascade: removing the member ends their sessions).
 */
export class Migration20261201000000_console_member_sessions extends Migration {
  override up(): void {
    this.addSql(`alter table "console_sessions" alter column "api_key_id" drop not null`);
    this.addSql(`alter table "console_sessions" add column "member_id" uuid null references "workspace_members" ("id") on delete cascade`);
    this.addSql(
      `alter table "console_sessions" add constraint "console_sessions_owner_check" check (("api_key_id" is null) <> ("member_id" is null))`,
    );
    this.addSql(`create index "console_sessions_member_id_index" on "console_sessions" ("member_id")`);
  }

  override down(): void {
    // a member's session has no key to fall back to: it ends
    this.addSql(`delete from "console_sessions" where "api_key_id" is null`);
    this.addSql(`drop index "console_sessions_member_id_index"`);
    this.addSql(`alter table "console_sessions" drop constraint "console_sessions_owner_check"`);
    this.addSql(`alter table "console_sessions" drop column "member_id"`);
    this.addSql(`alter table "console_sessions" alter column "api_key_id" set not null`);
  }
}
