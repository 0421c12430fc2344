// What the requests of an app's key (auth "app-key") share before the engine runs: the project
// they may name (the key's own), the app's store as the key check found it, and the engine input
// of the app's config at the version that check read. Ingestion (ingest.ts) and guard checks
// (guard-check.ts) both take them from here, so both evaluate with the same config, the app's
// current one, which is also what GET /governance/config serves (engineInput of the same stored
// config and templates).
import type { EngineConfigInput } from "../../../toolkit/src/index.ts";
import { ConflictError, ForbiddenError } from "../../errors.ts";
import type { AppPrincipal } from "../../http/route.ts";
import type { ObservabilityConfigService } from "../configs/app-configs.ts";
import { defaultObservabilityConfig, engineInput } from "../configs/observability.ts";

/**
 * 403 project_mismatch when a request names a project other than the key's (`named`: every
 * project it names): a misconfigured client fails loudly, before anything is done for it. `what`
 * says what named it ("a trace"), `rule` what a key may do instead.
 */
export function assertKeyProject(app: AppPrincipal, named: readonly string[], what: string, rule: string): void {
  const foreign = named.find((p) => p !== app.appId);
  if (foreign === undefined) return;
  throw new ForbiddenError("project_mismatch", `This key belongs to project ${app.appId}; ${what} names project ${foreign}. ${rule}`, {
    details: { keyProject: app.appId },
  });
}

export interface KeyStore {
  schema: string;
  role: string;
  /** the app's config version when the key was checked (0: the defaults, never set) */
  version: number;
}

/** The active store of the key's app and its config version, as the key check read them; 409 governance_not_provisioned otherwise. */
export function activeStore(app: AppPrincipal): KeyStore {
  if (!app.store?.active) throw new ConflictError("governance_not_provisioned", `Governance is not provisioned for ${app.appId}.`);
  return { schema: app.store.schema, role: app.store.role, version: app.store.configVersion };
}

const ENGINE_INPUTS_MAX = 500;

/**
 * Engine inputs by config version: a config is read from the database once per version (versions
 * come from a sequence and are never reused, so a version names one app's config), and the
 * scorer compiles each version once per thread. At most 500 are kept, the oldest dropped first.
 */
export class EngineInputs {
  readonly #configs: Pick<ObservabilityConfigService, "atVersion">;
  readonly #inputs = new Map<number, EngineConfigInput>();

  constructor(configs: Pick<ObservabilityConfigService, "atVersion">) {
    this.#configs = configs;
  }

  /** The engine input of `app`'s config at `version`; 409 config_changed when the app's config has moved past it. */
  async of(app: AppPrincipal, version: number): Promise<EngineConfigInput> {
    const hit = this.#inputs.get(version);
    if (hit) return hit;
    let input: EngineConfigInput;
    if (version === 0) {
      input = engineInput(defaultObservabilityConfig(), {});
    } else {
      const stored = await this.#configs.atVersion(app.workspaceId, app.appId, version);
      if (!stored) throw new ConflictError("config_changed", "The app's observability config changed during the request; retry.");
      input = engineInput(stored.config, stored.templates);
    }
    if (this.#inputs.size >= ENGINE_INPUTS_MAX) this.#inputs.delete(this.#inputs.keys().next().value!);
    this.#inputs.set(version, input);
    return input;
  }
}
