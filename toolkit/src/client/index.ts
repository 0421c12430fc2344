// The plain path (docs/spec.md part 1, client path 2): configure() once at boot, submit() after each
// LLM call. These functions use one Governance per process; create a Governance yourself to hold
// several or to inject a transport.
import { GovdbConnectionError } from "./errors.ts";
import type { ConfigureOptions, GovernanceStats, SubmitOptions } from "./governance.ts";
import { Governance } from "./governance.ts";
import { warningLogger } from "./queue.ts";
import type { Trace } from "./trace.ts";

let current: Governance | undefined;
let currentStart: Promise<Governance> | undefined;

/**
 * Configures the toolkit from GOVDB_CONNECTION and GOVERNANCE_PROJECT (or `options`) and fetches
 * the app's guards and evals config. Once per process: later calls return the same Governance (call
 * shutdown() first to configure again). Rejects with GovdbConnectionError when the variable is
 * missing or malformed (unless in no-op mode), and with GovernanceConfigError when
 * `requireConfig` is set and the config cannot be fetched.
 */
export function configure(options: ConfigureOptions = {}): Promise<Governance> {
  if (currentStart) return currentStart;
  let g: Governance;
  try {
    g = new Governance(options);
  } catch (err) {
    return Promise.reject(err instanceof Error ? err : new Error(String(err)));
  }
  current = g;
  currentStart = g.start().then(
    () => g,
    async (err: unknown) => {
      if (current === g) {
        current = undefined;
        currentStart = undefined;
      }
      await g.shutdown(0);
      throw err;
    },
  );
  return currentStart;
}

/**
 * The process's Governance, configured from the environment on first use if configure() was not
 * called (the config fetch then runs in the background). Throws GovdbConnectionError when
 * GOVDB_CONNECTION is missing or malformed and governance is not off.
 */
export function governance(): Governance {
  if (!current) {
    const g = new Governance();
    current = g;
    // requireConfig is off: a failed fetch falls back to the defaults, start() does not reject
    currentStart = g.start().then(
      () => g,
      () => g,
    );
  }
  return current;
}

let warnedUnconfigured = false;

/**
 * Queues one trace (docs/spec.md part 1) for background delivery and returns its traceId. Never throws
 * and never waits; see Governance.submit.
 */
export function submit(trace: Trace, options: SubmitOptions = {}): string | undefined {
  let g: Governance;
  try {
    g = governance();
  } catch (err) {
    if (!warnedUnconfigured) {
      warnedUnconfigured = true;
      warningLogger.warn(`berth governance: traces are not recorded: ${err instanceof GovdbConnectionError ? err.message : String(err)}`, {
        code: "BERTH_GOVERNANCE_UNCONFIGURED",
      });
    }
    return undefined;
  }
  return g.submit(trace, options);
}

/** Resolves true once every trace submitted so far is delivered, false after `timeoutMs`. */
export function flush(timeoutMs?: number): Promise<boolean> {
  return current ? current.flush(timeoutMs) : Promise.resolve(true);
}

/** Flushes, then stops the process's Governance; configure() may be called again afterwards. */
export async function shutdown(timeoutMs?: number): Promise<boolean> {
  const g = current;
  current = undefined;
  currentStart = undefined;
  return g ? g.shutdown(timeoutMs) : true;
}

/** The counters of the process's Governance; undefined before it is configured. */
export function stats(): GovernanceStats | undefined {
  return current?.stats();
}

export { Governance } from "./governance.ts";
export type { ConfigureOptions, GovernanceMode, GovernanceStats, GovernanceTransport, SubmitOptions } from "./governance.ts";
export { APP_KEY_PREFIX, GovdbConnection, isLoopback, parseConnection } from "./connection.ts";
export { GovdbConnectionError, GovernanceConfigError, GuardBlockedError, GuardUnavailableError } from "./errors.ts";
export { readEnv } from "./config.ts";
export type { GovernanceEnv } from "./config.ts";
export type { Clock, GovernanceLogger, ItemResult, ItemStatus, QueueStats, SendOutcome, TraceTransport } from "./queue.ts";
export { backoffDelay, TraceQueue } from "./queue.ts";
export { MAX_BATCH_SIZE, MAX_TRACE_TEXT, TraceRecord } from "./trace.ts";
export type { Trace, TraceTokens } from "./trace.ts";
export type { ConfigOutcome, ToolkitConfig } from "./transport.ts";
export { HttpTransport, parseRetryAfter } from "./transport.ts";
