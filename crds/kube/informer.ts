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
}

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
  private _synced = false;

  constructor(kc: k8s.KubeConfig, options: InformerOptions, log?: InformerLogger) {
    this.options = options;
    this.log = log;
    const objects = k8s.KubernetesObjectApi.makeApiClient(kc);
    const list = () => objects.list<T>(options.apiVersion, options.kind, options.namespace, undefined, undefined, undefined, undefined, options.labelSelector);
    this.listWatch = new k8s.ListWatch<T>(resourcePath(options), new k8s.Watch(kc), list, false, options.labelSelector);
    this.listWatch.on(k8s.ADD, (o) => this.emit("add", o));
    this.listWatch.on(k8s.UPDATE, (o) => this.emit("update", o));
    this.listWatch.on(k8s.DELETE, (o) => this.emit("delete", o));
    this.listWatch.on(k8s.ERROR, (err) => this.restartLater(err));
  }

  /** Lists, fills the cache and starts watching; resolves once the cache holds the initial list. */
  async start(): Promise<void> {
    this.stopped = false;
    await this.listWatch.start();
    this._synced = true;
    this.backoffMs = 0;
  }

  async stop(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.restartTimer);
    await this.listWatch.stop();
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
    for (const h of this.handlers) h(event, obj);
  }

  private restartLater(err: unknown): void {
    if (this.stopped) return;
    this.backoffMs = Math.min(this.backoffMs ? this.backoffMs * 2 : 250, 30_000);
    this.log?.warn({ resource: this.options.plural, err: err instanceof Error ? err.message : String(err), retryInMs: this.backoffMs }, "watch failed; restarting");
    clearTimeout(this.restartTimer);
    this.restartTimer = setTimeout(() => {
      if (this.stopped) return;
      this.listWatch.start().then(() => { this.backoffMs = 0; }, (e: unknown) => this.restartLater(e));
    }, this.backoffMs);
  }
}
