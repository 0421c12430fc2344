// A watch cache, as client-go's reflector and store: list, then watch from the list's
// resourceVersion; a watch that ends or fails resumes from the last resourceVersion seen (after a
// capped exponential backoff when it failed), and only a 410 Gone relists, replacing the cache and
// delivering `delete` for what disappeared. Plus a synced flag and typed event subscription.
// On transport.ts: it does not load @kubernetes/client-node.
import { KubeRest, isGone, sleep, type KubeAuth } from "./transport.ts";
import { resourcePath, type KubeList, type KubeObject } from "./objects.ts";

export interface InformerOptions {
  apiVersion: string;
  kind: string;
  plural: string;
  /** Watch one namespace; all namespaces when unset. */
  namespace?: string;
  labelSelector?: string;
  /**
   * Drop metadata.managedFields before caching. They are often a third of an object and only
   * writers' bookkeeping; a controller that never reads them saves that memory per object.
   */
  dropManagedFields?: boolean;
}

export type InformerEvent = "add" | "update" | "delete";
/** `old` is the object as cached before an update (undefined for add and delete). */
export type InformerHandler<T> = (event: InformerEvent, obj: T, old?: T) => void;

export interface InformerLogger {
  warn(obj: object, msg: string): void;
  info?(obj: object, msg: string): void;
}

/** A watch is ended by the API server after this long (jittered up to twice), as client-go does. */
const WATCH_TIMEOUT_S = 300;
/** A watch that ends normally sooner than this, with no event, counts as a failure (backoff). */
const SHORT_WATCH_MS = 1000;

const keyOf = (namespace: string | undefined, name: string | undefined) => `${namespace ?? ""}/${name ?? ""}`;

/**
 * A cache of one resource kept current by the API server's watch: what controllers read and
 * subscribe to. ListWatchInformer is one list-and-watch; PerNamespaceInformer
 * (./per-namespace-informer.ts) one per namespace of a label-selected set, behind the same face.
 */
export interface Informer<T extends KubeObject> {
  readonly options: InformerOptions;
  /** Lists, fills the cache and starts watching; resolves once the cache holds a complete list. */
  start(): Promise<void>;
  stop(): Promise<void>;
  readonly synced: boolean;
  /**
   * Whether the cache holds a complete list of `namespace`'s objects: an object it lacks there is
   * absent, not merely not listed yet.
   */
  syncedIn(namespace: string): boolean;
  get(namespace: string | undefined, name: string): T | undefined;
  list(namespace?: string): readonly T[];
  /** Subscribes to changes; returns the unsubscribe function. */
  on(handler: InformerHandler<T>): () => void;
}

/** One list and watch of a resource (in one namespace or all), cached. */
export class ListWatchInformer<T extends KubeObject> implements Informer<T> {
  readonly options: InformerOptions;
  private readonly rest: KubeRest;
  private readonly path: string;
  private readonly handlers = new Set<InformerHandler<T>>();
  private readonly log: InformerLogger | undefined;
  /** namespace → name → object. */
  private readonly cache = new Map<string, Map<string, T>>();
  private resourceVersion: string | undefined;
  private stopped = true;
  private loop: Promise<void> | undefined;
  private abort = new AbortController();
  private backoffMs = 0;
  private _synced = false;
  private syncWaiters: Array<() => void> = [];

  constructor(kc: KubeAuth | KubeRest, options: InformerOptions, log?: InformerLogger) {
    this.options = options;
    this.log = log;
    this.rest = KubeRest.from(kc);
    this.path = resourcePath(options);
  }

  /**
   * Lists, fills the cache and starts watching; resolves once the cache holds a complete list.
   * A failed list is retried with backoff until it succeeds or stop() is called (then it
   * resolves with `synced` still false).
   */
  async start(): Promise<void> {
    const synced = this._synced ? undefined : new Promise<void>((resolve) => this.syncWaiters.push(resolve));
    if (this.stopped) {
      this.stopped = false;
      this.abort = new AbortController();
      const previous = this.loop;
      this.loop = (async () => {
        await previous;
        await this.run(this.abort.signal);
      })();
    }
    await synced;
  }

  async stop(): Promise<void> {
    this.stopped = true;
    this.abort.abort();
    for (const resolve of this.syncWaiters.splice(0)) resolve();
    await this.loop;
  }

  get synced(): boolean {
    return this._synced;
  }

  /** As synced: one list covers every namespace it watches. */
  syncedIn(_namespace: string): boolean {
    return this._synced;
  }

  get(namespace: string | undefined, name: string): T | undefined {
    return this.cache.get(namespace ?? "")?.get(name);
  }

  list(namespace?: string): readonly T[] {
    if (namespace !== undefined) return [...(this.cache.get(namespace)?.values() ?? [])];
    const out: T[] = [];
    for (const objects of this.cache.values()) out.push(...objects.values());
    return out;
  }

  /** Subscribes to changes; returns the unsubscribe function. */
  on(handler: InformerHandler<T>): () => void {
    this.handlers.add(handler);
    return () => this.handlers.delete(handler);
  }

  private async run(signal: AbortSignal): Promise<void> {
    while (!signal.aborted) {
      try {
        if (this.resourceVersion === undefined) await this.relist(signal);
        const started = Date.now();
        const events = await this.watch(signal);
        if (!events && Date.now() - started < SHORT_WATCH_MS && !signal.aborted) throw new Error("the watch ended at once");
      } catch (err) {
        if (signal.aborted) return;
        if (isGone(err)) {
          // too old (compacted away): list again, at once
          this.log?.info?.({ resource: this.options.plural, resourceVersion: this.resourceVersion }, "watch expired (410 Gone); relisting");
          this.resourceVersion = undefined;
          continue;
        }
        this.backoffMs = Math.min(this.backoffMs ? this.backoffMs * 2 : 250, 30_000);
        this.log?.warn(
          { resource: this.options.plural, err: err instanceof Error ? err.message : String(err), retryInMs: this.backoffMs },
          "watch failed; restarting",
        );
        await sleep(this.backoffMs, signal);
      }
    }
  }

  /** Lists and replaces the cache: add/update for what is new or changed, delete for what went. */
  private async relist(signal: AbortSignal): Promise<void> {
    const list = await this.rest.request<KubeList<T>>("GET", this.path, { query: { labelSelector: this.options.labelSelector }, signal });
    if (signal.aborted) return;
    const seen = new Set<string>();
    for (const obj of list.items) {
      this.trim(obj);
      seen.add(keyOf(obj.metadata.namespace, obj.metadata.name));
      this.put(obj);
    }
    for (const [namespace, objects] of this.cache) {
      for (const [name, obj] of objects) if (!seen.has(keyOf(namespace, name))) this.remove(obj);
    }
    this.resourceVersion = list.metadata?.resourceVersion ?? "";
    this.backoffMs = 0;
    if (!this._synced) {
      this._synced = true;
      for (const resolve of this.syncWaiters.splice(0)) resolve();
    }
  }

  /** One watch from the last resourceVersion; resolves with the number of events when it ends. */
  private async watch(signal: AbortSignal): Promise<number> {
    let events = 0;
    const query = {
      resourceVersion: this.resourceVersion,
      allowWatchBookmarks: true,
      labelSelector: this.options.labelSelector,
      timeoutSeconds: Math.round(WATCH_TIMEOUT_S * (1 + Math.random())),
    };
    await this.rest.watch(
      this.path,
      query,
      ({ type, object }) => {
        if (signal.aborted) return;
        events++;
        this.backoffMs = 0;
        const obj = object as T;
        if (type === "ERROR") {
          const status = object as { code?: number; message?: string };
          throw Object.assign(new Error(`watch ${this.options.plural}: ${status.message ?? "error"}`), { code: status.code });
        }
        if (obj.metadata?.resourceVersion) this.resourceVersion = obj.metadata.resourceVersion;
        if (type === "BOOKMARK") return;
        this.trim(obj);
        if (type === "DELETED") this.remove(obj);
        else this.put(obj);
      },
      signal,
    );
    return events;
  }

  private trim(obj: T): void {
    if (this.options.dropManagedFields && obj.metadata) delete obj.metadata.managedFields;
  }

  private put(obj: T): void {
    const ns = obj.metadata.namespace ?? "";
    let objects = this.cache.get(ns);
    if (!objects) this.cache.set(ns, (objects = new Map<string, T>()));
    const old = objects.get(obj.metadata.name!);
    if (old && old.metadata.resourceVersion === obj.metadata.resourceVersion) return;
    objects.set(obj.metadata.name!, obj);
    this.emit(old ? "update" : "add", obj, old);
  }

  private remove(obj: T): void {
    const ns = obj.metadata.namespace ?? "";
    const objects = this.cache.get(ns);
    if (!objects?.delete(obj.metadata.name!)) return;
    if (objects.size === 0) this.cache.delete(ns);
    this.emit("delete", obj);
  }

  private emit(event: InformerEvent, obj: T, old?: T): void {
    if (this.stopped) return;
    for (const h of this.handlers) {
      // A throwing handler must not break the cache's bookkeeping (or the other handlers).
      try {
        h(event, obj, old);
      } catch (err) {
        this.log?.warn({ resource: this.options.plural, err }, "informer handler failed");
      }
    }
  }
}
