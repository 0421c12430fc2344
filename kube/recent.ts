// Read your own writes. An informer's cache shows an object some time after this process wrote
// it; a read in between (the operator's next reconcile, usually queued by the very events of its
// last writes; the API's GET right after a PATCH or DELETE) would otherwise see the old object, write the same change again, or
// try to create what it just created (or delete what it just deleted). RecentWrites keeps the
// objects returned by this process's writes, and a tombstone for each object it deleted, until the
// cache has caught up with them, and `latest` answers whichever is newer.
import type { Informer } from "./informer.ts";
import type { KubeObject } from "./objects.ts";

export interface RecentWritesOptions {
  /** An entry is dropped after this long even if its cache never showed it (a relist skipped it). Default 30 s. */
  ttlMs?: number;
  now?: () => number;
}

/**
 * Orders two resourceVersions of the same object: true when `a` is newer than `b`. They are
 * etcd revisions (decimal integers) on every API server this runs against; anything else is
 * treated as not newer, so the cache wins.
 */
export function newerVersion(a: string | undefined, b: string | undefined): boolean {
  if (!a || !b || !/^\d+$/.test(a) || !/^\d+$/.test(b)) return false;
  return a.length !== b.length ? a.length > b.length : a > b;
}

const keyOf = (kind: string, namespace: string | undefined, name: string | undefined) => `${kind}/${namespace ?? ""}/${name ?? ""}`;

/** What this process last did to an object: wrote it (the object its write returned), or deleted it (the deleted object's uid). */
type Entry = { obj: KubeObject; at: number } | { obj: null; uid: string | undefined; version: string | undefined; at: number };

/**
 * Whether the cache's object `seen` supersedes an entry. A written object: once the cache has its
 * version or a newer one. A deletion: once the cache shows another object under the name (a new
 * uid: re-created); a later version of the deleted object itself (its deletionTimestamp set, a
 * status written while it terminates) does not bring it back. Without uids, a newer version.
 */
function superseded(entry: Entry, seen: KubeObject): boolean {
  if (entry.obj) return !newerVersion(entry.obj.metadata.resourceVersion, seen.metadata.resourceVersion);
  if (entry.uid && seen.metadata.uid) return seen.metadata.uid !== entry.uid;
  return newerVersion(seen.metadata.resourceVersion, entry.version);
}

export class RecentWrites {
  private readonly entries = new Map<string, Entry>();
  private readonly ttlMs: number;
  private readonly now: () => number;
  private lastSweep = 0;

  constructor(opts: RecentWritesOptions = {}) {
    this.ttlMs = opts.ttlMs ?? 30_000;
    this.now = opts.now ?? Date.now;
  }

  /** Number of objects held. */
  get size(): number {
    return this.entries.size;
  }

  /**
   * Follows an informer: an entry goes once the cache holds its version or a newer one, and at
   * once when the object is deleted (so a child deleted by hand is seen as gone). Returns the
   * unsubscribe function.
   */
  track<T extends KubeObject>(kind: string, informer: Informer<T>): () => void {
    return informer.on((event, obj) => {
      const key = keyOf(kind, obj.metadata.namespace, obj.metadata.name);
      const entry = this.entries.get(key);
      if (!entry) return;
      if (event === "delete" || superseded(entry, obj)) this.entries.delete(key);
    });
  }

  /** Records what a write returned (managedFields dropped: nothing here reads them). */
  remember(kind: string, obj: KubeObject): void {
    const { managedFields: _drop, ...metadata } = obj.metadata;
    this.set(kind, { obj: { ...obj, metadata }, at: this.now() }, metadata.namespace, metadata.name);
  }

  /** Records that this process deleted `obj` (as last seen): it reads as gone until the cache drops it, or shows it re-created. */
  deleted(kind: string, obj: KubeObject): void {
    this.set(
      kind,
      { obj: null, uid: obj.metadata.uid, version: obj.metadata.resourceVersion, at: this.now() },
      obj.metadata.namespace,
      obj.metadata.name,
    );
  }

  /** The newer of the cached object and this process's last write (or deletion) of it. */
  latest<T extends KubeObject>(kind: string, namespace: string, name: string, cached: T | undefined): T | undefined {
    const key = keyOf(kind, namespace, name);
    const entry = this.entries.get(key);
    if (!entry) return cached;
    if (this.now() - entry.at > this.ttlMs || (cached && superseded(entry, cached)) || (!cached && !entry.obj)) {
      this.entries.delete(key);
      return cached;
    }
    return (entry.obj ?? undefined) as T | undefined;
  }

  /** The objects of a kind in a namespace whose last write this process remembers (the cache may not show them yet). */
  written<T extends KubeObject>(kind: string, namespace?: string): T[] {
    const prefix = namespace === undefined ? `${kind}/` : keyOf(kind, namespace, "");
    const now = this.now();
    const out: T[] = [];
    for (const [key, entry] of this.entries)
      if (entry.obj && key.startsWith(prefix) && now - entry.at <= this.ttlMs) out.push(entry.obj as T);
    return out;
  }

  private set(kind: string, entry: Entry, namespace: string | undefined, name: string | undefined): void {
    this.entries.set(keyOf(kind, namespace, name), entry);
    if (this.now() - this.lastSweep > this.ttlMs) this.sweep();
  }

  private sweep(): void {
    this.lastSweep = this.now();
    const cutoff = this.lastSweep - this.ttlMs;
    for (const [key, { at }] of this.entries) if (at < cutoff) this.entries.delete(key);
  }
}
