// Kubernetes Events on the objects Berth manages, so that `kubectl describe app <name>` tells
// what happened (created, rolled out, provisioning failed, an object in the way), as
// cert-manager's controllers do. core/v1 Events, aggregated like client-go's recorder: the same
// reason and message on the same object within the window patch the existing Event's count and
// lastTimestamp instead of creating another one. Recording never fails the caller: an Event that
// cannot be written is logged (a warning: a missing grant or a refused Event is worth seeing) and
// dropped.
import { randomBytes } from "node:crypto";
import type { Logger } from "pino";
import { errorMessage, isNotFound, type KubeRest } from "./transport.ts";
import type { KubeObject } from "./objects.ts";
import type { Access } from "./rbac.ts";

export type EventType = "Normal" | "Warning";

/** What the recorder does in the cluster (RBAC from code). */
export const EVENT_RECORDER_ACCESS: Access[] = [
  { group: "", resource: "events", verbs: ["create", "patch"], why: "Events on Apps record transitions and failures (kubectl describe)" },
];

export interface EventRecorder {
  /** Records an Event on `obj` (which must carry kind, apiVersion, namespace, name and uid). */
  event(obj: KubeObject, type: EventType, reason: string, message: string): void;
}

export interface KubeEventRecorderOptions {
  /** The `source.component` and `reportingComponent` of every Event, e.g. "berth-operator". */
  component: string;
  /** The reporting instance (the pod name). */
  instance: string;
  log: Logger;
  /** An Event is aggregated with the previous one of the same key for this long. Default 10 min. */
  windowMs?: number;
  /** At most this many aggregation keys are remembered (oldest first out). Default 4096. */
  maxKeys?: number;
  now?: () => Date;
}

/** The API server refuses longer messages (the Event's note is limited to 1 KiB). */
const MAX_MESSAGE = 1024;

interface Seen {
  name: string;
  namespace: string;
  count: number;
  last: number;
}

/** Message trimmed to what an Event accepts, on a character boundary. */
export function eventMessage(message: string): string {
  if (Buffer.byteLength(message) <= MAX_MESSAGE) return message;
  let s = message.slice(0, MAX_MESSAGE);
  while (Buffer.byteLength(s) > MAX_MESSAGE - 3) s = s.slice(0, -1);
  return `${s}...`;
}

export class KubeEventRecorder implements EventRecorder {
  private readonly rest: KubeRest;
  private readonly opts: Required<Omit<KubeEventRecorderOptions, "log">> & { log: Logger };
  private readonly seen = new Map<string, Seen>();
  /** Writes in flight, so that stop() (and tests) can wait for them. */
  private readonly pending = new Set<Promise<void>>();
  /** Per aggregation key, the write in flight: the next one of the same key waits for it. */
  private readonly chains = new Map<string, Promise<void>>();

  constructor(rest: KubeRest, opts: KubeEventRecorderOptions) {
    this.rest = rest;
    this.opts = { windowMs: 10 * 60_000, maxKeys: 4096, now: () => new Date(), ...opts };
  }

  event(obj: KubeObject, type: EventType, reason: string, message: string): void {
    const { namespace, name, uid } = obj.metadata;
    if (!namespace || !name || !obj.kind || !obj.apiVersion) return;
    const note = eventMessage(message);
    const key = JSON.stringify([uid ?? `${namespace}/${name}`, obj.kind, type, reason, note]);
    const write = (this.chains.get(key) ?? Promise.resolve())
      .then(() => this.write(key, obj, type, reason, note))
      .catch((err: unknown) => {
        this.opts.log.warn({ err: errorMessage(err), reason, object: `${obj.kind}/${namespace}/${name}` }, "could not record an Event");
      });
    this.chains.set(key, write);
    this.pending.add(write);
    void write.finally(() => {
      this.pending.delete(write);
      if (this.chains.get(key) === write) this.chains.delete(key);
    });
  }

  /** Resolves when every Event recorded so far has been written (or given up). */
  async flush(): Promise<void> {
    while (this.pending.size) await Promise.all([...this.pending]);
  }

  private async write(key: string, obj: KubeObject, type: EventType, reason: string, message: string): Promise<void> {
    const now = this.opts.now();
    const ts = now.toISOString();
    const namespace = obj.metadata.namespace!;
    const prev = this.seen.get(key);
    if (prev && now.getTime() - prev.last < this.opts.windowMs) {
      const count = prev.count + 1;
      try {
        await this.rest.request("PATCH", `/api/v1/namespaces/${prev.namespace}/events/${prev.name}`, {
          body: { count, lastTimestamp: ts },
          contentType: "application/merge-patch+json",
        });
        this.remember(key, { ...prev, count, last: now.getTime() });
        return;
      } catch (err) {
        if (!isNotFound(err)) throw err;
        // The Event expired (the API server keeps them an hour by default): record a new one.
      }
    }
    const eventName = `${obj.metadata.name}.${Date.now().toString(16)}${randomBytes(2).toString("hex")}`;
    await this.rest.request("POST", `/api/v1/namespaces/${namespace}/events`, {
      body: {
        apiVersion: "v1",
        kind: "Event",
        metadata: { name: eventName, namespace },
        involvedObject: {
          apiVersion: obj.apiVersion,
          kind: obj.kind,
          namespace,
          name: obj.metadata.name,
          uid: obj.metadata.uid,
          resourceVersion: obj.metadata.resourceVersion,
        },
        type,
        reason,
        message,
        source: { component: this.opts.component },
        reportingComponent: this.opts.component,
        reportingInstance: this.opts.instance,
        firstTimestamp: ts,
        lastTimestamp: ts,
        count: 1,
      },
    });
    this.remember(key, { name: eventName, namespace, count: 1, last: now.getTime() });
  }

  private remember(key: string, seen: Seen): void {
    this.seen.delete(key);
    this.seen.set(key, seen);
    if (this.seen.size > this.opts.maxKeys) this.seen.delete(this.seen.keys().next().value!);
  }
}
