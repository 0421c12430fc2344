import { Migration } from "@mikro-orm/migrations";

/**
 * Workspace members (api/workspaces/members.ts): people who sign in to the console with the
 * organisation's identity provider. Added by email (one row per workspace and email); the ID
 * token's issuer and subject are recorded at the first sign-in. A member goes with its workspace.
 */
export class Migration20261130000000_workspace_members extends Migration {
  override up(): void {
    this.addSql(`create table "workspace_members" (
      "id" uuid not null primary key,
      "workspace_id" varchar(32) not null references "workspaces" ("id") on delete cascade,
      "email" varchar(254) not null check ("email" = lower("email")),
      "issuer" varchar(2048) null,
      "subject" varchar(255) null,
      "created_at" timestamptz not null,
      "last_sign_in_at" timestamptz null,
      constraint "workspace_members_workspace_id_email_unique" unique ("workspace_id", "email"),
      constraint "workspace_members_identity_check" check (("issuer" is null) = ("subject" is null))
    )`);
    this.addSql(`create index "workspace_members_email_index" on "workspace_members" ("email")`);
  }

  override down(): void {
    this.addSql(`drop table "workspace_members"`);
  }
}
