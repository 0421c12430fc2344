// A LangChain.js callback handler for those who prefer callbacks to the wrapper (as Langfuse offers
// one): one trace per chat model or LLM run, submitted through the same queue as the other paths.
// It observes only: the API still runs the app's guards and evals on the traces it receives, but
// nothing is blocked or redacted before the model, which only withGovernance can do.
import { BaseCallbackHandler } from "@langchain/core/callbacks/base";
import type { Serialized } from "@langchain/core/load/serializable";
import type { BaseMessage } from "@langchain/core/messages";
import type { LLMResult } from "@langchain/core/outputs";
import type { Governance } from "../client/governance.ts";
import { governance as processGovernance } from "../client/index.ts";
import type { Trace } from "../client/trace.ts";
import { contentText, promptText, tokensOf } from "./messages.ts";
import type { Tokens } from "./messages.ts";

export interface GovernanceCallbackOptions {
  /** default: the process's Governance, configured from GOVDB_CONNECTION and GOVERNANCE_PROJECT on first use */
  governance?: Governance;
  /** the `project` of the traces; default the Governance's (GOVERNANCE_PROJECT) */
  project?: string;
  /** the model name on the traces; default the run's `ls_model_name` metadata or invocation params (`model`, `modelName`), else the model's class */
  modelName?: string;
  /** the sessionId of the traces; a run's `metadata.sessionId` (or `metadata.session_id`) wins */
  sessionId?: string;
}

interface Run {
  input: string;
  model: string;
  startedAt: Date;
  started: number;
  sessionId?: string;
}

/** Runs whose end never comes (a crashed callback manager) are forgotten past this many. */
const MAX_OPEN_RUNS = 10_000;

/**
 * Records every chat model and LLM run it is given as a trace (its run id as the trace id, so a
 * retried delivery is one trace): `callbacks: [new GovernanceCallbackHandler()]` on a model, a
 * chain or a single call.
 */
export class GovernanceCallbackHandler extends BaseCallbackHandler {
  name = "berth_governance";
  // LangChain awaits it before the call returns, so that a trace is queued (and flush() sees it) by then.
  override awaitHandlers = true;
  readonly #opts: GovernanceCallbackOptions;
  readonly #runs = new Map<string, Run>();
  #governance: Governance | undefined;

  constructor(opts: GovernanceCallbackOptions = {}) {
    super();
    this.#opts = opts;
    this.#governance = opts.governance;
  }

  override handleChatModelStart(
    llm: Serialized,
    messages: BaseMessage[][],
    runId: string,
    _parentRunId?: string,
    extraParams?: Record<string, unknown>,
    _tags?: string[],
    metadata?: Record<string, unknown>,
  ): void {
    this.#start(runId, promptText(messages[0] ?? []), llm, extraParams, metadata);
  }

  override handleLLMStart(
    llm: Serialized,
    prompts: string[],
    runId: string,
    _parentRunId?: string,
    extraParams?: Record<string, unknown>,
    _tags?: string[],
    metadata?: Record<string, unknown>,
  ): void {
    this.#start(runId, prompts.join("\n\n"), llm, extraParams, metadata);
  }

  override async handleLLMEnd(output: LLMResult, runId: string): Promise<void> {
    const run = this.#take(runId);
    if (!run) return;
    const first = output.generations[0]?.[0] as { text?: string; message?: BaseMessage } | undefined;
    const message = first?.message;
    const text = message ? contentText(message.content) : (first?.text ?? "");
    await this.#submit(runId, run, { output: text, tokens: message ? tokensOf(message) : usageOf(output) });
  }

  override async handleLLMError(err: Error, runId: string): Promise<void> {
    const run = this.#take(runId);
    if (!run) return;
    await this.#submit(runId, run, { output: "", tokens: { prompt: 0, completion: 0, total: 0 }, error: err?.message || String(err) });
  }

  #start(runId: string, input: string, llm: Serialized, extraParams?: Record<string, unknown>, metadata?: Record<string, unknown>): void {
    if (this.#runs.size >= MAX_OPEN_RUNS) this.#runs.delete(this.#runs.keys().next().value!);
    const params = extraParams?.invocation_params as Record<string, unknown> | undefined;
    const named = [metadata?.ls_model_name, params?.model, params?.modelName, params?.model_name].find(
      (v) => typeof v === "string" && v !== "",
    ) as string | undefined;
    const session = metadata?.sessionId ?? metadata?.session_id ?? this.#opts.sessionId;
    this.#runs.set(runId, {
      input,
      model: this.#opts.modelName ?? named ?? llm.id?.at(-1) ?? "unknown",
      startedAt: new Date(),
      started: performance.now(),
      ...(typeof session === "string" && session !== "" ? { sessionId: session } : {}),
    });
  }

  #take(runId: string): Run | undefined {
    const run = this.#runs.get(runId);
    this.#runs.delete(runId);
    return run;
  }

  async #submit(runId: string, run: Run, rest: { output: string; tokens: Tokens; error?: string }): Promise<void> {
    const trace: Trace = {
      traceId: runId,
      input: run.input,
      output: rest.output,
      model: run.model,
      latency: Math.round((performance.now() - run.started) * 1000) / 1000,
      tokens: rest.tokens,
      timestamp: run.startedAt,
    };
    if (run.sessionId !== undefined) trace.sessionId = run.sessionId;
    if (rest.error !== undefined) trace.error = rest.error;
    this.#governance ??= processGovernance();
    // the app's project comes with its config (start() fetches it once; a failure leaves the defaults)
    await this.#governance.start().catch(() => undefined);
    const project = this.#opts.project;
    this.#governance.submit(trace, project !== undefined ? { project } : {});
  }
}

/** Token counts an LLM (not chat) run reports in llmOutput.tokenUsage, when it does. */
function usageOf(output: LLMResult): Tokens {
  const u = (output.llmOutput?.tokenUsage ?? {}) as { promptTokens?: number; completionTokens?: number; totalTokens?: number };
  const prompt = Number.isFinite(u.promptTokens) ? u.promptTokens! : 0;
  const completion = Number.isFinite(u.completionTokens) ? u.completionTokens! : 0;
  return { prompt, completion, total: Number.isFinite(u.totalTokens) ? u.totalTokens! : prompt + completion };
}
