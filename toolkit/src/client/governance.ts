// One service's connection to the governance layer: the app key and host from GOVDB_CONNECTION,
// the guard engine compiled once from the app's config (fetched at boot), and the background
// queue that delivers traces. A Governance is cheap to hold and never throws from submit().
import { GuardEngine, type HeadScores } from "../engine.ts";
import type { GovdbConnection } from "./connection.ts";
import { readEnv, resolveConnection } from "./config.ts";
import { GovernanceConfigError, GuardUnavailableError } from "./errors.ts";
import type { Clock, GovernanceLogger, QueueOptions, QueueStats, TraceTransport } from "./queue.ts";
import { backoffDelay, realClock, TraceQueue, warningLogger } from "./queue.ts";
import type { Trace } from "./trace.ts";
import { toRecord, traceProblems } from "./trace.ts";
import type { ConfigOutcome, ToolkitConfig } from "./transport.ts";
import { HttpTransport } from "./transport.ts";

export type GovernanceMode = "on" | "noop";
/** What a call does when a guard it needs from the API cannot run (see ConfigureOptions.onGuardError). */
export type OnGuardError = "allow" | "block";

/** What a Governance asks of the API (HttpTransport; tests give their own). */
export type GovernanceTransport = TraceTransport & {
  config(signal?: AbortSignal): Promise<ConfigOutcome>;
  /** the API's classifier scores of a prompt (HttpTransport.classifierScore; a number: prompt injection alone) */
  classifierScore?(text: string, signal?: AbortSignal): Promise<number | HeadScores | undefined>;
};

/** The queue's delivery settings configure() passes on (see QueueOptions for their meaning and defaults). */
const DELIVERY_OPTIONS = ["maxQueue", "batchSize", "maxBatchBytes", "lingerMs", "initialBackoffMs", "maxBackoffMs"] as const;

export interface ConfigureOptions extends Pick<QueueOptions, (typeof DELIVERY_OPTIONS)[number]> {
  /** default GOVDB_CONNECTION */
  connection?: string | GovdbConnection;
  /** tags every trace (docs/spec.md part 1: the `project` option); default GOVERNANCE_PROJECT */
  project?: string;
  /** "noop": no network, no guards, submit() does nothing. Default "on", or "noop" when BERTH_GOVERNANCE=off. */
  mode?: GovernanceMode;
  /**
   * Fail configure() with GovernanceConfigError when the app's config cannot be fetched at boot.
   * Default false: start with the default EngineConfig and retry the fetch in the background.
   */
  requireConfig?: boolean;
  /** attempts to fetch the config when it fails at boot (the first included); default 5 */
  configAttempts?: number;
  /**
   * When a guard the call needs from the API cannot run (the prompt-injection classifier's score,
   * for a service without the classifier's files: the API does not answer the guard check):
   * "allow" (default) lets the call through on the patterns' decision, records the trace with
   * `metadata["berth.guards"] = "unavailable"`, and warns once per outage; "block" refuses it with
   * GuardUnavailableError before the model is called. The Python toolkit's on_guard_error.
   */
  onGuardError?: OnGuardError;
  /** flush on process beforeExit and SIGTERM (then let SIGTERM do what it would have done); default false */
  handleProcessExit?: boolean;
  /** how long shutdown() (and the process hooks) wait for the queue to drain; default 10 s */
  shutdownTimeoutMs?: number;
  /** per HTTP request; default 10 s */
  requestTimeoutMs?: number;
  /** where warnings go; default process.emitWarning (type BerthGovernanceWarning) */
  logger?: GovernanceLogger;
  /** read instead of process.env */
  env?: Record<string, string | undefined>;
  /** default the global fetch */
  fetch?: typeof fetch;
  /** replaces HTTP (tests) */
  transport?: GovernanceTransport;
  clock?: Clock;
  random?: () => number;
}

export interface SubmitOptions {
  /** overrides the configured project (GOVERNANCE_PROJECT) for this trace */
  project?: string;
}

export interface GovernanceStats extends QueueStats {
  mode: GovernanceMode;
  /** where the guard engine's config came from: the API, or the defaults (the fetch failed) */
  config: "api" | "default" | "none";
}

const EMPTY: QueueStats = { queued: 0, submitted: 0, sent: 0, duplicates: 0, rejected: 0, dropped: 0, retries: 0 };

/** The classifier's scores of a prompt from the API (none when its guards did not need them), or why there are none (onGuardError "allow"). */
export interface RemoteScore {
  score?: number | HeadScores | undefined;
  unavailable?: string;
}

export class Governance {
  readonly mode: GovernanceMode;
  readonly onGuardError: OnGuardError;
  /** the connection (host, database; the key is never printed); undefined in no-op mode */
  readonly connection: GovdbConnection | undefined;
  #project: string | undefined;
  readonly #requireConfig: boolean;
  readonly #configAttempts: number;
  readonly #shutdownTimeoutMs: number;
  readonly #logger: GovernanceLogger;
  readonly #clock: Clock;
  readonly #random: () => number;
  readonly #transport: GovernanceTransport | undefined;
  readonly #queue: TraceQueue | undefined;
  readonly #abort = new AbortController();
  #engine: GuardEngine | undefined;
  #configSource: "api" | "default" | "none" = "none";
  #remoteConfig: ToolkitConfig | undefined;
  #started: Promise<void> | undefined;
  #shutdown: Promise<boolean> | undefined;
  #unhook: (() => void) | undefined;
  /** the guard check is failing (one warning per outage); and the calls that went unguarded meanwhile */
  #guardOutage = false;
  #unguardedInOutage = 0;

  /** Synchronous: reads and checks the environment (GovdbConnectionError), builds nothing remote. Call start() next. */
  constructor(options: ConfigureOptions = {}) {
    const env = readEnv(options.env);
    this.mode = options.mode ?? (env.off ? "noop" : "on");
    this.#project = options.project ?? env.project;
    this.#requireConfig = options.requireConfig ?? false;
    this.onGuardError = options.onGuardError ?? "allow";
    if (this.onGuardError !== "allow" && this.onGuardError !== "block") throw new TypeError('onGuardError must be "allow" or "block"');
    this.#configAttempts = Math.max(1, options.configAttempts ?? 5);
    this.#shutdownTimeoutMs = options.shutdownTimeoutMs ?? 10_000;
    this.#logger = options.logger ?? warningLogger;
    this.#clock = options.clock ?? realClock;
    this.#random = options.random ?? Math.random;
    if (this.mode === "noop") {
      this.connection = undefined;
      return;
    }
    this.connection = resolveConnection(options.connection, env);
    this.#transport =
      options.transport ??
      new HttpTransport({
        connection: this.connection,
        ...(options.fetch ? { fetch: options.fetch } : {}),
        ...(options.requestTimeoutMs ? { timeoutMs: options.requestTimeoutMs } : {}),
      });
    this.#queue = new TraceQueue({
      transport: this.#transport,
      logger: this.#logger,
      clock: this.#clock,
      random: this.#random,
      ...pick(options, DELIVERY_OPTIONS),
    });
    if (options.handleProcessExit) this.#unhook = this.#hookProcess();
  }

  /** GOVERNANCE_PROJECT (or the `project` option) */
  get project(): string | undefined {
    return this.#project;
  }

  /**
   * The guard engine of this app: compiled once from the config fetched at boot (docs/spec.md part 3
   * rule 6: changes apply at the next restart), or from the default EngineConfig while that fetch
   * has not succeeded. undefined in no-op mode.
   */
  get engine(): GuardEngine | undefined {
    return this.#engine;
  }

  /** The config as fetched from the API (undefined until then, and in no-op mode). */
  get remoteConfig(): ToolkitConfig | undefined {
    return this.#remoteConfig;
  }

  /**
   * Fetches the app's config and compiles the engine. Resolves after the first attempt: on failure
   * the default EngineConfig is used and the fetch is retried in the background (up to
   * `configAttempts` in all), unless `requireConfig`, where it rejects with GovernanceConfigError.
   * Idempotent.
   */
  start(): Promise<void> {
    this.#started ??= this.#start();
    return this.#started;
  }

  async #start(): Promise<void> {
    if (this.mode === "noop" || !this.#transport) return;
    const first = await this.#fetchConfig();
    if (first === true) return;
    if (this.#requireConfig) {
      throw new GovernanceConfigError(`could not load the governance config at boot: ${first.error}`, first.status);
    }
    this.#useDefaults(first);
    if (first.retryable && this.#configAttempts > 1) void this.#retryConfig(first);
  }

  /** true, or why not */
  async #fetchConfig(): Promise<true | Extract<ConfigOutcome, { ok: false }>> {
    let outcome: ConfigOutcome;
    try {
      outcome = await this.#transport!.config(this.#abort.signal);
    } catch (err) {
      outcome = { ok: false, error: err instanceof Error ? err.message : String(err), retryable: true };
    }
    if (!outcome.ok) return outcome;
    let engine: GuardEngine;
    try {
      engine = new GuardEngine(outcome.config.engine);
    } catch (err) {
      return {
        ok: false,
        error: `the config does not compile: ${err instanceof Error ? err.message.slice(0, 300) : String(err)}`,
        retryable: false,
      };
    }
    this.#engine = engine;
    this.#remoteConfig = outcome.config;
    this.#configSource = "api";
    if (this.#project === undefined) this.#project = outcome.config.project;
    else if (this.#project !== outcome.config.project) {
      this.#logger.warn(
        `berth governance: GOVERNANCE_PROJECT is ${this.#project} but the key belongs to ${outcome.config.project}; the API will refuse its traces`,
        { code: "BERTH_GOVERNANCE_PROJECT_MISMATCH" },
      );
    }
    return true;
  }

  #useDefaults(failure: Extract<ConfigOutcome, { ok: false }>): void {
    this.#engine ??= new GuardEngine({});
    this.#configSource = "default";
    this.#logger.warn(
      `berth governance: could not load the app's guards and evals config (${failure.error}); guarding with the default config` +
        (failure.retryable && this.#configAttempts > 1 ? ", retrying in the background" : ""),
      { code: "BERTH_GOVERNANCE_CONFIG", status: failure.status },
    );
  }

  async #retryConfig(last: Extract<ConfigOutcome, { ok: false }>): Promise<void> {
    for (let attempt = 2; attempt <= this.#configAttempts && !this.#abort.signal.aborted; attempt++) {
      const delay = last.retryAfterMs ?? backoffDelay(attempt - 1, 1000, 30_000, this.#random);
      await new Promise<void>((resolve) => {
        const cancel = this.#clock.timer(resolve, delay);
        this.#abort.signal.addEventListener(
          "abort",
          () => {
            cancel();
            resolve();
          },
          { once: true },
        );
      });
      if (this.#abort.signal.aborted) return;
      const r = await this.#fetchConfig();
      if (r === true) return;
      last = r;
      if (!r.retryable) break;
    }
    if (!this.#abort.signal.aborted) {
      this.#logger.warn(
        `berth governance: gave up loading the governance config (${last.error}); the default config stays until the next restart`,
        { code: "BERTH_GOVERNANCE_CONFIG", status: last.status },
      );
    }
  }

  /**
   * The prompt-injection classifier's score of a prompt from the API's model (the guard check), for
   * a service that does not run the model itself: `score` undefined when the API's guards did not
   * need it. When the API does not answer, onGuardError decides: "allow" returns why
   * (`unavailable`; a warning once per outage), "block" throws GuardUnavailableError.
   */
  async classifierScore(text: string): Promise<RemoteScore> {
    const transport = this.#transport;
    let result: RemoteScore;
    try {
      if (!transport?.classifierScore) throw new Error("no API to ask for the classifier's score");
      result = { score: await transport.classifierScore(text, this.#abort.signal) };
    } catch (err) {
      return this.#guardsFailed(err instanceof Error ? err.message : String(err), err);
    }
    if (this.#guardOutage) {
      this.#guardOutage = false;
      this.#logger.warn(
        `berth governance: the guard check answers again (${this.#unguardedInOutage} call(s) went without the classifier meanwhile)`,
        { code: "BERTH_GOVERNANCE_GUARDS_AVAILABLE" },
      );
      this.#unguardedInOutage = 0;
    }
    return result;
  }

  #guardsFailed(reason: string, cause: unknown): RemoteScore {
    if (!this.#guardOutage) {
      this.#guardOutage = true;
      this.#logger.warn(
        `berth governance: the API could not score a prompt with the prompt-injection classifier (${reason}); ` +
          (this.onGuardError === "allow"
            ? 'calls proceed on the patterns alone until it answers again (onGuardError "allow")'
            : 'calls are refused until it answers again (onGuardError "block")'),
        { code: "BERTH_GOVERNANCE_GUARDS_UNAVAILABLE" },
      );
    }
    if (this.onGuardError === "block") throw new GuardUnavailableError("input", reason, { cause });
    this.#unguardedInOutage++;
    return { unavailable: reason };
  }

  /**
   * Queues one trace for delivery and returns its traceId (generated when absent). Never throws and
   * never waits: an invalid trace is counted as rejected, with a (rate-limited) warning. undefined
   * when nothing was queued (invalid, shut down, no-op mode).
   */
  submit(trace: Trace, options: SubmitOptions = {}): string | undefined {
    if (!this.#queue) return undefined;
    try {
      const problems = traceProblems(trace);
      if (problems.length > 0) {
        this.#queue.refuse(problems.join("; "));
        return undefined;
      }
      const record = toRecord(trace, options.project ?? this.#project, () => this.#clock.now());
      return this.#queue.enqueue(record) ? record.traceId : undefined;
    } catch (err) {
      this.#queue.refuse(err instanceof Error ? err.message : String(err));
      return undefined;
    }
  }

  /** Resolves true once every trace submitted so far is delivered (or settled), false after `timeoutMs`. */
  flush(timeoutMs = 10_000): Promise<boolean> {
    return this.#queue ? this.#queue.flush(timeoutMs) : Promise.resolve(true);
  }

  /** Flushes (up to `timeoutMs`), then stops: later submits are dropped. Idempotent. */
  shutdown(timeoutMs = this.#shutdownTimeoutMs): Promise<boolean> {
    this.#shutdown ??= (async () => {
      this.#unhook?.();
      this.#abort.abort();
      return this.#queue ? this.#queue.shutdown(timeoutMs) : true;
    })();
    return this.#shutdown;
  }

  stats(): GovernanceStats {
    return { ...(this.#queue ? this.#queue.stats() : EMPTY), mode: this.mode, config: this.#configSource };
  }

  #hookProcess(): () => void {
    const onBeforeExit = () => {
      void this.shutdown();
    };
    const onSigterm = () => {
      void this.shutdown().finally(() => {
        // nobody else handles SIGTERM: do what Node would have done without us
        if (process.listenerCount("SIGTERM") === 0) process.kill(process.pid, "SIGTERM");
      });
    };
    process.once("beforeExit", onBeforeExit);
    process.on("SIGTERM", onSigterm);
    return () => {
      process.removeListener("beforeExit", onBeforeExit);
      process.removeListener("SIGTERM", onSigterm);
    };
  }
}

function pick<T extends object, K extends keyof T>(o: T, keys: readonly K[]): Partial<Pick<T, K>> {
  const out: Partial<Pick<T, K>> = {};
  for (const k of keys) if (o[k] !== undefined) out[k] = o[k];
  return out;
}
