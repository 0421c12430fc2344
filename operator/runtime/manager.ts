// The Manager ties the runtime together, like controller-runtime's: it owns the shared
// informers (one per resource and selector), the controllers, leader election and the health
// server. Lifecycle:
//   start(): health server up; every informer started and synced; then leadership is sought
//            and controllers run only while this process leads (or at once without election).
//   stop():  controllers drained, Lease released, informers stopped, health server closed.
// Register informers and controllers before start().
import type { Logger } from "pino";
import { ListWatchInformer, type Informer, type InformerOptions } from "../../kube/informer.ts";
import { PerNamespaceInformer, type PerNamespaceOptions } from "../../kube/per-namespace-informer.ts";
import type { KubeObject } from "../../kube/objects.ts";
import { KubeRest, type KubeAuth } from "../../kube/transport.ts";
import { Controller, type ControllerOptions } from "./controller.ts";
import { HealthServer, type ReadinessCheck } from "./health.ts";
import { LeaderElector, type LeaderElectionOptions } from "./leader.ts";
import type { Metrics } from "./metrics.ts";

export interface ManagerOptions {
  /** Credentials (client-node's KubeConfig fits), or a transport to share. */
  kc: KubeAuth | KubeRest;
  log: Logger;
  metrics: Metrics;
  /** The health server; `readiness` adds checks to the built-in "informers" one. */
  health: { host?: string; port: number; readiness?: ReadinessCheck[] };
  /** A Lease to lead on; false runs the controllers in every replica. */
  leaderElection?: LeaderElectionOptions | false;
}

export class Manager {
  private readonly opts: ManagerOptions;
  /** One transport (one connection pool) for the informers and the Lease; share it for writes too. */
  readonly rest: KubeRest;
  private readonly log: Logger;
  private readonly informers = new Map<string, Informer<KubeObject>>();
  private readonly controllers: Controller[] = [];
  private readonly health: HealthServer;
  private readonly elector: LeaderElector | undefined;
  private electing: Promise<void> | undefined;
  private _healthPort: number | undefined;
  private state: "new" | "starting" | "started" | "stopping" | "stopped" = "new";

  constructor(opts: ManagerOptions) {
    this.opts = opts;
    this.log = opts.log.child({ component: "manager" });
    this.health = new HealthServer({
      host: opts.health.host,
      port: opts.health.port,
      metrics: opts.metrics,
      readiness: [
        { name: "informers", check: () => [...this.informers.values()].every((i) => i.synced) },
        ...(opts.health.readiness ?? []),
      ],
    });
    this.rest = KubeRest.from(opts.kc);
    this.elector = opts.leaderElection ? new LeaderElector(this.rest, opts.leaderElection, opts.log) : undefined;
  }

  get healthPort(): number | undefined {
    return this._healthPort;
  }

  /** True while the controllers may run: elected, or leader election disabled. */
  get isLeader(): boolean {
    return this.elector ? this.elector.isLeader : this.state === "started";
  }

  /** The shared informer of a resource: one per apiVersion, plural, namespace and label selector. */
  informer<T extends KubeObject>(opts: InformerOptions): Informer<T> {
    const key = [opts.apiVersion, opts.plural, opts.namespace ?? "", opts.labelSelector ?? "", opts.dropManagedFields ? "trim" : ""].join(
      "|",
    );
    let informer = this.informers.get(key);
    if (!informer) {
      this.assertNotStarted("informer()");
      informer = new ListWatchInformer<KubeObject>(this.rest, opts, this.log.child({ informer: opts.plural }));
      this.informers.set(key, informer);
    }
    return informer as unknown as Informer<T>;
  }

  /**
   * The shared informer of a resource in some namespaces, one list and watch in each
   * (kube/per-namespace-informer.ts): for a resource the operator may read only there.
   */
  perNamespaceInformer<T extends KubeObject>(opts: PerNamespaceOptions): Informer<T> {
    const where = "namespaces" in opts ? opts.namespaces.join(",") : `follow:${opts.follow.options.labelSelector ?? ""}`;
    const key = ["per-namespace", opts.apiVersion, opts.plural, where, opts.labelSelector ?? "", opts.dropManagedFields ? "trim" : ""].join(
      "|",
    );
    let informer = this.informers.get(key);
    if (!informer) {
      this.assertNotStarted("perNamespaceInformer()");
      informer = new PerNamespaceInformer<KubeObject>(this.rest, opts, this.log.child({ informer: opts.plural }));
      this.informers.set(key, informer);
    }
    return informer as unknown as Informer<T>;
  }

  addController(opts: Omit<ControllerOptions, "metrics" | "log">): Controller {
    this.assertNotStarted("addController()");
    const controller = new Controller({ ...opts, metrics: this.opts.metrics, log: this.opts.log });
    this.controllers.push(controller);
    return controller;
  }

  /** Resolves once the health server listens, the informers are synced and leadership is sought. */
  async start(): Promise<void> {
    this.assertNotStarted("start()");
    this.state = "starting";
    this._healthPort = (await this.health.start()).port;
    this.log.info({ port: this._healthPort }, "health server listening");
    await Promise.all([...this.informers.values()].map((i) => i.start()));
    if (this.state !== "starting") return; // stop() was called meanwhile
    this.state = "started";
    this.log.info({ informers: this.informers.size }, "informers synced");
    if (!this.elector) {
      this.startControllers();
      return;
    }
    const identity = this.opts.leaderElection ? this.opts.leaderElection.identity : "";
    const gauge = this.opts.metrics.leader;
    gauge.set({ identity }, 0);
    this.electing = this.elector.run({
      onStartedLeading: async (signal) => {
        gauge.set({ identity }, 1);
        this.startControllers();
        await new Promise((resolve) => signal.addEventListener("abort", resolve, { once: true }));
        // A graceful stop drains in-flight reconciles; a lost Lease aborts them at once, since
        // another replica may already be leading.
        await this.stopControllers(this.state === "stopping" ? undefined : 0);
        gauge.set({ identity }, 0);
      },
      onStoppedLeading: () => this.log.info("controllers stopped: not the leader"),
    });
  }

  async stop(): Promise<void> {
    if (this.state === "stopped" || this.state === "stopping") return;
    this.state = "stopping";
    if (this.elector) {
      await this.elector.stop();
      await this.electing;
    }
    await this.stopControllers();
    await Promise.all([...this.informers.values()].map((i) => i.stop()));
    await this.health.stop();
    this.state = "stopped";
    this.log.info("manager stopped");
  }

  private startControllers(): void {
    for (const c of this.controllers) c.start();
  }

  private async stopControllers(timeoutMs?: number): Promise<void> {
    await Promise.all(this.controllers.map((c) => c.stop(timeoutMs === undefined ? {} : { timeoutMs })));
  }

  private assertNotStarted(what: string): void {
    if (this.state !== "new") throw new Error(`Manager: ${what} must be called before start()`);
  }
}
