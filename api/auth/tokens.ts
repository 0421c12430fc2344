// Secret tokens (pure): minting, hashing, display prefixes and the Bearer header.
// A key is <kind prefix> + 43 characters of base64url (32 random bytes). Only its SHA-256 digest
// is stored; digests are compared with crypto.timingSafeEqual.
import { createHash, randomBytes, timingSafeEqual } from "node:crypto";
import { APP_KEY_PREFIX } from "../../toolkit/src/client/connection.ts";

export const WORKSPACE_KEY_PREFIX = "ws_sk_";
export const PLATFORM_ADMIN_KEY_PREFIX = "pa_sk_";
/**
 * An app's scoped governance key (the credential inside GOVDB_CONNECTION): the toolkit, which
 * parses GOVDB_CONNECTION, declares the prefix; the API mints and checks keys with the same one.
 */
export { APP_KEY_PREFIX };
/** Characters of a key kept for display ("ws_sk_AbCdEf"): enough to tell keys apart, useless to an attacker. */
export const DISPLAY_PREFIX_LENGTH = 12;

const SECRET_BYTES = 32;
const SECRET_CHARS = 43; // base64url of 32 bytes, unpadded

export function mintToken(kindPrefix: string): string {
  return kindPrefix + randomBytes(SECRET_BYTES).toString("base64url");
}

/** Whether `token` is shaped like a key of this kind (cheap check before any lookup). */
export function isTokenOfKind(token: string, kindPrefix: string): boolean {
  if (!token.startsWith(kindPrefix) || token.length !== kindPrefix.length + SECRET_CHARS) return false;
  return /^[A-Za-z0-9_-]+$/.test(token.slice(kindPrefix.length));
}

/** SHA-256 of the whole token, lowercase hex (what the database stores). */
export function hashToken(token: string): string {
  return createHash("sha256").update(token, "utf8").digest("hex");
}

export function displayPrefix(token: string): string {
  return token.slice(0, DISPLAY_PREFIX_LENGTH);
}

/** Constant-time equality of two hex SHA-256 digests. */
export function digestsEqual(aHex: string, bHex: string): boolean {
  const a = Buffer.from(aHex, "hex");
  const b = Buffer.from(bHex, "hex");
  if (a.length !== 32 || b.length !== 32) return false;
  return timingSafeEqual(a, b);
}

/**
 * The token of an `Authorization: Bearer <token>` header; undefined when the header is absent,
 * uses another scheme or is malformed. The scheme is case-insensitive (RFC 9110).
 */
export function bearerToken(header: string | undefined): string | undefined {
  if (!header) return undefined;
  const m = /^Bearer +([A-Za-z0-9\-._~+/]+=*) *$/i.exec(header);
  return m?.[1];
}
