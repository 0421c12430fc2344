// The one logger factory of both processes (the API and the operator): pino, structured, with
// secrets and AI payloads redacted wherever they appear in a log object (top level or one level
// down: `{ key }`, `{ headers: { authorization } }`, `{ trace: { prompt } }`), and credentials
// scrubbed by their shape from every serialized line.
import { pino, type DestinationStream, type Logger, type LevelWithSilent } from "pino";

export type { Logger } from "pino";

/** Field names that never reach a log line with their value. */
export const REDACTED_KEYS = [
  "authorization",
  "cookie",
  "set-cookie",
  "x-api-key",
  "apiKey",
  "key",
  "secret",
  "token",
  "password",
  "hash",
  "connectionString",
  "prompt",
  "response",
  "input",
  "output",
  "blockedContent",
] as const;

const REDACTED = new Set<string>(REDACTED_KEYS);
const CENSOR = "[redacted]";
/** How deep a field is redacted by name: at the top level of a log object, one and two levels down. */
const REDACT_DEPTH = 3;

function walkable(v: unknown): v is Record<string, unknown> {
  if (v === null || typeof v !== "object") return false;
  if (Array.isArray(v)) return true;
  const proto: unknown = Object.getPrototypeOf(v);
  return proto === Object.prototype || proto === null;
}

/**
 * `obj` with every field named in REDACTED_KEYS censored, down to REDACT_DEPTH levels of plain
 * objects and arrays. The caller's object is never changed: what changes is copied. It replaces
 * pino's wildcard redact paths (`*.key`, `*.*.key`), which cost more than the rest of an API
 * request's logging; pino's own top-level paths stay, as they also cover child loggers' bindings.
 * Errors and other class instances go to their serializers; the line's final scrub still catches
 * credentials by shape.
 */
export function redactFields<T>(obj: T, depth = REDACT_DEPTH): T {
  if (!walkable(obj)) return obj;
  let out: Record<string, unknown> | undefined;
  for (const k of Object.keys(obj)) {
    const v = obj[k];
    const nv = REDACTED.has(k) ? (v === undefined ? v : CENSOR) : depth > 1 ? redactFields(v, depth - 1) : v;
    if (nv !== v) {
      out ??= (Array.isArray(obj) ? [...obj] : { ...obj }) as Record<string, unknown>;
      out[k] = nv;
    }
  }
  return (out ?? obj) as T;
}

/**
 * Credentials by their shape, wherever they sit in a string: Berth's keys (`ws_sk_`, `pa_sk_`,
 * `gov_sk_`: a prefix of lowercase letters, `_sk_`, base64url) and JWTs (ServiceAccount tokens).
 */
const TOKEN_SHAPES = /\b([a-z]{2,8}_sk_)[A-Za-z0-9_-]+|\beyJ[A-Za-z0-9_-]{4,}\.[A-Za-z0-9_-]{4,}\.[A-Za-z0-9_-]*/g;

/**
 * `text` with every credential-shaped part replaced (a key keeps its kind prefix). Every log line
 * goes through it; the API also keeps a credential from becoming a request id.
 */
export function scrubTokens(text: string): string {
  return text.replace(TOKEN_SHAPES, (_m, prefix: string | undefined) => `${prefix ?? ""}[redacted]`);
}

export interface LoggerOptions {
  level: LevelWithSilent;
  /** Where lines go; stdout when omitted. Tests pass a memory stream. */
  destination?: DestinationStream;
  /** Static fields on every line (e.g. `{ component: "api" }`). */
  base?: Record<string, unknown>;
}

export function createLogger(opts: LoggerOptions): Logger {
  return pino(
    {
      level: opts.level,
      base: opts.base ?? {},
      timestamp: pino.stdTimeFunctions.isoTime,
      redact: { paths: REDACTED_KEYS.map((k) => `["${k}"]`), censor: CENSOR },
      serializers: { err: pino.stdSerializers.err },
      formatters: { level: (label) => ({ level: label }), log: (o) => redactFields(o) },
      // the last line of defence, on the serialized line: a key or token anywhere (an error's message
      // or stack, a URL, a value deeper than the redact paths reach) is scrubbed by its shape
      hooks: { streamWrite: scrubTokens },
    },
    opts.destination,
  );
}
