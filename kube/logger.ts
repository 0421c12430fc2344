// The one logger factory of both processes (the API and the operator): pino, structured, with
// secrets and AI payloads redacted wherever they appear in a log object (top level or one level
// down: `{ key }`, `{ headers: { authorization } }`, `{ trace: { prompt } }`), and credentials
// scrubbed by their shape from every serialized line.
import { pino, type DestinationStream, type Logger, type LevelWithSilent } from "pino";

export type { Logger } from "pino";

/** Field names that never reach a log line with their value. */
export const REDACTED_KEYS = [
  "authorization", "cookie", "set-cookie", "x-api-key",
  "apiKey", "key", "secret", "token", "password", "hash", "connectionString",
  "prompt", "response", "input", "output", "blockedContent",
] as const;

export const REDACT_PATHS: string[] = [
  ...REDACTED_KEYS.map((k) => `["${k}"]`),
  ...REDACTED_KEYS.map((k) => `*["${k}"]`),
  ...REDACTED_KEYS.map((k) => `*.*["${k}"]`),
];

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
  return pino({
    level: opts.level,
    base: opts.base ?? {},
    timestamp: pino.stdTimeFunctions.isoTime,
    redact: { paths: REDACT_PATHS, censor: "[redacted]" },
    serializers: { err: pino.stdSerializers.err },
    formatters: { level: (label) => ({ level: label }) },
    // the last line of defence, on the serialized line: a key or token anywhere (an error's message
    // or stack, a URL, a value deeper than the redact paths reach) is scrubbed by its shape
    hooks: { streamWrite: scrubTokens },
  }, opts.destination);
}
