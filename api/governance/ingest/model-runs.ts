// The guards' classifier's budget per app (BERTH_RATE_LIMIT_MODEL_*). A model run costs
// 1-7 ms of CPU in the scoring threads every app shares, against about 0.1 ms for the whole pattern
// chain, so the budgets of requests (guard, ingest) do not bound what an app can take of them: 200
// guard checks a second, each a model run, would be a core; a batch of 500 traces under
// classifier_on_ingestion is 500 runs. So the runs an app causes are counted too, with the API's
// GCRA limiter: a guard check of a prompt under a config that runs the classifier is one run per KB
// of prompt or so (estimatedRuns: the classifier reads a long prompt in windows, up to four runs'
// worth), and a batch is that for each trace without a score (the request path's scores cost
// nothing). Past the budget
// the request is refused with 429 rate_limited (policy "model") and Retry-After, before any run:
// one app's flood spends its own budget, and the other apps' checks and traces are served.
//
// A classifier the API cannot load (ClassifierUnavailableError: its files missing or of another
// build) is 503 guard_unavailable for what needs it, a guard check of a prompt or a batch scored on
// ingestion, never a decision without the model; what runs no model is served as before.
import { GuardsConfig, modelLayerUse, type EngineConfigInput } from "../../../toolkit/src/index.ts";
import { estimatedRuns } from "../../../toolkit/src/guards/classifier/index.ts";
import { UnavailableError } from "../../errors.ts";
import { RateLimiter, TooManyRequestsError, type Budget } from "../../http/limits.ts";
import type { AppPrincipal } from "../../http/route.ts";
import type { Logger } from "../../../kube/logger.ts";
import type { ClassifierUnavailableError } from "./scoring.ts";

/** Retry-After of a 503 guard_unavailable: the model's files are an operator's fix, not a moment's. */
export const GUARD_UNAVAILABLE_RETRY_AFTER_SECONDS = 60;

const uses = new WeakMap<EngineConfigInput, ReturnType<typeof modelLayerUse>>();

/**
 * modelLayerUse of an engine input, memoised by the input object (EngineInputs keeps one per config
 * version). Only the guards are parsed: the templates are read as given (the scoring threads parse
 * and compile the whole config; this thread serves HTTP).
 */
export function classifierUseOf(input: EngineConfigInput): ReturnType<typeof modelLayerUse> {
  let use = uses.get(input);
  if (!use) {
    use = modelLayerUse({ guards: GuardsConfig.parse(input.guards ?? {}), templates: input.templates });
    uses.set(input, use);
  }
  return use;
}

/** The runs scoring these prompts costs (estimatedRuns of each). */
export function runsOf(prompts: readonly string[]): number {
  return prompts.reduce((n, p) => n + estimatedRuns(p.length), 0);
}

export class ModelRuns {
  readonly #limiter: RateLimiter | undefined;
  readonly #now: () => number;

  /** `budget` undefined or with perSecond 0: no limit. */
  constructor(budget: Budget | undefined, now: () => number = Date.now) {
    const limiter = budget && new RateLimiter(budget);
    this.#limiter = limiter?.enabled ? limiter : undefined;
    this.#now = now;
  }

  /** Spends `runs` classifier runs of `app`'s budget; 429 rate_limited (policy "model") when it is spent. */
  spend(app: AppPrincipal, runs: number): void {
    if (!this.#limiter || runs <= 0) return;
    const d = this.#limiter.take(`model:${app.workspaceId}/${app.appId}`, this.#now(), runs);
    if (!d.allowed) throw new TooManyRequestsError("model", d.retryAfterSeconds);
  }
}

/**
 * What the API answers when the classifier an app's config runs cannot be loaded: 503
 * guard_unavailable with Retry-After, so that a toolkit applies its guard-error policy by name. The
 * loader's reason (it names the server's paths) goes to the operator's log, never to the tenant.
 */
export function classifierUnavailable(
  err: ClassifierUnavailableError,
  app: AppPrincipal,
  log: Logger,
  what: "guard check" | "ingestion",
): UnavailableError {
  log.error({ workspaceId: app.workspaceId, appId: app.appId, reason: err.reason }, `${what}: the guards' classifier could not be loaded`);
  return new UnavailableError(
    "guard_unavailable",
    what === "guard check"
      ? "The classifier the app's guards run (prompt injection, or a toxicity template's) is not available in this API, so its guards could not decide on this prompt. Apply your guard-error policy (on_guard_error); the operator has been told."
      : "The app's config scores traces with the prompt-injection classifier on ingestion (classifier_on_ingestion), and the classifier is not available in this API: the batch was not stored. Send it again later; the operator has been told.",
    { retryAfterSeconds: GUARD_UNAVAILABLE_RETRY_AFTER_SECONDS, cause: err },
  );
}
