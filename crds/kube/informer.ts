// A watch cache: client-node's ListWatch (list, then watch from the list's resourceVersion,
// resume on reconnect, relist on 410 Gone) plus what it lacks: restart with capped exponential
// backoff after any other error, a synced flag, and typed event subscription.
import * as k8s from "@kubernetes/client-node";
import type { KubeObject } from "./client.ts";

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

/** A Watch that hands every event's object to `transform` before the ListWatch caches it. */
class TransformingWatch extends k8s.Watch {
  readonly #transform: (obj: KubeObject) => void;
  constructor(kc: k8s.KubeConfig, transform: (obj: KubeObject) => void) {
    super(kc);
    this.#transform = transform;
  }
  override watch(path: string, query: Record<string, string | number | boolean | undefined>, callback: (phase: string, obj: unknown, watchObj?: unknown) => void, done: (err: unknown) => void): Promise<AbortController> {
    return super.watch(path, query, (phase, obj: KubeObject, watchObj) => {
      if (obj?.metadata) this.#transform(obj);
      callback(phase, obj, watchObj);
    }, done);
  }
}

const dropManagedFields = (obj: KubeObject): void => { delete obj.metadata.managedFields; };

export type InformerEvent = "add" | "update" | "delete";
export type InformerHandler<T> = (event: InformerEvent, obj: T) => void;

export interface InformerLogger { warn(obj: object, msg: string): void }

export function resourcePath(o: Pick<InformerOptions, "apiVersion" | "plural" | "namespace">): string {
  const base = o.apiVersion.includes("/") ? `/apis/${o.apiVersion}` : `/api/${o.apiVersion}`;
  return o.namespace ? `${base}/namespaces/${o.namespace}/${o.plural}` : `${base}/${o.plural}`;
}

export class Informer<T extends KubeObject> {
  readonly options: InformerOptions;
  private readonly listWatch: k8s.ListWatch<T>;
  private readonly handlers = new Set<InformerHandler<T>>();
  private readonly log: InformerLogger | undefined;
  private stopped = false;
  private restartTimer: NodeJS.Timeout | undefined;
  private backoffMs = 0;
  private errors = 0;
  private listed = false;
  private connecting: Promise<void> | undefined;
  private _synced = false;
  private syncWaiters: Array<() => void> = [];

  constructor(kc: k8s.KubeConfig, options: InformerOptions, log?: InformerLogger) {
    this.options = options;
    this.log = log;
    const objects = k8s.KubernetesObjectApi.makeApiClient(kc);
    const list = async () => {
      const l = await objects.list<T>(options.apiVersion, options.kind, options.namespace, undefined, undefined, undefined, undefined, options.labelSelector);
      if (options.dropManagedFields) l.items.forEach(dropManagedFields);
      this.listed = true;
      return l;
    };
    const watch = options.dropManagedFields ? new TransformingWatch(kc, dropManagedFields) : new k8s.Watch(kc);
    this.listWatch = new k8s.ListWatch<T>(resourcePath(options), watch, list, false, options.labelSelector);
    this.listWatch.on(k8s.ADD, (o) => this.emit("add", o));
    this.listWatch.on(k8s.UPDATE, (o) => this.emit("update", o));
    this.listWatch.on(k8s.DELETE, (o) => this.emit("delete", o));
    this.listWatch.on(k8s.ERROR, (err) => this.restartLater(err));
  }

  /**
   * Lists, fills the cache and starts watching; resolves once the cache holds a complete list.
   * A failed list is retried with backoff until it succeeds or stop() is called (then it
   * resolves with `synced` still false).
   */
  async start(): Promise<void> {
    this.stopped = false;
    const synced = this._synced ? undefined : new Promise<void>((resolve) => this.syncWaiters.push(resolve));
    await this.connect();
    await synced;
  }

  async stop(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.restartTimer);
    await this.listWatch.stop();
    // A watch request still being opened is only known to ListWatch once it is open: stop again.
    await this.connecting;
    await this.listWatch.stop();
    for (const resolve of this.syncWaiters.splice(0)) resolve();
  }

  get synced(): boolean { return this._synced; }

  get(namespace: string | undefined, name: string): T | undefined {
    return this.listWatch.get(name, namespace);
  }

  list(namespace?: string): readonly T[] {
    return this.listWatch.list(namespace);
  }

  /** Subscribes to changes; returns the unsubscribe function. */
  on(handler: InformerHandler<T>): () => void {
    this.handlers.add(handler);
    return () => this.handlers.delete(handler);
  }

  private emit(event: InformerEvent, obj: T): void {
    if (this.stopped) return;
    for (const h of this.handlers) {
      // A throwing handler must not break ListWatch's bookkeeping (or the other handlers).
      try { h(event, obj); } catch (err) { this.log?.warn({ resource: this.options.plural, err }, "informer handler failed"); }
    }
  }

  /** (Re)starts ListWatch: resumes from its last resourceVersion, or lists when it has none. */
  private connect(): Promise<void> {
    const errorsBefore = this.errors;
    this.listed = false;
    const attempt = this.listWatch.start().then(() => {
      if (this.listed && !this._synced && !this.stopped) {
        this._synced = true;
        for (const resolve of this.syncWaiters.splice(0)) resolve();
      }
      // Reset the backoff only when this attempt did not fail (ListWatch reports a failed
      // list or watch through ERROR before start() resolves).
      if (this.errors === errorsBefore) this.backoffMs = 0;
    }, (err: unknown) => this.restartLater(err));
    this.connecting = attempt;
    return attempt;
  }

  private restartLater(err: unknown): void {
    this.errors++;
    if (this.stopped) return;
    this.backoffMs = Math.min(this.backoffMs ? this.backoffMs * 2 : 250, 30_000);
    this.log?.warn({ resource: this.options.plural, err: err instanceof Error ? err.message : String(err), retryInMs: this.backoffMs }, "watch failed; restarting");
    clearTimeout(this.restartTimer);
    this.restartTimer = setTimeout(() => {
      if (!this.stopped) void this.connect();
    }, this.backoffMs);
  }
}
