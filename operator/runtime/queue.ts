// A work queue with the semantics of client-go's workqueue: a FIFO of keys, a dirty set (keys
// waiting to be processed) and a processing set (keys handed out by get() and not yet done()).
// A key is never handed out twice at once: adding a key that is being processed only marks it
// dirty, and done() puts it back in line. On top of that, per-key delays (addAfter) and
// per-key exponential backoff (addRateLimited, forget), as client-go's rate-limiting queue.

export interface WorkQueueOptions {
  /** First retry delay of addRateLimited. Default 100 ms. */
  baseDelayMs?: number;
  /** Cap of the retry delay. Default 5 minutes. */
  maxDelayMs?: number;
  /** Called when a key enters the dirty set (an add that was not deduped). For metrics. */
  onAdd?: (key: string) => void;
  /** Called with the number of keys ready to be handed out whenever it changes. For metrics. */
  onDepth?: (depth: number) => void;
}

export class WorkQueue {
  private readonly baseDelayMs: number;
  private readonly maxDelayMs: number;
  private readonly onAdd: ((key: string) => void) | undefined;
  private readonly onDepth: ((depth: number) => void) | undefined;
  private readonly ready: string[] = [];
  private readonly dirty = new Set<string>();
  private readonly processing = new Set<string>();
  private readonly failures = new Map<string, number>();
  /** One timer per delayed key: the earliest requested time wins. */
  private readonly delayed = new Map<string, { at: number; timer: NodeJS.Timeout }>();
  private readonly waiters: Array<(key: string | undefined) => void> = [];
  private shuttingDown = false;

  constructor(opts: WorkQueueOptions = {}) {
    this.baseDelayMs = opts.baseDelayMs ?? 100;
    this.maxDelayMs = opts.maxDelayMs ?? 300_000;
    this.onAdd = opts.onAdd;
    this.onDepth = opts.onDepth;
  }

  /** Number of keys ready to be handed out (not counting delayed or in-process keys). */
  get length(): number {
    return this.ready.length;
  }

  get isShuttingDown(): boolean {
    return this.shuttingDown;
  }

  /** Queues `key` unless it is already waiting; a key being processed runs again after done(). */
  add(key: string): void {
    if (this.shuttingDown || this.dirty.has(key)) return;
    this.dirty.add(key);
    this.onAdd?.(key);
    if (!this.processing.has(key)) this.push(key);
  }

  /** Queues `key` after `ms`; if the key is already scheduled earlier, the earlier time is kept. */
  addAfter(key: string, ms: number): void {
    if (this.shuttingDown) return;
    if (ms <= 0) {
      this.add(key);
      return;
    }
    const at = Date.now() + ms;
    const existing = this.delayed.get(key);
    if (existing && existing.at <= at) return;
    if (existing) clearTimeout(existing.timer);
    const timer = setTimeout(() => {
      this.delayed.delete(key);
      this.add(key);
    }, ms);
    this.delayed.set(key, { at, timer });
  }

  /** Queues `key` after its backoff: baseDelayMs * 2^failures, capped at maxDelayMs. */
  addRateLimited(key: string): void {
    this.addAfter(key, this.nextDelay(key));
  }

  /** The delay addRateLimited will use for `key`, and counts one more failure. */
  private nextDelay(key: string): number {
    const failures = this.failures.get(key) ?? 0;
    this.failures.set(key, failures + 1);
    return Math.min(this.baseDelayMs * 2 ** failures, this.maxDelayMs);
  }

  /** Resets the failure count of `key` (call after it succeeded). */
  forget(key: string): void {
    this.failures.delete(key);
  }

  /** How many times `key` was rate-limited since it was last forgotten. */
  numRequeues(key: string): number {
    return this.failures.get(key) ?? 0;
  }

  /** Waits for a key and marks it processing; undefined once the queue is shut down. */
  get(): Promise<string | undefined> {
    if (this.shuttingDown) return Promise.resolve(undefined);
    const key = this.ready.shift();
    if (key !== undefined) {
      this.onDepth?.(this.ready.length);
      return Promise.resolve(this.take(key));
    }
    return new Promise((resolve) => this.waiters.push(resolve));
  }

  /** Marks `key` finished; if it was added meanwhile it goes back in line. */
  done(key: string): void {
    this.processing.delete(key);
    if (this.dirty.has(key) && !this.shuttingDown) this.push(key);
  }

  /** Stops handing out keys: waiting getters get undefined, delayed keys are dropped. */
  shutDown(): void {
    this.shuttingDown = true;
    for (const { timer } of this.delayed.values()) clearTimeout(timer);
    this.delayed.clear();
    this.ready.length = 0;
    this.dirty.clear();
    this.failures.clear();
    this.onDepth?.(0);
    for (const w of this.waiters.splice(0)) w(undefined);
  }

  private push(key: string): void {
    const waiter = this.waiters.shift();
    if (waiter) {
      waiter(this.take(key));
      return;
    }
    this.ready.push(key);
    this.onDepth?.(this.ready.length);
  }

  private take(key: string): string {
    this.dirty.delete(key);
    this.processing.add(key);
    return key;
  }
}
