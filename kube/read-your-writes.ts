// One object through which a process reads from its watch caches and writes to the API server,
// reading its own writes: every write it makes is remembered (RecentWrites) until the informer of
// that kind shows it, and every read answers the newer of the two. Callers never remember a
// write by hand, so none can be forgotten. Used by the operator's reconcilers and the API's
// services alike.
import type { Informer } from "./informer.ts";
import type { KubeObject, ObjectClient, ObjectRef } from "./objects.ts";
import { RecentWrites, type RecentWritesOptions } from "./recent.ts";

/** The client calls this cache writes through (ObjectClient's, or a stand-in in unit tests). */
export type WritingClient = Pick<ObjectClient, "apply" | "applyNew" | "applyStatus" | "create" | "mergePatch" | "delete" | "get">;

export class ReadYourWritesCache {
  private readonly client: WritingClient;
  private readonly fieldManager: string;
  private readonly recent: RecentWrites;
  private readonly informers = new Map<string, Informer<KubeObject>>();

  constructor(client: WritingClient, fieldManager: string, opts: RecentWritesOptions = {}) {
    this.client = client;
    this.fieldManager = fieldManager;
    this.recent = new RecentWrites(opts);
  }

  /** Reads of `kind` come from `informer`; a remembered write goes once the informer shows it. */
  track<T extends KubeObject>(kind: string, informer: Informer<T>): this {
    this.informers.set(kind, informer);
    this.recent.track(kind, informer);
    return this;
  }

  private informer(kind: string): Informer<KubeObject> {
    const i = this.informers.get(kind);
    if (!i) throw new Error(`no informer tracks ${kind}`);
    return i;
  }

  /** The object as this process last saw or wrote it; undefined when absent or deleted by it. */
  get<T extends KubeObject>(kind: string, namespace: string, name: string): T | undefined {
    return this.recent.latest(kind, namespace, name, this.informer(kind).get(namespace, name) as T | undefined);
  }

  /** The informer's object alone, without this process's writes (a deleted object that still exists on the server shows here). */
  inCache<T extends KubeObject>(kind: string, namespace: string, name: string): T | undefined {
    return this.informer(kind).get(namespace, name) as T | undefined;
  }

  /** get(), falling back to the API server when neither the cache nor a write of ours has it. */
  async getOrFetch<T extends KubeObject>(ref: ObjectRef): Promise<T | undefined> {
    return this.get<T>(ref.kind, ref.namespace, ref.name) ?? (await this.client.get<T>(ref));
  }

  /** The API server's object, past every cache (to tell a lagging cache from a foreign object). */
  fetch<T extends KubeObject>(ref: ObjectRef): Promise<T | undefined> {
    return this.client.get<T>(ref);
  }

  /**
   * The namespace's objects of `kind` (every namespace's when none is given): the cache's, as last
   * written here, plus those written here that it does not show yet.
   */
  list<T extends KubeObject>(kind: string, namespace?: string): T[] {
    const listed = this.informer(kind).list(namespace) as T[];
    const id = (o: KubeObject) => `${o.metadata.namespace ?? ""}/${o.metadata.name ?? ""}`;
    const ids = new Set(listed.map(id));
    const out: T[] = [];
    for (const o of listed) {
      const latest = this.recent.latest(kind, o.metadata.namespace ?? "", o.metadata.name!, o);
      if (latest) out.push(latest);
    }
    for (const o of this.recent.written<T>(kind, namespace)) if (!ids.has(id(o))) out.push(o);
    return out;
  }

  // ---- writes: each remembered -----------------------------------------------------------------

  async apply<T extends KubeObject>(obj: T): Promise<T> {
    return this.remember(await this.client.apply(obj, this.fieldManager));
  }

  async applyNew<T extends KubeObject>(obj: T): Promise<T> {
    return this.remember(await this.client.applyNew(obj, this.fieldManager));
  }

  async applyStatus<T extends KubeObject>(plural: string, obj: T): Promise<T> {
    return this.remember(await this.client.applyStatus(plural, obj, this.fieldManager));
  }

  async create<T extends KubeObject>(obj: T): Promise<T> {
    return this.remember(await this.client.create(obj, this.fieldManager));
  }

  async mergePatch<T extends KubeObject>(ref: ObjectRef, patch: Record<string, unknown>): Promise<T> {
    return this.remember(await this.client.mergePatch<T>(ref, patch, this.fieldManager));
  }

  /**
   * Deletes; the object then reads as gone until the cache drops it (or shows it re-created).
   * `seen` is the object as last read (its uid tells a re-created object from it). Returns false
   * when it was already gone.
   */
  async delete(
    ref: ObjectRef,
    seen: KubeObject,
    propagationPolicy: "Background" | "Foreground" | "Orphan" = "Background",
  ): Promise<boolean> {
    const deleted = await this.client.delete(ref, propagationPolicy);
    this.recent.deleted(ref.kind, seen);
    return deleted;
  }

  private remember<T extends KubeObject>(obj: T): T {
    // List items and some answers carry no kind: a write's answer always does.
    this.recent.remember(obj.kind!, obj);
    return obj;
  }
}
