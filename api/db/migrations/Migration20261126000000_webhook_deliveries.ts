import { Migration } from "@mikro-orm/migrations";

/**
 * Webhook deliveries already acted on (api/deployments/service.ts): a redelivery or a replay of the
 * same delivery id for the same service starts nothing. Rows older than the retention
 * (WEBHOOK_DELIVERY_RETENTION_DAYS) are deleted as new ones arrive.
 */
export class Migration20261126000000_webhook_deliveries extends Migration {
  override up(): void {
    this.addSql(`create table "webhook_deliveries" (
      "workspace_id" varchar(32) not null,
      "app_id" varchar(253) not null,
      "delivery_id" varchar(200) not null,
      "release_name" varchar(253) null,
      "received_at" timestamptz not null default now(),
      primary key ("workspace_id", "app_id", "delivery_id")
    )`);
    this.addSql(`create index "webhook_deliveries_received_at_index" on "webhook_deliveries" ("received_at")`);
  }

  override down(): void {
    this.addSql(`drop table "webhook_deliveries"`);
  }
}
