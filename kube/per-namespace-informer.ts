// One list-and-watch per namespace of a changing set, behind the face of one informer. For a
// resource the caller may read only in some namespaces (a RoleBinding in each, as the operator's
// Secrets in workspace namespaces: docs/security.md "Least privilege"), where a list across the
// cluster would be refused. The set is the namespaces an informer of namespaces holds (followed
// as they come and go), or a fixed list; controller-runtime's multi-namespace cache is the model.
import { ListWatchInformer, type Informer, type InformerHandler, type InformerLogger, type InformerOptions } from "./informer.ts";
import type { KubeObject } from "./objects.ts";
import { KubeRest, type KubeAuth } from "./transport.ts";

/**
 * How long start() waits for the namespaces' first lists. A namespace whose list keeps failing
 * (its RoleBinding not there yet) must not hold the others, nor the operator's start: its informer
 * goes on retrying with backoff, and its objects arrive as add events once it lists.
 */
const FIRST_LISTS_WAIT_MS = 30_000;

export type PerNamespaceOptions = Omit<InformerOptions, "namespace"> &
  (
    | {
        /**
         * The namespaces to watch: those this informer of namespaces holds (for example the ones
         * labelled berth.dev/workspace), followed as they come and go. Started here if it is not
         * yet; its owner stops it.
         */
        follow: Informer<KubeObject>;
      }
    | {
        /** The namespaces to watch: these, whether they exist yet or not. */
        namespaces: readonly string[];
      }
  );

export class PerNamespaceInformer<T extends KubeObject> implements Informer<T> {
  readonly options: InformerOptions;
  readonly #rest: KubeRest;
  readonly #log: InformerLogger | undefined;
  /** the followed namespaces; undefined for a fixed list */
  readonly #namespaces: Informer<KubeObject> | undefined;
  readonly #each = new Map<string, ListWatchInformer<T>>();
  readonly #handlers = new Set<InformerHandler<T>>();
  readonly #firstListsWaitMs: number;
  #stopped = true;
  /** start() has returned (a fixed list is synced from then on) */
  #started = false;

  constructor(kc: KubeAuth | KubeRest, options: PerNamespaceOptions, log?: InformerLogger, opts: { firstListsWaitMs?: number } = {}) {
    const { apiVersion, kind, plural, labelSelector, dropManagedFields } = options;
    this.options = { apiVersion, kind, plural, labelSelector, dropManagedFields };
    this.#rest = KubeRest.from(kc);
    this.#log = log;
    this.#firstListsWaitMs = opts.firstListsWaitMs ?? FIRST_LISTS_WAIT_MS;
    if ("namespaces" in options) {
      for (const ns of options.namespaces) this.#add(ns);
      return;
    }
    this.#namespaces = options.follow;
    this.#namespaces.on((event, ns) => {
      if (this.#stopped) return;
      if (event === "delete") void this.#drop(ns.metadata.name!);
      else this.#add(ns.metadata.name!);
    });
  }

  /** The namespaces watched now. */
  get namespaces(): string[] {
    return [...this.#each.keys()].sort();
  }

  /**
   * Lists the namespaces, starts an informer in each and waits for their first lists (for a
   * while: see FIRST_LISTS_WAIT_MS). Synced once the namespaces are.
   */
  async start(): Promise<void> {
    this.#stopped = false;
    if (this.#namespaces) {
      await this.#namespaces.start();
      if (this.#stopped) return;
      // the followed informer may have listed them before this one subscribed
      for (const ns of this.#namespaces.list()) this.#add(ns.metadata.name!);
    }
    const lists = Promise.all([...this.#each.values()].map((i) => i.start()));
    let timer: NodeJS.Timeout | undefined;
    const waited = new Promise<"late">((resolve) => (timer = setTimeout(() => resolve("late"), this.#firstListsWaitMs)));
    if ((await Promise.race([lists, waited])) === "late") {
      const late = [...this.#each.entries()].filter(([, i]) => !i.synced).map(([ns]) => ns);
      this.#log?.warn({ resource: this.options.plural, namespaces: late }, "not listed yet in some namespaces; going on without them");
    }
    clearTimeout(timer);
    this.#started = !this.#stopped;
  }

  async stop(): Promise<void> {
    this.#stopped = true;
    this.#started = false;
    await Promise.all([...this.#each.values()].map((i) => i.stop()));
    this.#each.clear();
  }

  get synced(): boolean {
    return this.#namespaces ? this.#namespaces.synced : this.#started;
  }

  /**
   * A followed namespace: once its own list is complete. Any other: once the namespaces are
   * listed (it is not selected, so none of its objects is watched: all are absent here).
   */
  syncedIn(namespace: string): boolean {
    const informer = this.#each.get(namespace);
    return informer ? informer.synced : this.synced;
  }

  get(namespace: string | undefined, name: string): T | undefined {
    return namespace === undefined ? undefined : this.#each.get(namespace)?.get(namespace, name);
  }

  list(namespace?: string): readonly T[] {
    if (namespace !== undefined) return this.#each.get(namespace)?.list(namespace) ?? [];
    return [...this.#each.values()].flatMap((i) => i.list());
  }

  on(handler: InformerHandler<T>): () => void {
    this.#handlers.add(handler);
    return () => this.#handlers.delete(handler);
  }

  #add(namespace: string): void {
    if (this.#each.has(namespace)) return;
    const informer = new ListWatchInformer<T>(this.#rest, { ...this.options, namespace }, this.#log);
    informer.on((event, obj, old) => {
      for (const h of this.#handlers) {
        try {
          h(event, obj, old);
        } catch (err) {
          this.#log?.warn({ resource: this.options.plural, err }, "informer handler failed");
        }
      }
    });
    this.#each.set(namespace, informer);
    if (!this.#stopped) void informer.start();
  }

  /**
   * A namespace left the set (deleted, or its label removed): its informer stops and its objects
   * leave the cache without delete events (the grant may be gone already; a deleted namespace's
   * objects go with it, and their owners' reconciles read the cache, not the events).
   */
  async #drop(namespace: string): Promise<void> {
    const informer = this.#each.get(namespace);
    if (!informer) return;
    this.#each.delete(namespace);
    await informer.stop();
  }
}
