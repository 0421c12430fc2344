// Console sessions. The browser never holds a key where a script can read it: the console sends a
// workspace key once (POST /console/sessions), or a workspace member signs in with the
// organisation's identity provider (api/console/oidc.ts), and gets back an HttpOnly,
// SameSite=Strict cookie (Secure and __Host- prefixed when the API's public URL is https) naming a
// server-side session.
//
// - The cookie's value is a random secret; only its SHA-256 is stored (as for keys), looked up by
//   its unique index and compared in constant time.
// - A session acts as the key that opened it, or as its member (a workspace caller without a key),
//   with the workspace's rate-limit budget, and ends when it expires (BERTH_CONSOLE_SESSION_SECONDS),
//   when it is signed out, when its key is revoked or when its member is removed.
// - Writes through a session (any method but GET/HEAD) must carry the session's CSRF token in
//   X-Berth-CSRF; the token is a one-way digest of the secret, handed to the console's script by
//   the session routes, so a page on another site can neither read nor forge it.
// - A key (or a member) holds at most BERTH_CONSOLE_MAX_SESSIONS_PER_KEY live sessions: opening one
//   more ends the oldest, so that no caller can fill the table through one key or one account.
import type { EntityManager } from "@mikro-orm/postgresql";
import { createHash, randomUUID, timingSafeEqual } from "node:crypto";
import { ForbiddenError, UnauthorizedError } from "../errors.ts";
import type { Principal } from "../http/route.ts";
import type { ApiKeyService } from "../auth/keys.ts";
import { digestsEqual, hashToken, isTokenOfKind, mintToken } from "../auth/tokens.ts";
import type { MemberView } from "../workspaces/members.ts";
import { ConsoleSession } from "./entities.ts";
import { cookieValue } from "../shares/grants.ts";

/** Prefix of a session cookie's value (never a key: it cannot be sent as a Bearer key). */
export const SESSION_TOKEN_PREFIX = "cs_";
/** The header a write through a session must carry, with the session's CSRF token. */
export const CSRF_HEADER = "X-Berth-CSRF";
const SAFE_METHODS = new Set(["GET", "HEAD", "OPTIONS"]);

export interface ConsoleSessionOptions {
  keys: ApiKeyService;
  /** How long a session lasts, in seconds. */
  ttlSeconds: number;
  maxPerKey: number;
  /** Whether the console is served over https (the cookie is then Secure and __Host- prefixed). */
  secure: boolean;
  now?: () => Date;
}

export interface OpenedSession extends SessionView {
  token: string;
}

export interface SessionView {
  workspaceId: string;
  csrfToken: string;
  expiresAt: Date;
  /** The member's email for a session a member opened by signing in with the identity provider; null for a key's. */
  email: string | null;
}

/** The keyId of a member's session (it has no key): stable per member, never a key's id (those are bare UUIDs). */
export function memberKeyId(memberId: string): string {
  return `member:${memberId}`;
}

/** The CSRF token of a session: a one-way digest of its secret (nothing more to store). */
export function csrfTokenOf(token: string): string {
  return createHash("sha256").update(`berth-console-csrf\0${token}`, "utf8").digest("base64url");
}

export class ConsoleSessions {
  readonly #o: ConsoleSessionOptions;
  readonly #now: () => Date;

  constructor(o: ConsoleSessionOptions) {
    this.#o = o;
    this.#now = o.now ?? (() => new Date());
  }

  /** The cookie's name: __Host- prefixed when Secure (the browser then refuses it from any other origin). */
  get cookieName(): string {
    return this.#o.secure ? "__Host-berth_console" : "berth_console";
  }

  /** Set-Cookie for a session (or, with no session, one that clears the cookie). */
  setCookie(session?: OpenedSession): string {
    const attrs = ["Path=/", "HttpOnly", "SameSite=Strict", ...(this.#o.secure ? ["Secure"] : [])];
    if (!session) return [`${this.cookieName}=`, "Max-Age=0", ...attrs].join("; ");
    const maxAge = Math.max(0, Math.floor((session.expiresAt.getTime() - this.#now().getTime()) / 1000));
    return [`${this.cookieName}=${session.token}`, `Max-Age=${maxAge}`, ...attrs].join("; ");
  }

  /** Opens a session for a current workspace key; 401 for anything else (the caller learns nothing more). */
  async open(em: EntityManager, key: string): Promise<OpenedSession> {
    const principal = await this.#o.keys.verify(em, key);
    if (!principal)
      throw new UnauthorizedError("The key is invalid or has been revoked; the console signs in with a workspace key (ws_sk_...).");
    return this.#open(em, principal.workspaceId, { apiKey: principal.keyId }, null);
  }

  /** Opens a session for a workspace member who signed in with the identity provider (api/console/oidc.ts). */
  async openForMember(em: EntityManager, member: MemberView): Promise<OpenedSession> {
    return this.#open(em, member.workspaceId, { member: member.id }, member.email);
  }

  async #open(
    em: EntityManager,
    workspaceId: string,
    owner: { apiKey: string } | { member: string },
    email: string | null,
  ): Promise<OpenedSession> {
    const now = this.#now();
    await em.nativeDelete(ConsoleSession, { expiresAt: { $lte: now } });
    const live = await em.find(
      ConsoleSession,
      { ...owner, revokedAt: null },
      { orderBy: { createdAt: "desc", id: "asc" }, fields: ["id"] },
    );
    const over = live.slice(Math.max(0, this.#o.maxPerKey - 1)).map((s) => s.id);
    if (over.length > 0) await em.nativeUpdate(ConsoleSession, { id: { $in: over } }, { revokedAt: now });
    const token = mintToken(SESSION_TOKEN_PREFIX);
    const expiresAt = new Date(now.getTime() + this.#o.ttlSeconds * 1000);
    em.create(ConsoleSession, {
      id: randomUUID(),
      hash: hashToken(token),
      workspace: workspaceId,
      apiKey: "apiKey" in owner ? owner.apiKey : null,
      member: "member" in owner ? owner.member : null,
      createdAt: now,
      expiresAt,
      revokedAt: null,
    });
    await em.flush();
    return { token, workspaceId, csrfToken: csrfTokenOf(token), expiresAt, email };
  }

  /** The live session a cookie names, with its key still current or its member still a member; undefined otherwise. */
  async find(em: EntityManager, token: string | undefined): Promise<(SessionView & { principal: Principal }) | undefined> {
    if (!token || !isTokenOfKind(token, SESSION_TOKEN_PREFIX)) return undefined;
    const hash = hashToken(token);
    const row = await em.findOne(ConsoleSession, { hash }, { populate: ["apiKey", "member"] });
    if (!row || !digestsEqual(row.hash, hash)) return undefined;
    if (row.revokedAt || row.expiresAt.getTime() <= this.#now().getTime()) return undefined;
    const workspaceId = row.workspace.id;
    const base = { workspaceId, csrfToken: csrfTokenOf(token), expiresAt: row.expiresAt };
    if (row.apiKey) {
      if (row.apiKey.revokedAt) return undefined;
      return { ...base, email: null, principal: { kind: "workspace", workspaceId, keyId: row.apiKey.id } };
    }
    // a removed member's sessions are deleted with the row; a member row of another workspace is never a session's
    if (!row.member || row.member.workspace.id !== workspaceId) return undefined;
    const member = { id: row.member.id, email: row.member.email };
    return { ...base, email: member.email, principal: { kind: "workspace", workspaceId, keyId: memberKeyId(member.id), member } };
  }

  /**
   * The caller of a request made with the session cookie: 401 when the session is not live, 403
   * csrf_failed for a write without the session's CSRF token.
   */
  async authenticate(em: EntityManager, req: { cookie: string | undefined; method: string; csrf: string | undefined }): Promise<Principal> {
    const token = cookieValue(req.cookie, this.cookieName);
    const s = await this.find(em, token);
    if (!s) throw new UnauthorizedError("The console session has ended: sign in again.");
    if (!SAFE_METHODS.has(req.method.toUpperCase())) {
      const expected = Buffer.from(s.csrfToken);
      const given = Buffer.from(req.csrf ?? "");
      if (given.length !== expected.length || !timingSafeEqual(given, expected)) {
        throw new ForbiddenError("csrf_failed", `A write through a console session must carry the session's token in ${CSRF_HEADER}.`);
      }
    }
    return s.principal;
  }

  /** Ends the session a cookie names (idempotent). */
  async close(em: EntityManager, token: string | undefined): Promise<void> {
    if (!token || !isTokenOfKind(token, SESSION_TOKEN_PREFIX)) return;
    await em.nativeUpdate(ConsoleSession, { hash: hashToken(token), revokedAt: null }, { revokedAt: this.#now() });
  }

  /** Whether a request carries this console's session cookie (and no Authorization header decides instead). */
  hasCookie(cookie: string | undefined): boolean {
    return cookieValue(cookie, this.cookieName) !== undefined;
  }
}
