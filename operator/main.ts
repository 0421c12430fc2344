// The operator's composition root: config, client, the Manager with its shared informers, the
// Event recorder, leader election, health and metrics; then each controller's wiring
// (app/controller.ts, release/controller.ts, domain/controller.ts). Nothing runs at import time of
// any other module.
import { createLogger, type Logger } from "../kube/logger.ts";
import { KubeEventRecorder } from "../kube/events.ts";
// Only modules that do not load @kubernetes/client-node (its generated code alone is ~60 MiB).
import { loadLeanKubeConfig } from "../kube/kubeconfig.ts";
import { ObjectClient } from "../kube/objects.ts";
import { Manager, Metrics, countKubeRequests } from "./runtime/index.ts";
import { loadOperatorConfig, type OperatorConfig } from "./config.ts";
import type { OperatorContext } from "./kit/context.ts";
import { SharedInformers } from "./kit/informers.ts";
import { wireAppController } from "./app/controller.ts";
import { wireReleaseController } from "./release/controller.ts";
import { wireDomainController } from "./domain/controller.ts";

/** The Lease the operator's replicas elect a leader on, in BERTH_LEADER_ELECTION_NAMESPACE. */
export const LEADER_ELECTION_LEASE = "berth-operator";

export interface RunningOperator {
  manager: Manager;
  metrics: Metrics;
  events: KubeEventRecorder;
  stop(): Promise<void>;
}

/** Builds and starts the operator; resolves once its caches are synced. */
export async function startOperator(cfg: OperatorConfig, log: Logger): Promise<RunningOperator> {
  const kc = await loadLeanKubeConfig(cfg.KUBECONFIG, { host: cfg.KUBERNETES_SERVICE_HOST, port: cfg.KUBERNETES_SERVICE_PORT });
  const metrics = new Metrics();
  const manager = new Manager({
    kc,
    log,
    metrics,
    health: { host: cfg.BERTH_OPERATOR_HEALTH_HOST, port: cfg.BERTH_OPERATOR_HEALTH_PORT },
    leaderElection: cfg.BERTH_LEADER_ELECTION
      ? { namespace: cfg.BERTH_LEADER_ELECTION_NAMESPACE, name: LEADER_ELECTION_LEASE, identity: cfg.identity }
      : false,
  });
  countKubeRequests(metrics, manager.rest);
  const op: OperatorContext = {
    manager,
    informers: new SharedInformers(manager, cfg.BERTH_WATCH_NAMESPACE),
    client: new ObjectClient(manager.rest),
    events: new KubeEventRecorder(manager.rest, { component: "berth-operator", instance: cfg.identity, log }),
    metrics,
    cfg,
    now: () => new Date(),
  };
  const wired = [wireAppController(op), wireReleaseController(op), wireDomainController(op)];

  await manager.start();
  log.info({ identity: cfg.identity, healthPort: manager.healthPort, namespace: cfg.BERTH_WATCH_NAMESPACE ?? "(all)" }, "operator started");
  return {
    manager,
    metrics,
    events: op.events,
    stop: async () => {
      await manager.stop();
      for (const w of wired) w.stop?.();
      await op.events.flush();
    },
  };
}

async function main(): Promise<void> {
  const cfg = loadOperatorConfig();
  const log = createLogger({ level: cfg.BERTH_LOG_LEVEL, base: { component: "operator" } });
  const op = await startOperator(cfg, log);
  let stopping = false;
  const shutdown = (signal: string) => {
    if (stopping) return;
    stopping = true;
    log.info({ signal }, "shutting down");
    op.stop().then(
      () => process.exit(0),
      (err: unknown) => {
        log.error({ err }, "shutdown failed");
        process.exit(1);
      },
    );
  };
  process.on("SIGTERM", () => shutdown("SIGTERM"));
  process.on("SIGINT", () => shutdown("SIGINT"));
}

if (import.meta.main) {
  main().catch((err: unknown) => {
    process.stderr.write(`operator failed to start: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
    process.exit(1);
  });
}
