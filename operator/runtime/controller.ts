// A controller in controller-runtime's shape: informer events become keys in a work queue,
// and `concurrency` workers call reconcile(key). Events carry no meaning beyond "look at this
// key again": there are no per-event branches (docs/design.md §5.1). The queue guarantees one key
// is never reconciled twice at once; errors retry with per-key exponential backoff; a
// TerminalError is recorded and not retried; requeueAfterMs asks for another look later.
import { isDeepStrictEqual } from "node:util";
import type { Logger } from "pino";
import type { Informer, KubeObject } from "../../kube/index.ts";
import type { Metrics, ReconcileResultLabel } from "./metrics.ts";
import { WorkQueue } from "./queue.ts";

export interface Request {
  namespace: string;
  name: string;
}
export interface ReconcileResult {
  requeueAfterMs?: number;
}
/** What one reconcile is given besides its key. */
export interface ReconcileContext {
  /** Aborted when the controller stops: long calls should pass it on. */
  signal: AbortSignal;
  /** The controller's logger with this reconcile's key and id on every line. */
  log: Logger;
}
export interface Reconciler {
  reconcile(req: Request, ctx: ReconcileContext): Promise<ReconcileResult | void>;
}

/** An error that retrying cannot fix (e.g. an invalid spec): recorded, logged, not retried. */
export class TerminalError extends Error {
  constructor(message: string, options?: ErrorOptions) {
    super(message, options);
    this.name = "TerminalError";
  }
}

/**
 * Whether an update of a watched object is worth a reconcile (controller-runtime's predicates).
 * Adds and deletes always are.
 */
export type UpdatePredicate = (old: KubeObject, obj: KubeObject) => boolean;

/**
 * For a kind whose status the reconciler never reads (an HPA, a Service): an update that changes
 * only its status (or its resourceVersion) is not worth a reconcile. Anything else is: spec,
 * labels, annotations, owner references, finalizers, deletion.
 */
export const specChanged: UpdatePredicate = (old, obj) => !isDeepStrictEqual(withoutStatus(old), withoutStatus(obj));

function withoutStatus(o: KubeObject): unknown {
  const { status: _s, metadata, ...rest } = o;
  const { resourceVersion: _rv, managedFields: _mf, ...meta } = metadata;
  return { ...rest, metadata: meta };
}

/** A watched kind, with the updates of it that are worth a reconcile (all when `updates` is unset). */
export interface WatchSource {
  informer: Informer<KubeObject>;
  updates?: UpdatePredicate;
}

export interface ControllerOptions {
  /** Names the controller in logs and metrics, e.g. "app". */
  name: string;
  /** Events on it enqueue the object's own key. */
  primary: Informer<KubeObject>;
  /**
   * Which updates of the primary are worth a reconcile (all when unset). specChanged when only
   * this controller writes the primary's status: its own status writes then wake nothing.
   */
  updates?: UpdatePredicate;
  /** Events enqueue the controlling ownerReference (controller: true) of the primary's kind and group. */
  owned?: Array<Informer<KubeObject> | WatchSource>;
  /** Other mappings, e.g. a Domain enqueues its App. */
  watches?: Array<WatchSource & { map: (obj: KubeObject) => Request[] }>;
  reconciler: Reconciler;
  /** Keys reconciled at once. Default 4. */
  concurrency?: number;
  /** Every object of `primary` is re-enqueued about this often (jittered by up to +10%). Default 10 min; 0 disables. */
  resyncPeriodMs?: number;
  /** Backoff of failed keys. Defaults of WorkQueue (100 ms doubling up to 5 min). */
  baseDelayMs?: number;
  maxDelayMs?: number;
  /**
   * How long stop() waits for in-flight reconciles before aborting their signal (they then get
   * 5 s more). Default 20 s, so that a drain fits a pod's default 30 s termination grace period.
   */
  shutdownTimeoutMs?: number;
  metrics: Metrics;
  log: Logger;
}

export function keyOf(req: Request): string {
  return req.namespace ? `${req.namespace}/${req.name}` : req.name;
}

export function requestOf(key: string): Request {
  const i = key.indexOf("/");
  return i < 0 ? { namespace: "", name: key } : { namespace: key.slice(0, i), name: key.slice(i + 1) };
}

const groupOf = (apiVersion: string): string => (apiVersion.includes("/") ? apiVersion.slice(0, apiVersion.indexOf("/")) : "");

/** The request of `obj`'s controlling owner when it is of `kind` in `apiVersion`'s group. */
export function controllerOwner(obj: KubeObject, apiVersion: string, kind: string): Request[] {
  const ref = obj.metadata.ownerReferences?.find((r) => r.controller === true);
  if (!ref || ref.kind !== kind || groupOf(ref.apiVersion) !== groupOf(apiVersion)) return [];
  return [{ namespace: obj.metadata.namespace ?? "", name: ref.name }];
}

/** How long stop() waits for reconciles to return after aborting their signal. */
const ABORT_GRACE_MS = 5000;
const sleep = (ms: number) =>
  new Promise<void>((resolve) => {
    setTimeout(resolve, ms).unref();
  });

export class Controller {
  readonly name: string;
  private readonly opts: ControllerOptions;
  private readonly log: Logger;
  private readonly sources: Array<WatchSource & { map: (obj: KubeObject) => Request[] }>;
  private _queue: WorkQueue;
  private unsubscribe: Array<() => void> = [];
  private workers: Promise<void>[] = [];
  private abort = new AbortController();
  private resyncTimer: NodeJS.Timeout | undefined;
  /** Numbers reconciles in logs (with the key, it tells one reconcile's lines from the next's). */
  private reconciles = 0;
  private running = false;
  private leftover: Promise<void> | undefined;

  constructor(opts: ControllerOptions) {
    this.opts = opts;
    this.name = opts.name;
    this.log = opts.log.child({ controller: opts.name });
    const { primary } = opts;
    this.sources = [
      { informer: primary, updates: opts.updates, map: (o) => [{ namespace: o.metadata.namespace ?? "", name: o.metadata.name ?? "" }] },
      ...(opts.owned ?? []).map((o) => ({
        ...("informer" in o ? o : { informer: o }),
        map: (obj: KubeObject) => controllerOwner(obj, primary.options.apiVersion, primary.options.kind),
      })),
      ...(opts.watches ?? []),
    ];
    this._queue = this.newQueue();
  }

  /** The current work queue (a fresh one after each stop/start cycle). */
  get queue(): WorkQueue {
    return this._queue;
  }

  get isRunning(): boolean {
    return this.running;
  }

  /** Subscribes to the informers (which must be synced), enqueues every cached object, starts the workers. */
  start(): void {
    if (this.running) return;
    this.running = true;
    if (this._queue.isShuttingDown) this._queue = this.newQueue();
    this.abort = new AbortController();
    const { metrics } = this.opts;
    for (const { informer, map, updates } of this.sources) {
      // An update maps the object as it was too (controller-runtime's map and owner handlers do):
      // a watched object that stops naming a key (an Ingress that drops a host, a child whose
      // owner changed) still wakes the key it named before.
      const handler = (obj: KubeObject, old?: KubeObject) => {
        const reqs = old ? [...map(obj), ...map(old)] : map(obj);
        for (const key of new Set(reqs.map(keyOf))) this.enqueue(requestOf(key));
      };
      const enqueued = metrics.watchEvents.labels(this.name, informer.options.kind, "enqueued");
      const filtered = metrics.watchEvents.labels(this.name, informer.options.kind, "filtered");
      this.unsubscribe.push(
        informer.on((event, obj, old) => {
          if (event === "update" && old && updates && !updates(old, obj)) {
            filtered.inc();
            return;
          }
          enqueued.inc();
          handler(obj, old);
        }),
      );
      for (const obj of informer.list()) handler(obj);
    }
    const concurrency = Math.max(1, this.opts.concurrency ?? 4);
    // Reconciles that ignored the last stop's abort must end before a key can run again.
    const previous = this.leftover;
    const queue = this._queue;
    this.workers = Array.from({ length: concurrency }, async () => {
      await previous;
      await this.work(queue);
    });
    this.scheduleResync();
    this.log.info({ concurrency }, "controller started");
  }

  /**
   * Stops taking keys and waits for in-flight reconciles; after `timeoutMs` (default the
   * shutdownTimeoutMs option) their signal is aborted, and they get 5 s more to return.
   */
  async stop(opts: { timeoutMs?: number } = {}): Promise<void> {
    if (!this.running) return;
    this.running = false;
    clearTimeout(this.resyncTimer);
    for (const off of this.unsubscribe.splice(0)) off();
    this._queue.shutDown();
    const timeoutMs = opts.timeoutMs ?? this.opts.shutdownTimeoutMs ?? 20_000;
    let finished = false;
    const all = Promise.all(this.workers).then(() => {
      finished = true;
    });
    await Promise.race([all, sleep(timeoutMs)]);
    if (!finished) {
      this.log.warn({ timeoutMs }, "reconciles still running at shutdown; aborting them");
      this.abort.abort(new Error(`controller ${this.name} stopping`));
      await Promise.race([all, sleep(ABORT_GRACE_MS)]);
      if (!finished) this.log.error("reconciles ignored the abort signal; leaving them behind");
    }
    this.leftover = finished ? undefined : all;
    this.workers = [];
    this.log.info("controller stopped");
  }

  enqueue(req: Request): void {
    if (req.name) this._queue.add(keyOf(req));
  }

  private newQueue(): WorkQueue {
    const labels = { controller: this.name };
    const { metrics } = this.opts;
    return new WorkQueue({
      baseDelayMs: this.opts.baseDelayMs,
      maxDelayMs: this.opts.maxDelayMs,
      onAdd: () => metrics.workqueueAdds.inc(labels),
      onDepth: (n) => metrics.workqueueDepth.set(labels, n),
    });
  }

  /**
   * One resync cycle: the primary's objects at its start are enqueued in slices spread evenly over
   * the (jittered) period, at most one slice a second, so that a resync of thousands of objects
   * never floods the queue ahead of real changes. Objects created meanwhile wait for the next cycle
   * (their own events reconciled them); deleted ones are found gone.
   */
  private scheduleResync(): void {
    const period = (this.opts.resyncPeriodMs ?? 600_000) * (1 + 0.1 * Math.random());
    if (period <= 0) return;
    const requests = this.opts.primary.list().map((o) => ({ namespace: o.metadata.namespace ?? "", name: o.metadata.name ?? "" }));
    const slices = Math.max(1, Math.min(requests.length, Math.floor(period / 1000)));
    const perSlice = Math.ceil(requests.length / slices);
    let slice = 0;
    const next = () => {
      for (const req of requests.slice(slice * perSlice, (slice + 1) * perSlice)) this.enqueue(req);
      if (++slice < slices) this.resyncTimer = setTimeout(next, period / slices);
      else this.scheduleResync();
    };
    this.resyncTimer = setTimeout(next, period / slices);
  }

  private async work(queue: WorkQueue): Promise<void> {
    for (let key = await queue.get(); key !== undefined; key = await queue.get()) {
      try {
        await this.reconcileKey(queue, key);
      } finally {
        queue.done(key);
      }
    }
  }

  private async reconcileKey(queue: WorkQueue, key: string): Promise<void> {
    const { metrics, reconciler } = this.opts;
    const labels = { controller: this.name };
    const endTimer = metrics.reconcileDuration.startTimer(labels);
    let result: ReconcileResultLabel;
    try {
      const log = this.log.child({ object: key, reconcileId: ++this.reconciles });
      const res = await reconciler.reconcile(requestOf(key), { signal: this.abort.signal, log });
      queue.forget(key);
      const after = res?.requeueAfterMs ?? 0;
      if (after > 0) queue.addAfter(key, after);
      result = after > 0 ? "requeue" : "success";
    } catch (err) {
      metrics.reconcileErrors.inc(labels);
      if (err instanceof TerminalError) {
        queue.forget(key);
        result = "terminal";
        this.log.error({ object: key, err }, "reconcile failed with a terminal error; not retrying");
      } else {
        const retries = queue.numRequeues(key);
        queue.addRateLimited(key);
        result = "error";
        this.log.error({ object: key, err, retries }, "reconcile failed; retrying with backoff");
      }
    } finally {
      endTimer();
    }
    metrics.reconcileTotal.inc({ ...labels, result });
  }
}
