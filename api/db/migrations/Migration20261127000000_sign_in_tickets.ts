import { Migration } from "@mikro-orm/migrations";

/**
 * Sign-in tickets already exchanged (api/shares/tickets.ts): a ticket handed back by the sign-in
 * flow works once across every API replica. Rows go once their ticket has expired (a minute).
 */
export class Migration20261127000000_sign_in_tickets extends Migration {
  override up(): void {
    this.addSql(`create table "used_sign_in_tickets" (
      "jti" varchar(64) not null primary key,
      "expires_at" timestamptz not null
    )`);
    this.addSql(`create index "used_sign_in_tickets_expires_at_index" on "used_sign_in_tickets" ("expires_at")`);
  }

  override down(): void {
    this.addSql(`drop table "used_sign_in_tickets"`);
  }
}
