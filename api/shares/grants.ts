// The pure parts of share links and private services (docs/shares.md): share tokens and their
// hashes, values signed with the API's share key (the viewer's cookie, the sign-in ticket, the
// sign-in state), and the decision whether a request to a private App may pass. No I/O, no
// clock (time is passed in), no randomness except in mintShareToken and newNonce.
import { createHmac, randomBytes, timingSafeEqual } from "node:crypto";
import { digestsEqual, hashToken, isTokenOfKind, mintToken } from "../auth/tokens.ts";

/** Share tokens: `shr_sk_` + 43 base64url characters (32 random bytes); shaped like Berth's other keys, so logs scrub them. */
export const SHARE_TOKEN_PREFIX = "shr_sk_";

export function mintShareToken(): string {
  return mintToken(SHARE_TOKEN_PREFIX);
}

export function isShareToken(token: string): boolean {
  return isTokenOfKind(token, SHARE_TOKEN_PREFIX);
}

/** SHA-256 of the token, lowercase hex: what ShareSpec.tokenHash holds. */
export const shareTokenHash = hashToken;

/** Whether `token` hashes to `tokenHash`, compared in constant time. */
export function tokenMatches(token: string, tokenHash: string): boolean {
  return digestsEqual(shareTokenHash(token), tokenHash);
}

export function newNonce(): string {
  return randomBytes(16).toString("base64url");
}

// ---------------------------------------------------------------------------------------------
// Signed values: base64url(JSON) "." base64url(HMAC-SHA256(key, purpose "." body)). The purpose
// keeps a value signed for one use (a cookie) from being accepted for another (a sign-in ticket).

export type Purpose = "grant" | "login" | "oidc-state" | "console-oidc-state";

function mac(key: Buffer, purpose: Purpose, body: string): Buffer {
  return createHmac("sha256", key).update(`berth.${purpose}.v1.`).update(body).digest();
}

export function sign(key: Buffer, purpose: Purpose, payload: object): string {
  const body = Buffer.from(JSON.stringify(payload), "utf8").toString("base64url");
  return `${body}.${mac(key, purpose, body).toString("base64url")}`;
}

/** The payload of a value this key signed for this purpose; undefined when forged, tampered or malformed. */
export function verify(key: Buffer, purpose: Purpose, value: string | undefined): unknown {
  if (!value || value.length > 4096) return undefined;
  const dot = value.indexOf(".");
  if (dot <= 0 || dot !== value.lastIndexOf(".")) return undefined;
  const body = value.slice(0, dot);
  const given = Buffer.from(value.slice(dot + 1), "base64url");
  const want = mac(key, purpose, body);
  // Compared in constant time; a wrong length compares against the right MAC and fails anyway.
  const ok = timingSafeEqual(want, given.length === want.length ? given : Buffer.alloc(want.length));
  if (!ok || given.length !== want.length) return undefined;
  try {
    return JSON.parse(Buffer.from(body, "base64url").toString("utf8")) as unknown;
  } catch {
    return undefined;
  }
}

// ---------------------------------------------------------------------------------------------
// The viewer's grant (the cookie) and the sign-in ticket.

/** A signed-in viewer, as the identity provider named them. */
export interface Viewer {
  sub: string;
  email?: string | undefined;
}

/** What the cookie on an App's host says: this browser holds share `share` (uid) of App ns/app, for `host`, until `exp`. */
export interface Grant {
  ns: string;
  app: string;
  share: string;
  uid: string;
  host: string;
  /** Seconds since the epoch. */
  exp: number;
  user?: Viewer | undefined;
}

const str = (v: unknown): v is string => typeof v === "string" && v.length > 0 && v.length <= 512;

export function parseGrant(v: unknown): Grant | undefined {
  if (!v || typeof v !== "object") return undefined;
  const g = v as Record<string, unknown>;
  if (!str(g.ns) || !str(g.app) || !str(g.share) || !str(g.uid) || !str(g.host) || typeof g.exp !== "number") return undefined;
  const user = parseViewer(g.user);
  if (g.user !== undefined && !user) return undefined;
  return { ns: g.ns, app: g.app, share: g.share, uid: g.uid, host: g.host, exp: g.exp, ...(user ? { user } : {}) };
}

function parseViewer(v: unknown): Viewer | undefined {
  if (!v || typeof v !== "object") return undefined;
  const u = v as Record<string, unknown>;
  if (!str(u.sub)) return undefined;
  return { sub: u.sub, ...(str(u.email) ? { email: u.email } : {}) };
}

/** The sign-in flow's hand-back to an App's host: `user` signed in, for `host`, valid until `exp` (seconds), once (`jti`). */
export interface LoginTicket {
  host: string;
  user: Viewer;
  exp: number;
  jti: string;
}

export function parseTicket(v: unknown): LoginTicket | undefined {
  if (!v || typeof v !== "object") return undefined;
  const t = v as Record<string, unknown>;
  const user = parseViewer(t.user);
  if (!str(t.host) || !user || typeof t.exp !== "number" || !str(t.jti)) return undefined;
  return { host: t.host, user, exp: t.exp, jti: t.jti };
}

// ---------------------------------------------------------------------------------------------
// The decision.

/** A Share as the decision needs it (from the watch cache of Shares). */
export interface ShareView {
  name: string;
  uid: string;
  app: string;
  requireAuth: boolean;
  /** Milliseconds since the epoch; never expires when undefined. */
  expiresAt?: number | undefined;
}

export type DenyReason =
  | "no_grant" // no cookie and no token: a private App needs a share link
  | "invalid_token" // a token that matches no share of this App (forged, or of a revoked share)
  | "invalid_grant" // a cookie that fails its signature or does not parse (forged, tampered)
  | "wrong_app" // a cookie of another App or host
  | "grant_expired" // the cookie's own lifetime is over
  | "share_expired" // the share's expiresAt has passed
  | "share_revoked" // the share is gone (revoked) or was replaced (another uid)
  | "login_required"; // the share requires a signed-in viewer and there is none

export type Decision =
  { allow: true; share: ShareView; user?: Viewer | undefined } | { allow: false; reason: DenyReason; share?: ShareView | undefined };

/** Whether the share itself lets anyone in at `nowMs`. */
export function shareLive(
  share: ShareView | undefined,
  app: string,
  nowMs: number,
): { ok: true; share: ShareView } | { ok: false; reason: DenyReason } {
  if (!share || share.app !== app) return { ok: false, reason: "share_revoked" };
  if (share.expiresAt !== undefined && share.expiresAt <= nowMs) return { ok: false, reason: "share_expired" };
  return { ok: true, share };
}

/**
 * Whether a request to App `ns/app` at `host`, carrying `grant` (already verified; undefined when
 * there was no cookie), may pass at `nowMs`, given the share the grant names as the watch cache
 * holds it now (undefined: deleted, that is revoked).
 */
export function decide(
  req: { ns: string; app: string; host: string },
  grant: Grant | undefined,
  share: ShareView | undefined,
  nowMs: number,
): Decision {
  if (!grant) return { allow: false, reason: "no_grant" };
  if (grant.ns !== req.ns || grant.app !== req.app || grant.host !== req.host) return { allow: false, reason: "wrong_app" };
  if (grant.exp * 1000 <= nowMs) return { allow: false, reason: "grant_expired" };
  if (share && share.uid !== grant.uid) return { allow: false, reason: "share_revoked" };
  const live = shareLive(share, req.app, nowMs);
  if (!live.ok) return { allow: false, reason: live.reason, share };
  if (live.share.requireAuth && !grant.user) return { allow: false, reason: "login_required", share: live.share };
  return { allow: true, share: live.share, user: grant.user };
}

/** The grant's expiry (seconds): the session lifetime, cut at the share's own expiry. */
export function grantExpiry(share: ShareView, nowMs: number, sessionSeconds: number): number {
  const session = Math.floor(nowMs / 1000) + sessionSeconds;
  return share.expiresAt === undefined ? session : Math.min(session, Math.floor(share.expiresAt / 1000));
}

/** The Set-Cookie value of a grant on the App's host (host-only: no Domain attribute). */
export function grantCookie(name: string, value: string, opts: { maxAgeSeconds: number; secure: boolean }): string {
  return [
    `${name}=${value}`,
    "Path=/",
    `Max-Age=${Math.max(0, Math.floor(opts.maxAgeSeconds))}`,
    "HttpOnly",
    "SameSite=Lax",
    ...(opts.secure ? ["Secure"] : []),
  ].join("; ");
}

/** The value of cookie `name` in a Cookie header; undefined when absent. */
export function cookieValue(header: string | undefined, name: string): string | undefined {
  if (!header) return undefined;
  for (const part of header.split(";")) {
    const eq = part.indexOf("=");
    if (eq > 0 && part.slice(0, eq).trim() === name) return part.slice(eq + 1).trim();
  }
  return undefined;
}

/** `url` without the query parameters `names` (what the viewer is sent back to after a token or ticket was taken). */
export function withoutParams(url: URL, names: readonly string[]): string {
  const u = new URL(url.href);
  for (const n of names) u.searchParams.delete(n);
  return u.href;
}
