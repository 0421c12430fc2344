// Leader election on a coordination.k8s.io/v1 Lease, like client-go's leaderelection:
// - a candidate acquires the Lease when it is free (no holderIdentity) or expired
//   (renewTime + leaseDurationSeconds < now), retrying every retryPeriod (jittered);
// - the leader renews every retryPeriod and gives up leadership when renewing has failed for
//   renewDeadline, or at once when it sees another holder in the Lease;
// - every write is a replace guarded by resourceVersion, so two candidates never both win
//   (409 Conflict: re-read and try again);
// - stop() ends the leading work, then releases the Lease (clears holderIdentity) so a
//   successor takes over at once instead of waiting for expiry.
// Unlike client-go's Run, run() goes back to being a candidate after losing leadership, and
// returns only after stop().
import type * as k8s from "@kubernetes/client-node";
import type { Logger } from "pino";
import { KubeRest, errorMessage, isConflict, isNotFound, sleep, type KubeAuth } from "../../kube/transport.ts";
import type { Access } from "../../kube/rbac.ts";

/**
 * What leader election does (RBAC from code): it creates the Lease when missing, then reads and
 * replaces only that one, in the namespace it lives in (the release namespace).
 */
export function leaderElectionAccess(leaseName: string): Access[] {
  return [
    {
      group: "coordination.k8s.io",
      resource: "leases",
      verbs: ["create"],
      scope: "release",
      why: "Leader election creates its Lease when missing (create cannot be narrowed by name)",
    },
    {
      group: "coordination.k8s.io",
      resource: "leases",
      verbs: ["get", "update"],
      names: [leaseName],
      scope: "release",
      why: "Leader election reads and renews only its own Lease",
    },
  ];
}

export interface LeaderElectionOptions {
  namespace: string;
  name: string;
  /** Unique per process, e.g. the pod name. */
  identity: string;
  /** Default 15. Whole seconds (the Lease field is an integer). */
  leaseDurationSeconds?: number;
  /** Default 10; must be less than leaseDurationSeconds. */
  renewDeadlineSeconds?: number;
  /** Default 2. */
  retryPeriodSeconds?: number;
}

export interface LeaderCallbacks {
  /** Called on election; `signal` aborts when leadership ends. Its promise should settle soon after. */
  onStartedLeading: (signal: AbortSignal) => void | Promise<void>;
  /** Called after leadership ended and onStartedLeading's promise settled. */
  onStoppedLeading: () => void;
}

type Attempt = "acquired" | "held" | "failed";

/** A Lease as the API server sends it: times are MicroTime strings. */
type LeaseSpec = Omit<k8s.V1LeaseSpec, "acquireTime" | "renewTime"> & { acquireTime?: string; renewTime?: string };
type Lease = Omit<k8s.V1Lease, "spec"> & { spec?: LeaseSpec };

function timeOf(t: unknown): number {
  return t === undefined || t === null ? 0 : new Date(t as string | Date).getTime();
}

/** A metav1.MicroTime: RFC 3339 with six fractional digits. */
function microTime(ms: number): string {
  return new Date(ms).toISOString().replace(/\.(\d{3})Z$/, ".$1000Z");
}

export class LeaderElector {
  private readonly rest: KubeRest;
  private readonly opts: Required<LeaderElectionOptions>;
  private readonly log: Logger;
  private stopping = false;
  private wake = new AbortController();
  private running: Promise<void> | undefined;
  private _isLeader = false;

  constructor(kc: KubeAuth | KubeRest, opts: LeaderElectionOptions, log: Logger) {
    this.rest = KubeRest.from(kc);
    this.opts = { leaseDurationSeconds: 15, renewDeadlineSeconds: 10, retryPeriodSeconds: 2, ...opts };
    if (this.opts.renewDeadlineSeconds >= this.opts.leaseDurationSeconds)
      throw new Error("renewDeadlineSeconds must be less than leaseDurationSeconds");
    this.log = log.child({ lease: `${opts.namespace}/${opts.name}`, identity: opts.identity });
  }

  get isLeader(): boolean {
    return this._isLeader;
  }

  /** Campaigns, leads, and campaigns again after losing the Lease, until stop(). */
  run(callbacks: LeaderCallbacks): Promise<void> {
    if (this.running) throw new Error("LeaderElector is already running");
    this.stopping = false;
    this.running = this.loop(callbacks).finally(() => {
      this.running = undefined;
    });
    return this.running;
  }

  /** Ends leadership (waiting for the leading work), releases the Lease, and returns when run() has. */
  async stop(): Promise<void> {
    this.stopping = true;
    this.wake.abort();
    await this.running;
  }

  private async loop(callbacks: LeaderCallbacks): Promise<void> {
    const retryMs = this.opts.retryPeriodSeconds * 1000;
    while (!this.stopping) {
      if ((await this.tryAcquireOrRenew(Date.now() + this.opts.renewDeadlineSeconds * 1000)) !== "acquired") {
        await this.sleep(retryMs * (1 + 0.2 * Math.random()));
        continue;
      }
      // stop() came while the Lease was being taken: no leading work starts (its signal would be
      // aborted before the work could listen for it), and the Lease goes back at once
      if (this.stopping) {
        await this.release();
        break;
      }
      await this.lead(callbacks);
    }
  }

  private async lead(callbacks: LeaderCallbacks): Promise<void> {
    const retryMs = this.opts.retryPeriodSeconds * 1000;
    const deadlineMs = this.opts.renewDeadlineSeconds * 1000;
    this._isLeader = true;
    this.log.info("became leader");
    const leading = new AbortController();
    const work = Promise.resolve()
      .then(() => callbacks.onStartedLeading(leading.signal))
      .catch((err: unknown) => this.log.error({ err }, "onStartedLeading failed"));
    let lastRenew = Date.now();
    while (!this.stopping) {
      await this.sleep(retryMs);
      if (this.stopping) break;
      // a renewal that hangs must not outlive the renew deadline: the Lease could expire and
      // another replica lead while this one still thinks it does
      const attempt = await this.tryAcquireOrRenew(lastRenew + deadlineMs);
      if (attempt === "acquired") {
        lastRenew = Date.now();
        continue;
      }
      if (attempt === "held") {
        this.log.warn("the Lease has another holder; stepping down");
        break;
      }
      if (Date.now() - lastRenew >= deadlineMs) {
        this.log.warn({ renewDeadlineSeconds: this.opts.renewDeadlineSeconds }, "could not renew the Lease; stepping down");
        break;
      }
    }
    this._isLeader = false;
    leading.abort(new Error(this.stopping ? "leader election stopping" : "leadership lost"));
    await work;
    try {
      callbacks.onStoppedLeading();
    } catch (err) {
      this.log.error({ err }, "onStoppedLeading failed");
    }
    if (this.stopping) await this.release();
    this.log.info("stopped leading");
  }

  /** One optimistic-concurrency attempt to take or keep the Lease, its requests answered by `deadline` (epoch ms) or failed. */
  private async tryAcquireOrRenew(deadline: number): Promise<Attempt> {
    const { namespace, name, identity, leaseDurationSeconds } = this.opts;
    const left = untilDeadline(deadline);
    for (let attempt = 0; attempt < 3; attempt++) {
      try {
        const nowMs = Date.now();
        const now = microTime(nowMs);
        const lease = await this.read(left());
        if (!lease) {
          await this.rest.request("POST", this.collection(), {
            timeoutMs: left(),
            body: {
              apiVersion: "coordination.k8s.io/v1",
              kind: "Lease",
              metadata: { name, namespace },
              spec: { holderIdentity: identity, leaseDurationSeconds, acquireTime: now, renewTime: now, leaseTransitions: 0 },
            },
          });
          return "acquired";
        }
        const spec = lease.spec ?? {};
        const holder = spec.holderIdentity ?? "";
        const expired = timeOf(spec.renewTime) + (spec.leaseDurationSeconds ?? 0) * 1000 < nowMs;
        if (holder && holder !== identity && !expired) return "held";
        const next: LeaseSpec =
          holder === identity
            ? { ...spec, leaseDurationSeconds, renewTime: now }
            : {
                holderIdentity: identity,
                leaseDurationSeconds,
                acquireTime: now,
                renewTime: now,
                leaseTransitions: (spec.leaseTransitions ?? 0) + 1,
              };
        await this.replace({ ...lease, spec: next }, left());
        return "acquired";
      } catch (err) {
        if (isConflict(err)) continue;
        this.log.warn({ err: errorMessage(err) }, "leader election: Lease request failed");
        return "failed";
      }
    }
    return "failed";
  }

  /** Clears holderIdentity if this process still holds the Lease, so a successor needs no expiry. */
  private async release(): Promise<void> {
    const { identity } = this.opts;
    // bounded like a renewal: a server that does not answer must not hold up shutdown (the Lease expires anyway)
    const left = untilDeadline(Date.now() + this.opts.renewDeadlineSeconds * 1000);
    for (let attempt = 0; attempt < 3; attempt++) {
      try {
        const lease = await this.read(left());
        if (!lease || lease.spec?.holderIdentity !== identity) return;
        const now = microTime(Date.now());
        const { holderIdentity: _released, ...spec } = lease.spec;
        await this.replace({ ...lease, spec: { ...spec, leaseDurationSeconds: 1, acquireTime: now, renewTime: now } }, left());
        this.log.info("released the Lease");
        return;
      } catch (err) {
        if (isConflict(err)) continue;
        this.log.warn({ err: errorMessage(err) }, "could not release the Lease; it will expire");
        return;
      }
    }
  }

  private collection(): string {
    return `/apis/coordination.k8s.io/v1/namespaces/${this.opts.namespace}/leases`;
  }

  /** A replace carrying the read resourceVersion: 409 Conflict when someone wrote in between. */
  private async replace(lease: Lease, timeoutMs: number): Promise<void> {
    await this.rest.request("PUT", `${this.collection()}/${this.opts.name}`, { body: lease, timeoutMs });
  }

  private async read(timeoutMs: number): Promise<Lease | undefined> {
    try {
      return await this.rest.request<Lease>("GET", `${this.collection()}/${this.opts.name}`, { timeoutMs });
    } catch (err) {
      if (isNotFound(err)) return undefined;
      throw err;
    }
  }

  /** Sleeps `ms`, or less when stop() is called. */
  private async sleep(ms: number): Promise<void> {
    if (this.stopping) return;
    if (this.wake.signal.aborted) this.wake = new AbortController();
    await sleep(ms, this.wake.signal);
  }
}

/** The milliseconds a request may still take to end by `deadline` (epoch ms): at least 1, so it fails at once when none are left. */
function untilDeadline(deadline: number): () => number {
  return () => Math.max(1, deadline - Date.now());
}
