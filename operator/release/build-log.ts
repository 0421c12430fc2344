// A build's result as soon as the build program prints it (docs/builds.md). The program ends its
// log with `[result] {json}`, the same JSON it writes to the termination message. The kubelet only
// notices a container's exit at its next look at the runtime (every second) and then reports it,
// so reading the result off the log moves a release on most of a second earlier; the pod's status
// stays the fallback (operator restarts, a stream that fails, a log that never says).
//
// One stream per running build pod, opened once (the reconciler asks on every pass), ended by the
// API server when the container exits; a result is kept until the reconciler forgets it, or for
// RESULT_TTL_MS should it never come back for it (its release deleted meanwhile).
import type * as k8s from "@kubernetes/client-node";
import type { KubeRest } from "../../kube/transport.ts";
import type { Request } from "../runtime/controller.ts";
import { parseBuildResult, RESULT_LINE_PREFIX, type BuildResult } from "./builders.ts";

/** A result line is at most this long: the termination message's 4096 bytes, escaped. */
const MAX_LINE = 16 * 1024;
const RESULT_TTL_MS = 10 * 60_000;

/** The result a log line carries: only a whole line starting with the prefix, parsed strictly. */
export function resultOfLine(line: string): BuildResult | undefined {
  const text = line.endsWith("\r") ? line.slice(0, -1) : line;
  return text.startsWith(RESULT_LINE_PREFIX) ? parseBuildResult(text.slice(RESULT_LINE_PREFIX.length)) : undefined;
}

interface Follow {
  abort: AbortController;
  result?: BuildResult;
  expiry?: NodeJS.Timeout;
}

export class BuildLogs {
  private readonly rest: KubeRest;
  private readonly wake: (req: Request) => void;
  private readonly follows = new Map<string, Follow>();
  private readonly resultTtlMs: number;
  private stopped = false;

  /** `wake`: enqueues the release whose build printed its result. */
  constructor(rest: KubeRest, wake: (req: Request) => void, options: { resultTtlMs?: number } = {}) {
    this.rest = rest;
    this.wake = wake;
    this.resultTtlMs = options.resultTtlMs ?? RESULT_TTL_MS;
  }

  /**
   * The result the build pod has printed, if any; starts following its log the first time a
   * running pod is asked for (and again after a stream that failed).
   */
  result(pod: k8s.V1Pod, release: Request): BuildResult | undefined {
    const uid = pod.metadata?.uid;
    if (!uid || this.stopped) return undefined;
    const known = this.follows.get(uid);
    if (known) return known.result;
    if (!pod.status?.containerStatuses?.[0]?.state?.running) return undefined; // no log to follow yet
    const f: Follow = { abort: new AbortController() };
    this.follows.set(uid, f);
    const path = `/api/v1/namespaces/${encodeURIComponent(pod.metadata!.namespace!)}/pods/${encodeURIComponent(pod.metadata!.name!)}/log`;
    const container = pod.spec?.containers?.[0]?.name;
    this.rest
      .lines(
        path,
        { follow: true, ...(container ? { container } : {}) },
        (line) => {
          if (f.result) return;
          const r = resultOfLine(line);
          if (!r) return;
          f.result = r;
          this.wake(release);
        },
        f.abort.signal,
        { maxLine: MAX_LINE, what: "follow" },
      )
      .then(
        () => {
          // The container exited (the stream's end): keep a result for the reconciler, else nothing to
          // keep. A follow already forgotten (and perhaps followed anew) is no longer this one's to time.
          if (this.follows.get(uid) !== f) return;
          if (f.result) {
            f.expiry = setTimeout(() => this.forget(uid), this.resultTtlMs);
            f.expiry.unref();
          } else this.follows.delete(uid);
        },
        () => {
          // Refused or cut (the pod went, the node is unreachable): the pod's status tells instead;
          // the next pass may follow again.
          if (!f.result && this.follows.get(uid) === f) this.follows.delete(uid);
        },
      );
    return undefined;
  }

  /** Stops following the pod's log and drops its result (the release moved on). */
  forget(uid: string | undefined): void {
    const f = uid ? this.follows.get(uid) : undefined;
    if (!f) return;
    f.abort.abort();
    clearTimeout(f.expiry);
    this.follows.delete(uid!);
  }

  /** How many logs are followed or results kept (for tests). */
  get size(): number {
    return this.follows.size;
  }

  stop(): void {
    this.stopped = true;
    for (const uid of [...this.follows.keys()]) this.forget(uid);
  }
}
