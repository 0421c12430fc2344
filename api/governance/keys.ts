// App keys (gov_sk_ + 43 base64url characters): the credential of an app's GOVDB_CONNECTION.
// Minted by provisioning (the operator's internal call), stored only as a SHA-256 digest with a
// display prefix, revoked whenever a new one is minted, and verified here for "app-key" routes.
import type { EntityManager } from "@mikro-orm/postgresql";
import type { AppKeyVerifier, AppPrincipal } from "../http/route.ts";
import type { Logger } from "../logger.ts";
import { APP_KEY_PREFIX, digestsEqual, hashToken, isTokenOfKind } from "../auth/tokens.ts";
import { LAST_USED_RESOLUTION_MS } from "../auth/keys.ts";
import { GovernanceAppKey } from "./entities.ts";

export { APP_KEY_PREFIX };

export class AppKeyService {
  readonly #now: () => Date;
  readonly #log: Logger;

  constructor(opts: { log: Logger; now?: () => Date }) {
    this.#log = opts.log;
    this.#now = opts.now ?? (() => new Date());
  }

  /** The app a current key belongs to; undefined for a malformed, unknown or revoked key. */
  async verify(em: EntityManager, token: string): Promise<AppPrincipal | undefined> {
    if (!isTokenOfKind(token, APP_KEY_PREFIX)) return undefined;
    const digest = hashToken(token);
    const row = await em.findOne(GovernanceAppKey, { hash: digest }, { disableIdentityMap: true });
    if (!row || !digestsEqual(row.hash, digest) || row.revokedAt) return undefined;
    const now = this.#now();
    const cutoff = new Date(now.getTime() - LAST_USED_RESOLUTION_MS);
    if (!row.lastUsedAt || row.lastUsedAt <= cutoff) {
      try {
        await em.nativeUpdate(GovernanceAppKey, { id: row.id, $or: [{ lastUsedAt: null }, { lastUsedAt: { $lte: cutoff } }] }, { lastUsedAt: now });
      } catch (err) {
        this.#log.warn({ err, keyId: row.id }, "could not record the app key's last use");
      }
    }
    return { kind: "app", workspaceId: row.workspaceId, appId: row.appId, keyId: row.id };
  }

  /** The AppKeyVerifier given to buildServer. */
  verifier(): AppKeyVerifier {
    return (token, { em }) => this.verify(em, token);
  }
}
