// The background sender of traces: an in-memory queue, bounded, sent in batches, retried with
// exponential backoff and jitter, flushed on demand. It never throws into the caller and never
// blocks it: enqueue() is synchronous and O(1) amortised; the network is touched only by the one
// loop that drains the queue.
//
// Delivery: a batch is the oldest queued traces, at most `batchSize` of them and at most
// `maxBatchBytes` of body. The loop sends a batch when it is full, when the oldest trace has waited
// `lingerMs`, or at once while someone waits in flush(). Outcomes:
// - per-item results: created -> sent, duplicate -> duplicates (a retry of something the API had
//   already stored: the API is idempotent on traceId), rejected -> rejected (with a warning);
// - network error, timeout, 408, 429, 5xx: the batch goes back to the head of the queue and is
//   sent again after a backoff (exponential with jitter, or the server's Retry-After);
// - 413: the batch is split in half (a single trace too large for the API is rejected);
// - any other 4xx: the batch is not retried; its traces are counted as rejected, with a warning.
// The bound counts every trace not yet settled; when a new trace would exceed it, the oldest
// trace not in flight is dropped (counted, with a warning).
import { MAX_BATCH_SIZE, type TraceRecord } from "./trace.ts";

/**
 * Time as the queue sees it (injected in tests). Real timers do not keep the process alive, except
 * a deadline someone awaits (`keepAlive`): the deadline of flush() and shutdown(), so that
 * `await shutdown()` at the end of a script resolves instead of leaving the process with nothing to
 * run (Node.js then exits with code 13, its await unsettled).
 */
export interface Clock {
  now(): number;
  /** runs `fn` after `ms`; returns a function that cancels it */
  timer(fn: () => void, ms: number, keepAlive?: boolean): () => void;
}

export const realClock: Clock = {
  now: () => Date.now(),
  timer(fn, ms, keepAlive = false) {
    const t = setTimeout(fn, ms);
    if (!keepAlive) t.unref();
    return () => clearTimeout(t);
  },
};

export type ItemStatus = "created" | "duplicate" | "rejected";

/** The API's answer for one trace of a batch. */
export interface ItemResult {
  traceId: string;
  status: ItemStatus;
  /** why a trace was rejected (free text from the API) */
  reason?: string;
}

/** What became of one attempt to send a batch (a transport never throws). */
export type SendOutcome =
  | { kind: "accepted"; results: ItemResult[] }
  | { kind: "retry"; error: string; status?: number; retryAfterMs?: number }
  | { kind: "rejected"; error: string; status: number }
  | { kind: "too_large"; error: string };

/** Sends one batch body (`{"traces":[...]}`) to the API. */
export interface TraceTransport {
  send(body: string, count: number, signal: AbortSignal): Promise<SendOutcome>;
}

/** Where warnings go (default: process.emitWarning). Messages never contain prompts, responses or keys. */
export interface GovernanceLogger {
  warn(message: string, details: Record<string, unknown>): void;
}

export const warningLogger: GovernanceLogger = {
  warn(message, details) {
    process.emitWarning(message, {
      type: "BerthGovernanceWarning",
      code: typeof details.code === "string" ? details.code : "BERTH_GOVERNANCE",
    });
  },
};

export interface QueueStats {
  /** traces waiting to be sent or in flight now */
  queued: number;
  /** traces accepted into the queue since start */
  submitted: number;
  /** traces the API stored (status created) */
  sent: number;
  /** traces the API already had (status duplicate: a retry of a batch whose answer was lost) */
  duplicates: number;
  /** traces the API refused (per-item rejected, a 4xx on the batch, too large), never retried */
  rejected: number;
  /** traces dropped without being sent: the memory bound, or undelivered at shutdown */
  dropped: number;
  /** failed attempts that were retried */
  retries: number;
  lastError?: { message: string; status?: number; at: string };
}

export interface QueueOptions {
  transport: TraceTransport;
  /** most traces held in memory (waiting or in flight); default 10,000. Beyond it the oldest waiting traces are dropped, counted (stats().dropped) and warned about. */
  maxQueue?: number;
  /** most traces per request; default and maximum 500 */
  batchSize?: number;
  /** most bytes per request body; default 1,000,000 (the API's default limit is 1 MiB) */
  maxBatchBytes?: number;
  /** how long the oldest trace may wait for a batch to fill; default 250 ms */
  lingerMs?: number;
  /** first retry delay (doubled each time, with jitter); default 500 ms */
  initialBackoffMs?: number;
  /** longest retry delay; default 30 s */
  maxBackoffMs?: number;
  /** longest Retry-After honoured; default 5 min */
  maxRetryAfterMs?: number;
  /** at most one warning of a kind per interval (the rest are counted); default 30 s */
  warnIntervalMs?: number;
  logger?: GovernanceLogger;
  clock?: Clock;
  /** uniform in [0, 1); default Math.random */
  random?: () => number;
}

const BODY_OVERHEAD = '{"traces":[]}'.length;

interface Entry {
  seq: number;
  traceId: string;
  json: string;
  bytes: number;
  at: number;
}

/** A FIFO with O(1) push, shift and unshift of a batch. */
class Deque<T> {
  #items: T[] = [];
  #head = 0;

  get length(): number {
    return this.#items.length - this.#head;
  }

  at(i: number): T | undefined {
    return this.#items[this.#head + i];
  }

  push(item: T): void {
    this.#items.push(item);
  }

  shift(): T | undefined {
    if (this.length === 0) return undefined;
    const item = this.#items[this.#head]!;
    this.#head++;
    if (this.#head > 1024 && this.#head * 2 > this.#items.length) {
      this.#items = this.#items.slice(this.#head);
      this.#head = 0;
    }
    return item;
  }

  /** puts `items` back at the head, in their order */
  unshiftAll(items: readonly T[]): void {
    this.#items = [...items, ...this.#items.slice(this.#head)];
    this.#head = 0;
  }

  clear(): T[] {
    const rest = this.#items.slice(this.#head);
    this.#items = [];
    this.#head = 0;
    return rest;
  }
}

/** Backoff before retry number `attempt` (1-based): exponential, capped, with "equal jitter". */
export function backoffDelay(attempt: number, initialMs: number, maxMs: number, random: () => number): number {
  const ceiling = Math.min(maxMs, initialMs * 2 ** Math.min(attempt - 1, 30));
  return Math.round(ceiling / 2 + random() * (ceiling / 2));
}

interface Sleep {
  done: () => void;
  wakeable: boolean;
}

export class TraceQueue {
  readonly #transport: TraceTransport;
  readonly #maxQueue: number;
  readonly #batchSize: number;
  readonly #maxBatchBytes: number;
  readonly #lingerMs: number;
  readonly #initialBackoffMs: number;
  readonly #maxBackoffMs: number;
  readonly #maxRetryAfterMs: number;
  readonly #warnIntervalMs: number;
  readonly #logger: GovernanceLogger;
  readonly #clock: Clock;
  readonly #random: () => number;

  readonly #pending = new Deque<Entry>();
  #inflight: Entry[] = [];
  #seq = 0;
  #attempt = 0;
  #splitLimit: number | undefined;
  #running: Promise<void> | undefined;
  #sleep: Sleep | undefined;
  #waiters: { seq: number; resolve: (drained: boolean) => void }[] = [];
  #closed = false;
  #stopped = false;
  readonly #abort = new AbortController();
  readonly #counters = { submitted: 0, sent: 0, duplicates: 0, rejected: 0, dropped: 0, retries: 0 };
  #lastError: QueueStats["lastError"];
  readonly #warned = new Map<string, { at: number; suppressed: number }>();

  constructor(opts: QueueOptions) {
    this.#transport = opts.transport;
    this.#maxQueue = positiveInt(opts.maxQueue ?? 10_000, "maxQueue");
    this.#batchSize = Math.min(positiveInt(opts.batchSize ?? MAX_BATCH_SIZE, "batchSize"), MAX_BATCH_SIZE, this.#maxQueue);
    this.#maxBatchBytes = positiveInt(opts.maxBatchBytes ?? 1_000_000, "maxBatchBytes");
    this.#lingerMs = Math.max(0, opts.lingerMs ?? 250);
    this.#initialBackoffMs = Math.max(1, opts.initialBackoffMs ?? 500);
    this.#maxBackoffMs = Math.max(this.#initialBackoffMs, opts.maxBackoffMs ?? 30_000);
    this.#maxRetryAfterMs = Math.max(0, opts.maxRetryAfterMs ?? 300_000);
    this.#warnIntervalMs = Math.max(0, opts.warnIntervalMs ?? 30_000);
    this.#logger = opts.logger ?? warningLogger;
    this.#clock = opts.clock ?? realClock;
    this.#random = opts.random ?? Math.random;
  }

  /** Queues one trace; false when it was refused (queue closed, larger than a request may be). Never throws. */
  enqueue(record: TraceRecord): boolean {
    if (this.#closed) {
      this.#counters.dropped++;
      this.#warn("closed", `a trace was submitted after shutdown and dropped (${this.#counters.dropped} dropped in all)`);
      return false;
    }
    const json = JSON.stringify(record);
    const bytes = Buffer.byteLength(json);
    if (bytes + BODY_OVERHEAD > this.#maxBatchBytes) {
      this.#counters.rejected++;
      this.#warn(
        "too_large",
        `trace ${record.traceId} is ${bytes} bytes, more than a request may carry (${this.#maxBatchBytes}); rejected without sending`,
      );
      return false;
    }
    this.#pending.push({ seq: ++this.#seq, traceId: record.traceId, json, bytes, at: this.#clock.now() });
    this.#counters.submitted++;
    this.#enforceBound();
    this.#kick();
    return true;
  }

  /** Counts a trace refused before it was queued (invalid), with a rate-limited warning. */
  refuse(reason: string): void {
    this.#counters.rejected++;
    this.#warn("invalid_trace", `a trace was not submitted: ${reason} (${this.#counters.rejected} rejected in all)`);
  }

  stats(): QueueStats {
    const s: QueueStats = { queued: this.#pending.length + this.#inflight.length, ...this.#counters };
    if (this.#lastError) s.lastError = { ...this.#lastError };
    return s;
  }

  /**
   * Resolves true once every trace queued before the call is settled (sent, duplicate, rejected or
   * dropped), false if that takes longer than `timeoutMs`. Sends at once, without waiting for a
   * batch to fill; retries keep their backoff.
   */
  flush(timeoutMs = 10_000): Promise<boolean> {
    const seq = this.#seq;
    if (this.#minUnsettled() > seq) return Promise.resolve(true);
    return new Promise<boolean>((resolve) => {
      let cancel = () => {};
      const waiter = {
        seq,
        resolve: (drained: boolean) => {
          cancel();
          this.#waiters = this.#waiters.filter((w) => w !== waiter);
          resolve(drained);
        },
      };
      this.#waiters.push(waiter);
      cancel = this.#clock.timer(() => waiter.resolve(false), timeoutMs, true);
      this.#kick();
    });
  }

  /**
   * Stops taking traces, flushes for up to `timeoutMs`, then stops the loop: what is still queued
   * is dropped (counted, with a warning). Resolves true when everything was delivered.
   */
  async shutdown(timeoutMs = 10_000): Promise<boolean> {
    this.#closed = true;
    const drained = await this.flush(timeoutMs);
    this.#stopped = true;
    this.#abort.abort(new Error("shut down"));
    this.#sleep?.done();
    await this.#running;
    const left = [...this.#inflight, ...this.#pending.clear()];
    this.#inflight = [];
    if (left.length > 0) {
      this.#counters.dropped += left.length;
      this.#warnNow(
        "undelivered",
        `${left.length} traces were not delivered before shutdown and are lost (${this.#counters.dropped} dropped in all)`,
        { count: left.length },
      );
    }
    for (const w of [...this.#waiters]) w.resolve(left.length === 0);
    return drained && left.length === 0;
  }

  // -------------------------------------------------------------------------------------------

  #minUnsettled(): number {
    return this.#inflight[0]?.seq ?? this.#pending.at(0)?.seq ?? Infinity;
  }

  #enforceBound(): void {
    let dropped = 0;
    while (this.#pending.length + this.#inflight.length > this.#maxQueue && this.#pending.length > 0) {
      this.#pending.shift();
      dropped++;
    }
    if (dropped > 0) {
      this.#counters.dropped += dropped;
      this.#warn(
        "dropped",
        `the trace queue is full (${this.#maxQueue}): dropped the oldest trace (${this.#counters.dropped} dropped in all)`,
      );
      this.#settleWaiters();
    }
  }

  #urgent(): boolean {
    return this.#pending.length >= this.#batchSize || this.#waiters.length > 0 || this.#closed;
  }

  #kick(): void {
    if (this.#stopped) return;
    if (!this.#running) {
      // started after the current task: enqueue() returns at once, and the traces of one burst share a batch
      this.#running = Promise.resolve()
        .then(() => this.#run())
        .finally(() => {
          this.#running = undefined;
          // a trace may have arrived while the loop was finishing
          if (this.#pending.length > 0 && !this.#stopped) this.#kick();
        });
    } else if (this.#sleep?.wakeable && this.#urgent()) {
      this.#sleep.done();
    }
  }

  #wait(ms: number, wakeable: boolean): Promise<void> {
    return new Promise<void>((resolve) => {
      let cancel = () => {};
      const sleep: Sleep = {
        wakeable,
        done: () => {
          cancel();
          if (this.#sleep === sleep) this.#sleep = undefined;
          resolve();
        },
      };
      this.#sleep = sleep;
      cancel = this.#clock.timer(sleep.done, ms);
    });
  }

  async #run(): Promise<void> {
    while (!this.#stopped && this.#pending.length > 0) {
      if (!this.#urgent()) {
        const wait = this.#pending.at(0)!.at + this.#lingerMs - this.#clock.now();
        if (wait > 0) {
          await this.#wait(wait, true);
          continue;
        }
      }
      const batch = this.#take();
      this.#inflight = batch;
      const outcome = await this.#send(batch);
      if (this.#stopped) return;
      this.#inflight = [];
      const delay = this.#settle(batch, outcome);
      this.#settleWaiters();
      if (delay !== undefined) await this.#wait(delay, false);
    }
  }

  #take(): Entry[] {
    const limit = Math.min(this.#batchSize, this.#splitLimit ?? Infinity);
    const batch: Entry[] = [];
    let bytes = BODY_OVERHEAD;
    while (batch.length < limit && this.#pending.length > 0) {
      const next = this.#pending.at(0)!;
      if (batch.length > 0 && bytes + next.bytes + 1 > this.#maxBatchBytes) break;
      bytes += next.bytes + (batch.length > 0 ? 1 : 0);
      batch.push(this.#pending.shift()!);
    }
    return batch;
  }

  async #send(batch: Entry[]): Promise<SendOutcome> {
    const body = `{"traces":[${batch.map((e) => e.json).join(",")}]}`;
    try {
      return await this.#transport.send(body, batch.length, this.#abort.signal);
    } catch (err) {
      return { kind: "retry", error: err instanceof Error ? err.message : String(err) };
    }
  }

  /** Counts an outcome; returns the delay before the next attempt when the batch is to be retried. */
  #settle(batch: Entry[], outcome: SendOutcome): number | undefined {
    switch (outcome.kind) {
      case "accepted": {
        this.#attempt = 0;
        // a split (413) holds until the queue is drained
        if (this.#pending.length === 0) this.#splitLimit = undefined;
        const byId = new Map(outcome.results.map((r) => [r.traceId, r]));
        const reasons: string[] = [];
        for (const e of batch) {
          const r = byId.get(e.traceId);
          // a 2xx without an item result for a trace: the API took the batch
          if (!r || r.status === "created") this.#counters.sent++;
          else if (r.status === "duplicate") this.#counters.duplicates++;
          else {
            this.#counters.rejected++;
            reasons.push(`${e.traceId}: ${r.reason ?? "rejected"}`);
          }
        }
        if (reasons.length > 0) {
          this.#recordError(`the API rejected ${reasons.length} trace(s): ${reasons.slice(0, 3).join("; ")}`);
          this.#warn(
            "rejected",
            `the API rejected ${reasons.length} trace(s) (${this.#counters.rejected} rejected in all): ${reasons.slice(0, 3).join("; ")}`,
          );
        }
        return undefined;
      }
      case "retry": {
        this.#counters.retries++;
        this.#attempt++;
        this.#recordError(outcome.error, outcome.status);
        this.#pending.unshiftAll(batch);
        this.#enforceBound();
        const backoff = backoffDelay(this.#attempt, this.#initialBackoffMs, this.#maxBackoffMs, this.#random);
        const delay =
          outcome.retryAfterMs !== undefined
            ? Math.min(outcome.retryAfterMs, this.#maxRetryAfterMs) +
              Math.round(this.#random() * Math.min(1000, outcome.retryAfterMs * 0.1))
            : backoff;
        this.#warn(
          "retry",
          `sending traces failed (${outcome.error}); ${this.#pending.length} queued, retrying in ${delay} ms (attempt ${this.#attempt})`,
        );
        return delay;
      }
      case "too_large": {
        if (batch.length > 1) {
          this.#splitLimit = Math.ceil(batch.length / 2);
          this.#pending.unshiftAll(batch);
          return undefined;
        }
        this.#counters.rejected++;
        this.#recordError(outcome.error, 413);
        this.#warn(
          "too_large",
          `the API refused trace ${batch[0]?.traceId ?? ""} as too large (${this.#counters.rejected} rejected in all)`,
        );
        return undefined;
      }
      case "rejected": {
        this.#attempt = 0;
        this.#counters.rejected += batch.length;
        this.#recordError(outcome.error, outcome.status);
        this.#warn(
          "rejected",
          `the API refused a batch of ${batch.length} trace(s) with HTTP ${outcome.status} (${outcome.error}); not retried (${this.#counters.rejected} rejected in all)`,
        );
        return undefined;
      }
    }
  }

  #settleWaiters(): void {
    const min = this.#minUnsettled();
    for (const w of [...this.#waiters]) if (min > w.seq) w.resolve(true);
  }

  #recordError(message: string, status?: number): void {
    this.#lastError = { message, at: new Date(this.#clock.now()).toISOString(), ...(status !== undefined ? { status } : {}) };
  }

  /** A warning, at most one per kind per interval; the others are counted into the next one. */
  #warn(kind: string, message: string): void {
    const now = this.#clock.now();
    const last = this.#warned.get(kind);
    if (last && now - last.at < this.#warnIntervalMs) {
      last.suppressed++;
      return;
    }
    const suppressed = last?.suppressed ?? 0;
    this.#warned.set(kind, { at: now, suppressed: 0 });
    this.#warnNow(kind, suppressed > 0 ? `${message} [${suppressed} similar warning(s) since the last one]` : message, {});
  }

  #warnNow(kind: string, message: string, details: Record<string, unknown>): void {
    try {
      this.#logger.warn(`berth governance: ${message}`, {
        code: `BERTH_GOVERNANCE_${kind.toUpperCase()}`,
        kind,
        ...this.stats(),
        ...details,
      });
    } catch {
      // a logger that throws must not break the sender
    }
  }
}

function positiveInt(n: number, name: string): number {
  if (!Number.isInteger(n) || n < 1) throw new RangeError(`${name} must be a positive integer`);
  return n;
}
