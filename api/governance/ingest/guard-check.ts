// Guard checks (POST /governance/guard-check, auth "app-key"): the decision of an app's guards on
// one text, for a toolkit that does not carry the guard engine (the Python one) and asks the API in
// its service's request path instead. The verdicts are the engine's by construction: the same
// config as ingestion and GET /governance/config (app-scope.ts: the version the key check read),
// the same compiled engines and classifier in the same scoring threads (scoring.ts checkText).
//
// The key decides the app: its config version comes from the key check, and its engine input is
// read for the key's own workspace and app; a `project` in the body can only be refused. Nothing
// is stored, and the text is never logged (a prompt may hold anything).
import type { AppPrincipal } from "../../http/route.ts";
import type { Logger } from "../../../kube/logger.ts";
import type { GuardCheckRequest } from "../schemas.ts";
import { activeStore, assertKeyProject, type EngineInputs } from "./app-scope.ts";
import type { GuardCheckResult, Scorer } from "./scoring.ts";

export interface GuardCheckDeps {
  /** shared with ingestion: one read and one compile per config version for both */
  engines: EngineInputs;
  scorer: Scorer;
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
    const result = await this.#d.scorer.check(version, await this.#d.engines.of(app, version), req.text, req.phase);
    // the decision and the text's length only: never the text, its redacted form or what matched
    this.#d.log.debug(
      { workspaceId: app.workspaceId, appId: app.appId, phase: req.phase, chars: req.text.length, decision: result.decision },
      "guard check",
    );
    return result;
  }
}
