// The prompt-injection classifier's budget per app (BERTH_RATE_LIMIT_MODEL_*). A model run costs
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
import { classifierUse, GuardsConfig, type EngineConfigInput } from "../../../toolkit/src/index.ts";
import { estimatedRuns } from "../../../toolkit/src/guards/classifier/index.ts";
import { RateLimiter, TooManyRequestsError, type Budget } from "../../http/limits.ts";
import type { AppPrincipal } from "../../http/route.ts";

const uses = new WeakMap<EngineConfigInput, ReturnType<typeof classifierUse>>();

/** classifierUse of an engine input, memoised by the input object (EngineInputs keeps one per config version). */
export function classifierUseOf(input: EngineConfigInput): ReturnType<typeof classifierUse> {
  let use = uses.get(input);
  if (!use) {
    use = classifierUse(GuardsConfig.parse(input.guards ?? {}));
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
