// Guard checks (POST /governance/guard-check, auth "app-key"): the decision of an app's guards on
// one text, for a toolkit that does not carry the guard engine (the Python one) and asks the API in
// its service's request path instead. The verdicts are the engine's by construction: the same
// config as ingestion and GET /governance/config (app-scope.ts: the version the key check read),
// the same compiled engines and classifier in the same scoring threads (scoring.ts checkText).
//
// The key decides the app: its config version comes from the key check, and its engine input is
// read for the key's own workspace and app; a `project` in the body can only be refused. Nothing
// is stored, and the text is never logged (a prompt may hold anything).
//
// A check whose scoring task passes its deadline (BERTH_SCORING_TASK_TIMEOUT_MS, worker threads
// only) answers 503 guard_timeout with Retry-After: a server-side failure the toolkit treats as
// any guard outage (its on_guard_error: let the call through unguarded, or refuse it). Its worker
// was replaced; a retry of the same text will most likely time out again. A prompt whose config
// runs the classifier, in an API that cannot load it, answers 503 guard_unavailable
// (model-runs.ts classifierUnavailable).
import { UnavailableError } from "../../errors.ts";
import type { AppPrincipal } from "../../http/route.ts";
import type { Logger } from "../../../kube/logger.ts";
import type { GuardCheckRequest } from "../schemas.ts";
import { activeStore, assertKeyProject, type EngineInputs } from "./app-scope.ts";
import { ClassifierUnavailableError, ScoringTimeoutError, type GuardCheckResult, type Scorer } from "./scoring.ts";
import { classifierUnavailable, classifierUseOf, runsOf, type ModelRuns } from "./model-runs.ts";

/** Retry-After of a 503 guard_timeout: a replaced worker is serving again within a second. */
export const GUARD_TIMEOUT_RETRY_AFTER_SECONDS = 1;

export interface GuardCheckDeps {
  /** shared with ingestion: one read and one compile per config version for both */
  engines: EngineInputs;
  scorer: Scorer;
  /** the app's classifier runs (a check of a prompt under a config that runs it is one); no limit when absent */
  modelRuns?: ModelRuns;
  log: Logger;
}

export class GuardCheckService {
  readonly #d: GuardCheckDeps;

  constructor(deps: GuardCheckDeps) {
    this.#d = deps;
  }

  async check(app: AppPrincipal, req: GuardCheckRequest): Promise<GuardCheckResult> {
    assertKeyProject(
      app,
      req.project === undefined ? [] : [req.project],
      "the request",
      "A key checks text with its own project's guards only.",
    );
    const { version } = activeStore(app);
    const engine = await this.#d.engines.of(app, version);
    // a check the patterns end up blocking runs no model, but is counted all the same: the budget
    // is spent before the check, so that a refused one runs nothing
    if (req.phase === "input" && classifierUseOf(engine).requestPath) this.#d.modelRuns?.spend(app, runsOf([req.text]));
    let result: GuardCheckResult;
    try {
      result = await this.#d.scorer.check(version, engine, req.text, req.phase);
    } catch (err) {
      if (err instanceof ClassifierUnavailableError) throw classifierUnavailable(err, app, this.#d.log, "guard check");
      if (!(err instanceof ScoringTimeoutError)) throw err;
      this.#d.log.warn(
        { workspaceId: app.workspaceId, appId: app.appId, phase: req.phase, chars: req.text.length, timeoutMs: err.timeoutMs },
        "guard check timed out",
      );
      throw new UnavailableError(
        "guard_timeout",
        `The app's guards did not decide on this text within ${err.timeoutMs} ms; the check was stopped. Apply your guard-error policy (on_guard_error).`,
        { details: { timeoutMs: err.timeoutMs }, retryAfterSeconds: GUARD_TIMEOUT_RETRY_AFTER_SECONDS, cause: err },
      );
    }
    // the decision and the text's length only: never the text, its redacted form or what matched
    this.#d.log.debug(
      { workspaceId: app.workspaceId, appId: app.appId, phase: req.phase, chars: req.text.length, decision: result.decision },
      "guard check",
    );
    return result;
  }
}
