// The governance module's services, wired once by the composition root (api/main.ts), and the
// checks every service-scoped endpoint shares: the App exists in the caller's workspace (404
// app_not_found) and, for its data, its store is provisioned (404 governance_not_provisioned).
import type { Budget } from "../http/limits.ts";
import { ModelRuns } from "./ingest/model-runs.ts";
import type { MikroORM } from "@mikro-orm/postgresql";
import { NotFoundError } from "../errors.ts";
import type { AppPrincipal } from "../http/route.ts";
import type { Logger } from "../../kube/logger.ts";
import { appAnnotator, appLookup, type AppLookup, type AppRef, type AppStore } from "./stores/apps.ts";
import { EngineConfig } from "../../toolkit/src/index.ts";
import { ObservabilityConfigService } from "./configs/app-configs.ts";
import { GovernanceDb } from "./stores/db.ts";
import { IngestionService } from "./ingest/ingest.ts";
import { EngineInputs } from "./ingest/app-scope.ts";
import { GuardCheckService } from "./ingest/guard-check.ts";
import { AppKeyService } from "./keys/app-keys.ts";
import { anyGuardEnabled, engineInput } from "./configs/observability.ts";
import { InProcessScorer, WorkerPoolScorer, type Scorer } from "./ingest/scoring.ts";
import { PriceTable, type ModelPricesConfig } from "./ingest/pricing.ts";
import { ProvisioningService } from "./stores/provisioning.ts";
import { StoreReader, type StoreRef } from "./reads/reader.ts";
import { GuardTemplateService } from "./configs/guard-templates.ts";

/** The governance stage of a pipeline state (`harbor`). */
export interface HarborStage {
  status: "active" | "disabled" | "not_provisioned";
  guardsEnabled: boolean;
  lastEvalAt: string | null;
}

export interface GovernanceDeps {
  orm: MikroORM;
  /** the API's read-your-writes cache of Apps */
  apps: AppStore;
  namespaceOf: (workspaceId: string) => Promise<string>;
  /** BERTH_GOVERNANCE_HOST */
  host: string;
  /** BERTH_MODEL_PRICES */
  prices?: ModelPricesConfig | undefined;
  /** BERTH_INGEST_WORKERS: worker threads that run guards and evals on ingestion (0: in-process) */
  workers?: number;
  /** BERTH_SCORING_TASK_TIMEOUT_MS: a scoring task's deadline in a worker thread (none in-process) */
  scoringTaskTimeoutMs?: number;
  /** The scoring threads' module; the real one when absent (tests give one that can be made to run away). */
  scoringWorkerUrl?: URL | undefined;
  /** BERTH_RATE_LIMIT_MODEL_*: classifier runs per app (model-runs.ts); none when absent */
  modelBudget?: Budget | undefined;
  log: Logger;
}

export class Governance {
  readonly db: GovernanceDb;
  readonly apps: AppLookup;
  readonly keys: AppKeyService;
  readonly templates: GuardTemplateService;
  readonly configs: ObservabilityConfigService;
  /** the engine input of an app's config by version, for ingestion and guard checks */
  readonly engines: EngineInputs;
  readonly scorer: Scorer;
  readonly prices: PriceTable;
  readonly provisioning: ProvisioningService;
  readonly ingestion: IngestionService;
  readonly guardCheck: GuardCheckService;
  readonly reader: StoreReader;
  readonly #log: Logger;

  constructor(deps: GovernanceDeps) {
    this.#log = deps.log;
    this.db = new GovernanceDb(deps.orm);
    this.apps = appLookup({ apps: deps.apps, namespaceOf: deps.namespaceOf });
    this.keys = new AppKeyService({ db: this.db, log: deps.log });
    this.templates = new GuardTemplateService();
    this.configs = new ObservabilityConfigService({ db: this.db, templates: this.templates });
    this.scorer = deps.workers
      ? new WorkerPoolScorer({
          size: deps.workers,
          log: deps.log,
          taskTimeoutMs: deps.scoringTaskTimeoutMs,
          ...(deps.scoringWorkerUrl ? { workerUrl: deps.scoringWorkerUrl } : {}),
        })
      : new InProcessScorer();
    this.prices = new PriceTable(deps.prices);
    this.provisioning = new ProvisioningService({
      db: this.db,
      apps: this.apps,
      annotate: appAnnotator(deps.apps),
      host: deps.host,
      log: deps.log,
    });
    this.engines = new EngineInputs(this.configs);
    const modelRuns = new ModelRuns(deps.modelBudget);
    this.ingestion = new IngestionService({
      db: this.db,
      engines: this.engines,
      scorer: this.scorer,
      prices: this.prices,
      modelRuns,
      log: deps.log,
    });
    this.guardCheck = new GuardCheckService({ engines: this.engines, scorer: this.scorer, modelRuns, log: deps.log });
    this.reader = new StoreReader(this.db);
  }

  /** 404 app_not_found unless the App exists in the workspace. */
  async requireApp(workspaceId: string, appId: string): Promise<AppRef> {
    const app = await this.apps(workspaceId, appId);
    if (!app) throw new NotFoundError("app_not_found", `No service ${appId} in this workspace`);
    return app;
  }

  /** The store of an existing App; 404 when governance is not provisioned (or switched off). */
  async store(workspaceId: string, appId: string): Promise<StoreRef> {
    await this.requireApp(workspaceId, appId);
    const p = await this.provisioning.project(workspaceId, appId);
    if (!p || p.status !== "active") {
      throw new NotFoundError(
        "governance_not_provisioned",
        p
          ? `Governance is switched off for ${appId}; POST .../governance/apps/${appId}/provision turns it back on.`
          : `Governance is not provisioned for ${appId} yet: it is provisioned on the first deployment (or with POST .../provision).`,
      );
    }
    return { schema: p.schema, role: p.role };
  }

  /** What pipeline-state reports under `harbor`. Never throws: an unreadable store reports no eval time. */
  async harbor(workspaceId: string, appId: string): Promise<HarborStage> {
    const p = await this.provisioning.project(workspaceId, appId);
    if (!p) return { status: "not_provisioned", guardsEnabled: false, lastEvalAt: null };
    if (p.status !== "active") return { status: "disabled", guardsEnabled: false, lastEvalAt: null };
    const { config } = await this.configs.get(workspaceId, appId);
    let lastEvalAt: string | null = null;
    try {
      lastEvalAt = await this.reader.lastEvalAt({ schema: p.schema, role: p.role });
    } catch (err) {
      this.#log.warn({ err, workspaceId, appId }, "could not read the last eval time");
    }
    return { status: "active", guardsEnabled: anyGuardEnabled(config), lastEvalAt };
  }

  /** GET /governance/config: what the toolkit loads at boot. */
  async toolkitConfig(app: AppPrincipal) {
    const state = await this.configs.get(app.workspaceId, app.appId);
    return { project: app.appId, observability: state.config, engine: EngineConfig.parse(engineInput(state.config, state.templates)) };
  }

  /** Stops the scoring workers. */
  async close(): Promise<void> {
    await this.scorer.close();
  }
}
