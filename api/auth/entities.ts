// Platform admin keys (`pa_sk_...`): operate the platform itself (create workspaces), never a
// workspace's resources. Minted with `node api/cli.ts admin-key create`; stored only as SHA-256.
import { defineEntity, p, type InferEntity } from "@mikro-orm/core";

/** The columns every kind of key has: an id, a name, a display prefix and only a hash of the secret. */
export function keyProperties() {
  return {
    id: p.uuid().primary(),
    name: p.string().length(100),
    /** First characters of the key, shown so that people can tell keys apart. */
    prefix: p.string().length(16),
    /** SHA-256 of the whole key, hex. */
    hash: p.string().length(64).unique(),
    createdAt: p.datetime().onCreate(() => new Date()),
    lastUsedAt: p.datetime().nullable(),
    revokedAt: p.datetime().nullable(),
  };
}

export const PlatformAdminKey = defineEntity({
  name: "PlatformAdminKey",
  tableName: "platform_admin_keys",
  properties: keyProperties(),
});
export type PlatformAdminKey = InferEntity<typeof PlatformAdminKey>;
