// GOVDB_CONNECTION (docs/spec.md part 1): govdb://<key>@<host>/<database>[?tls=true|false].
// The key is an app key (gov_sk_...). The toolkit speaks HTTP to a loopback host (127.0.0.0/8,
// localhost, [::1]) or a cluster Service address (<svc>.<ns>.svc[...]) and HTTPS to any other; `tls` overrides. Pure; never echoes the key.
import { inspect } from "node:util";
import { GovdbConnectionError } from "./errors.ts";

export const APP_KEY_PREFIX = "gov_sk_";
const KEY = new RegExp(`^${APP_KEY_PREFIX}[A-Za-z0-9_-]+$`);
const DATABASE = /^[A-Za-z0-9_][A-Za-z0-9_.-]*$/;
const SHAPE = `expected govdb://<key>@<host>/<database> with a ${APP_KEY_PREFIX} key`;

/** A parsed GOVDB_CONNECTION. The key is readable (`key`) but never printed, logged or serialised. */
export class GovdbConnection {
  readonly #key: string;
  /** host with its port when given: "127.0.0.1:8080", "[::1]:8080", "governance.example.com" */
  readonly host: string;
  readonly database: string;
  readonly tls: boolean;
  /** http(s)://<host>: the server root; the API is under /api/v1 */
  readonly baseUrl: string;

  constructor(fields: { key: string; host: string; database: string; tls: boolean }) {
    this.#key = fields.key;
    this.host = fields.host;
    this.database = fields.database;
    this.tls = fields.tls;
    this.baseUrl = `${fields.tls ? "https" : "http"}://${fields.host}`;
  }

  get key(): string {
    return this.#key;
  }

  /** The key's display form: its prefix and first characters, as the API shows keys. */
  get keyPrefix(): string {
    return this.#key.slice(0, APP_KEY_PREFIX.length + 6);
  }

  toString(): string {
    return `govdb://${this.keyPrefix}…@${this.host}/${this.database}${this.tls === (isLoopback(this.host) || isClusterLocal(this.host)) ? (this.tls ? "?tls=true" : "?tls=false") : ""}`;
  }

  toJSON(): string {
    return this.toString();
  }

  [inspect.custom](): string {
    return `GovdbConnection <${this.toString()}>`;
  }
}

/**
 * A Kubernetes Service address, `<service>.<namespace>.svc[.<cluster domain>]` (with or without
 * its port): inside the cluster the API Service speaks plain HTTP (a mesh adds mTLS if there is
 * one), so these hosts default to HTTP like loopback ones.
 */
export function isClusterLocal(host: string): boolean {
  if (host.startsWith("[")) return false;
  const labels = host.replace(/:\d+$/, "").toLowerCase().split(".");
  const svc = labels.indexOf("svc");
  return svc >= 2 && labels.slice(0, svc).every((l) => /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/.test(l));
}

/** 127.0.0.0/8, localhost and [::1] (a host with or without its port). */
export function isLoopback(host: string): boolean {
  const name = host.startsWith("[") ? host.slice(0, host.indexOf("]") + 1) : host.replace(/:\d+$/, "");
  if (name === "localhost" || name === "[::1]") return true;
  return /^127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/.test(name);
}

/**
 * Parses a GOVDB_CONNECTION value. Throws GovdbConnectionError ("malformed") with a message that
 * says what is wrong without repeating the value.
 */
export function parseConnection(value: string): GovdbConnection {
  const bad = (what: string) => new GovdbConnectionError("malformed", `GOVDB_CONNECTION is malformed: ${what} (${SHAPE})`);
  const raw = value.trim();
  if (!raw.toLowerCase().startsWith("govdb://")) throw bad("the scheme is not govdb://");
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw bad("not a URL");
  }
  if (url.password !== "") throw bad("a password is not expected after the key");
  let key: string;
  try {
    key = decodeURIComponent(url.username);
  } catch {
    throw bad("the key is not valid");
  }
  if (key === "") throw bad("no key before @");
  if (!KEY.test(key))
    throw bad(
      key.startsWith(APP_KEY_PREFIX)
        ? "the key has characters other than A-Z a-z 0-9 _ -"
        : `the key does not start with ${APP_KEY_PREFIX}`,
    );
  if (url.hostname === "") throw bad("no host");
  const database = url.pathname.replace(/^\//, "");
  if (database === "" || !DATABASE.test(database))
    throw bad(database === "" ? "no database after the host" : "the database name is not a plain name");
  if (url.hash !== "") throw bad("a fragment is not expected");
  const hostname = url.hostname.toLowerCase();
  const host = url.port ? `${hostname}:${url.port}` : hostname;
  const tlsParam = url.searchParams.get("tls");
  let tls = !isLoopback(host) && !isClusterLocal(host);
  if (tlsParam !== null) {
    if (tlsParam !== "true" && tlsParam !== "false") throw bad("tls must be true or false");
    tls = tlsParam === "true";
  }
  return new GovdbConnection({ key, host, database, tls });
}
