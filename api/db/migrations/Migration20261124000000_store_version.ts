import { Migration } from "@mikro-orm/migrations";

/**
 * The store template version each app's store was made (or last completed) with
 * (api/governance/stores/store-sql.ts STORE_TEMPLATE_VERSION). Stores that exist now were made by
 * version 1; the API completes them to the current version at start.
 */
export class Migration20261124000000_store_version extends Migration {
  override up(): void {
    this.addSql(`alter table "governance_projects" add column "store_version" integer not null default 1 check ("store_version" >= 1)`);
  }

  override down(): void {
    this.addSql(`alter table "governance_projects" drop column "store_version"`);
  }
}
