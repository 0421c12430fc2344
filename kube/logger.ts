// The one logger factory of both processes (the API and the operator): pino, structured, with
// secrets and AI payloads redacted wherever they appear in a log object (top level or one level
// down: `{ key }`, `{ headers: { authorization } }`, `{ trace: { prompt } }`).
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
  }, opts.destination);
}
