// A watch cache for unit tests of reconcilers: what a reconcile reads from an informer (get, list,
// on), held in a map that the test fills. put and remove change the cache first and then run the
// handlers, as a watch event would. Integration tests use the real informer (kube/informer.ts).
import type { InformerEvent } from "../../kube/informer.ts";
import type { KubeObject } from "../../kube/objects.ts";

export class FakeInformer<T extends KubeObject> {
  readonly objects = new Map<string, T>();
  /** Namespaces whose list is not complete yet (syncedIn is false for them). */
  readonly unsynced = new Set<string>();
  readonly synced = true;
  private readonly handlers = new Set<(e: InformerEvent, o: T) => void>();

  constructor(objs: readonly T[] = []) {
    for (const o of objs) this.put(o);
  }

  syncedIn(namespace: string): boolean {
    return !this.unsynced.has(namespace);
  }

  get(namespace: string | undefined, name: string): T | undefined {
    return this.objects.get(`${namespace}/${name}`);
  }

  list(namespace?: string): T[] {
    return [...this.objects.values()].filter((o) => !namespace || o.metadata.namespace === namespace);
  }

  on(h: (e: InformerEvent, o: T) => void): () => void {
    this.handlers.add(h);
    return () => this.handlers.delete(h);
  }

  put(o: T): void {
    this.objects.set(`${o.metadata.namespace}/${o.metadata.name}`, o);
    for (const h of this.handlers) h("update", o);
  }

  remove(o: T): void {
    this.objects.delete(`${o.metadata.namespace}/${o.metadata.name}`);
    for (const h of this.handlers) h("delete", o);
  }
}
