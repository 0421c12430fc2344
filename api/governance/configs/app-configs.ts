// Observability configs (GET/PUT .../observability-config). Every write takes a fresh version from
// governance_config_version_seq (never reused, not even after a config is deleted and created
// again): ingestion caches what it builds from a config (the engine input, the compiled engine)
// by that version, so it reads and compiles a config only after a change.
import { randomUUID } from "node:crypto";
import type { EntityManager } from "@mikro-orm/postgresql";
import { LockMode, UniqueConstraintViolationException } from "@mikro-orm/core";
import { GuardEngine } from "../../../toolkit/src/index.ts";
import { ValidationError } from "../../errors.ts";
import { GovernanceAppConfig } from "./entities.ts";
import {
  defaultObservabilityConfig, engineInput, mergeObservability, ObservabilityConfig, resolveCustomTemplates,
  type ObservabilityConfigPatch, type TemplateSnapshot,
} from "./observability.ts";
import type { GuardTemplateService } from "./guard-templates.ts";

export interface AppConfigState {
  config: ObservabilityConfig;
  templates: TemplateSnapshot;
  /** 0 for an app that never set a config (the defaults) */
  version: number;
}

export class ObservabilityConfigService {
  readonly #templates: GuardTemplateService;
  readonly #now: () => Date;

  constructor(deps: { templates: GuardTemplateService; now?: () => Date }) {
    this.#templates = deps.templates;
    this.#now = deps.now ?? (() => new Date());
  }

  async get(em: EntityManager, workspaceId: string, appId: string): Promise<AppConfigState> {
    const row = await em.findOne(GovernanceAppConfig, { workspaceId, appId });
    return row ? stateOf(row) : { config: defaultObservabilityConfig(), templates: {}, version: 0 };
  }

  /** A partial update (observability.ts); 422 with every offending field, nothing stored then. */
  async update(em: EntityManager, workspaceId: string, appId: string, patch: ObservabilityConfigPatch): Promise<AppConfigState> {
    const entries = patch.guards?.custom_templates;
    const resolved = entries ? await this.#templates.resolve(em, entries.map((e) => e.template_id)) : undefined;
    for (let attempt = 1; ; attempt++) {
      try {
        return await em.transactional(async (tem) => {
          const row = await tem.findOne(GovernanceAppConfig, { workspaceId, appId }, { lockMode: LockMode.PESSIMISTIC_WRITE });
          const current = row ? stateOf(row) : { config: defaultObservabilityConfig(), templates: {}, version: 0 };
          const { config, errors } = mergeObservability(current.config, patch);
          let templates = current.templates;
          if (entries && resolved) {
            const r = resolveCustomTemplates(entries, resolved);
            errors.push(...r.errors);
            config.guards.custom_templates = r.entries;
            templates = r.snapshot;
          }
          if (errors.length > 0) throw new ValidationError(errors);
          // the engine must accept what is stored (it is what ingestion compiles)
          new GuardEngine(engineInput(config, templates));
          const [{ v }] = await tem.execute<[{ v: string }]>("select nextval('governance_config_version_seq') as v");
          const version = Number(v);
          if (row) {
            tem.assign(row, { config, templates: templates, version, updatedAt: this.#now() });
          } else {
            tem.persist(tem.create(GovernanceAppConfig, { id: randomUUID(), workspaceId, appId, config, templates: templates, version, updatedAt: this.#now() }));
          }
          await tem.flush();
          return { config, templates, version };
        });
      } catch (err) {
        // two first writes raced: the loser retries and merges onto the winner's row
        if (err instanceof UniqueConstraintViolationException && attempt < 3) { em.clear(); continue; }
        throw err;
      }
    }
  }
}

function stateOf(row: GovernanceAppConfig): AppConfigState {
  const parsed = ObservabilityConfig.safeParse(row.config);
  // a stored config always parses; defaults stand in if a later schema ever disagreed
  const config = parsed.success ? parsed.data : { ...defaultObservabilityConfig(), ...(row.config as Partial<ObservabilityConfig>) };
  return { config, templates: row.templates as TemplateSnapshot, version: Number(row.version) };
}
