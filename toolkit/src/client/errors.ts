// The toolkit's typed errors. None of them ever carries the key of GOVDB_CONNECTION.
import type { GuardBlock, GuardDecision } from "../engine.ts";
import type { Phase } from "../guards/types.ts";

/** GOVDB_CONNECTION is missing or is not `govdb://<key>@<host>/<database>`. */
export class GovdbConnectionError extends Error {
  override readonly name = "GovdbConnectionError";
  /** "missing" when the variable is not set, "malformed" when it cannot be parsed */
  readonly reason: "missing" | "malformed";

  constructor(reason: "missing" | "malformed", message: string) {
    super(message);
    this.reason = reason;
  }
}

/** `configure({ requireConfig: true })` could not fetch the app's guards and evals configuration. */
export class GovernanceConfigError extends Error {
  override readonly name = "GovernanceConfigError";
  /** the HTTP status when the API answered, else undefined (network error, timeout) */
  readonly status: number | undefined;

  constructor(message: string, status?: number, options?: ErrorOptions) {
    super(message, options);
    this.status = status;
  }
}

/**
 * A guard blocked an LLM call: before the call (phase "input": the model was not called) or on its
 * response (phase "output"). `blocks` are the guard block records; `guards` names the guards.
 */
export class GuardBlockedError extends Error {
  override readonly name = "GuardBlockedError";
  readonly phase: Phase;
  /** the guard block records of the decision (action "block" and "redact") */
  readonly blocks: readonly GuardBlock[];
  /** the sources of the blocking guards: "prompt_injection", "sensitive_data", "template:<id>" */
  readonly guards: readonly string[];
  /** the id of the trace recorded for the call */
  readonly traceId: string;

  constructor(phase: Phase, decision: Pick<GuardDecision, "blocks">, traceId: string) {
    const blocking = decision.blocks.filter((b) => b.action === "block");
    const names = [...new Set(blocking.map((b) => b.source))];
    const what = blocking.map((b) => `${b.source} (${b.guardType}): ${b.blockedContent}`).join("; ");
    super(`${phase === "input" ? "prompt" : "response"} blocked by ${names.join(", ")}: ${what}`);
    this.phase = phase;
    this.blocks = decision.blocks;
    this.guards = names;
    this.traceId = traceId;
  }
}

/**
 * A guard a call needs could not run and `onGuardError` is "block": the call fails closed. Today
 * that is the prompt-injection classifier's score, which a service without the classifier's files
 * asks the API for (the guard check): the API did not answer it. The model was not called.
 */
export class GuardUnavailableError extends Error {
  override readonly name = "GuardUnavailableError";
  readonly phase: Phase;
  /** why: "the guard check failed: network error: ECONNREFUSED", "… HTTP 503 guard_timeout: …" */
  readonly reason: string;
  /** the id of the trace recorded for the call (set by the LangChain wrapper) */
  traceId: string | undefined;

  constructor(phase: Phase, reason: string, options?: ErrorOptions) {
    super(`the ${phase} guards could not run (${reason}); the call is refused (onGuardError "block")`, options);
    this.phase = phase;
    this.reason = reason;
  }
}
