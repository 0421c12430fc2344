// Names of an app's private store (pure): one PostgreSQL schema and one role per app, derived from
// the workspace id and the app id, always valid unquoted identifiers of at most 63 bytes, and the
// advisory-lock keys that serialize work on one app.
import { createHash } from "node:crypto";
import { DNS_LABEL } from "../../../crds/schemas.ts";
import { WORKSPACE_ID_PATTERN } from "../../workspaces/service.ts";

/** An app id is its App's name: a DNS label (at most 63 characters). */
const DNS_LABEL_RE = new RegExp(DNS_LABEL);
const isAppId = (id: string) => id.length <= 63 && DNS_LABEL_RE.test(id);
export const SCHEMA_PREFIX = "gov_";
export const ROLE_PREFIX = "govr_";
const IDENTIFIER = /^[a-z_][a-z0-9_]{0,62}$/;
/** Room for the app part: 63 - "govr_" - workspace id (12) - "_". */
const APP_PART_MAX = 63 - ROLE_PREFIX.length - 12 - 1;

export interface StoreNames {
  /** the app's schema, e.g. gov_wsabcdefghij_web_shop */
  schema: string;
  /** the app's NOLOGIN role, e.g. govr_wsabcdefghij_web_shop */
  role: string;
}

/**
 * The schema and role of an app's store. Deterministic, so that a retried provisioning finds what
 * an interrupted one created. `-` becomes `_` (app ids have no `_`, so this is injective); an app
 * id too long for the budget keeps its first characters and gets 8 hex digits of its SHA-256.
 */
export function storeNames(workspaceId: string, appId: string): StoreNames {
  if (!WORKSPACE_ID_PATTERN.test(workspaceId)) throw new Error(`not a workspace id: ${workspaceId}`);
  if (!isAppId(appId)) throw new Error(`not an app id: ${appId}`);
  let app = appId.replaceAll("-", "_");
  if (app.length > APP_PART_MAX) {
    const digest = createHash("sha256").update(appId).digest("hex").slice(0, 8);
    app = `${app.slice(0, APP_PART_MAX - 9)}_${digest}`;
  }
  const base = `${workspaceId}_${app}`;
  return { schema: SCHEMA_PREFIX + base, role: ROLE_PREFIX + base };
}

/** A double-quoted identifier; refuses anything that is not a plain lower-case identifier. */
export function ident(name: string): string {
  if (!IDENTIFIER.test(name)) throw new Error(`refusing an unexpected SQL identifier: ${JSON.stringify(name)}`);
  return `"${name}"`;
}

/** A single-quoted SQL literal of a plain identifier (for catalog lookups in DDL). */
export function identLiteral(name: string): string {
  ident(name);
  return `'${name}'`;
}

/** First key of the two-int advisory locks (pg_advisory_xact_lock(class, hashtext(name))). */
export const LOCK_CLASS = {
  /** provisioning and de-provisioning of one app */
  provision: 7301,
  /** appending to one app's audit chain */
  audit: 7302,
} as const;
