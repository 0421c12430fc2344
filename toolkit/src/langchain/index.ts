// The zero-config path (docs/spec.md part 1, client path 1): withGovernance(model) returns the chat model
// with the app's guards before and after every call and one trace per call, submitted through the
// same queue as the plain path (so both paths give the same traces, evals and guard blocks).
//
// The wrapper is a Proxy of the model, so that it stays that model in every other way (class,
// fields, callbacks, bindTools, withStructuredOutput, withConfig, pipe...). It intercepts the three
// places every call goes through:
// - invoke (batch calls invoke once per input),
// - _streamIterator (stream, transform, streamEvents v1/v2 and chains all end there),
// - _streamChatModelEvents (the event protocol of streamEvents() without a version).
// Other methods run on the proxy, so what they build around `this` (a RunnableBinding from
// withConfig or bindTools, the pipeline of withStructuredOutput) calls back into the proxy; a
// method that builds a new model instead (bindTools of some models) has its result governed too.
// The intercepted methods call the real model with itself as `this`, so nothing is counted twice.
import type { BaseLanguageModelInput } from "@langchain/core/language_models/base";
import { BaseChatModel } from "@langchain/core/language_models/chat_models";
import type { AIMessageChunk, BaseMessage } from "@langchain/core/messages";
import { ChatGenerationChunk } from "@langchain/core/outputs";
import { RunnableBinding } from "@langchain/core/runnables";
import { randomUUID } from "node:crypto";
import type { GuardDecision, GuardEngine, HeadScores } from "../engine.ts";
import { scoreWithClassifier } from "../engine.ts";
import { defaultClassifierDir, sharedInjectionClassifier, type ScoreFloors } from "../guards/classifier/index.ts";
import { GuardBlockedError, GuardUnavailableError } from "../client/errors.ts";
import type { Governance } from "../client/governance.ts";
import { governance as processGovernance } from "../client/index.ts";
import type { Trace } from "../client/trace.ts";
import {
  cloneMessage,
  contentText,
  modelNameOf,
  outputText,
  promptText,
  redactMessages,
  redactOutput,
  toMessages,
  tokensOf,
} from "./messages.ts";
import type { Tokens } from "./messages.ts";
import type { StreamGuardOptions } from "./stream-guard.ts";
import { StreamGuard } from "./stream-guard.ts";

export interface WithGovernanceOptions {
  /** default: the process's Governance, configured from GOVDB_CONNECTION and GOVERNANCE_PROJECT on first use */
  governance?: Governance;
  /** the `project` of the traces; default the Governance's (GOVERNANCE_PROJECT) */
  project?: string;
  /** the model name on the traces; default the model's `model` / `modelName` (see modelNameOf) */
  modelName?: string;
  /** the sessionId of the traces; a call's `metadata.sessionId` (or `metadata.session_id`) wins */
  sessionId?: string;
  /** output guards on streams (docs/toolkit.md, "Streams") */
  stream?: StreamGuardOptions;
}

const GOVERNED = Symbol.for("berth.governed");
/** Methods whose result may be a new model (or a binding of one) that must be governed too. */
const DERIVING = new Set<PropertyKey>([
  "bindTools",
  "withConfig",
  "withStructuredOutput",
  "bind",
  "withRetry",
  "withFallbacks",
  "withListeners",
]);

interface Context {
  opts: WithGovernanceOptions;
  governance: Governance;
  proxies: WeakMap<object, object>;
}

/** True for a model (or a binding) returned by withGovernance. */
export function isGoverned(value: unknown): boolean {
  return typeof value === "object" && value !== null && (value as Record<symbol, unknown>)[GOVERNED] !== undefined;
}

/**
 * The chat model with Berth governance: input guards before each call (a block throws
 * GuardBlockedError without calling the model; a redaction sends the redacted prompt), output
 * guards on the response (block: GuardBlockedError; redact: the caller receives the redacted
 * text), and one trace per call. Reads GOVDB_CONNECTION and GOVERNANCE_PROJECT (throws
 * GovdbConnectionError when missing or malformed, unless BERTH_GOVERNANCE=off).
 */
export function withGovernance<T extends BaseChatModel>(model: T, opts: WithGovernanceOptions = {}): T {
  if (isGoverned(model)) return model;
  const ctx: Context = { opts, governance: opts.governance ?? processGovernance(), proxies: new WeakMap() };
  return govern(model, ctx);
}

function govern<T extends object>(value: T, ctx: Context): T {
  if (isGoverned(value)) return value;
  const known = ctx.proxies.get(value);
  if (known) return known as T;
  let proxy: T;
  if (value instanceof BaseChatModel) proxy = governModel(value, ctx) as T;
  else if (value instanceof RunnableBinding && bindsModel(value)) proxy = governBinding(value, ctx) as T;
  else return value;
  ctx.proxies.set(value, proxy);
  return proxy;
}

/** The result of a deriving method, governed when it is (or binds) a model. */
function adopt(result: unknown, ctx: Context): unknown {
  if (result instanceof Promise) return result.then((r) => adopt(r, ctx));
  if (result instanceof BaseChatModel || (result instanceof RunnableBinding && bindsModel(result))) return govern(result, ctx);
  return result;
}

function bindsModel(binding: { bound: unknown }): boolean {
  const bound = binding.bound;
  return bound instanceof BaseChatModel || (bound instanceof RunnableBinding && bindsModel(bound));
}

function governBinding(binding: RunnableBinding<unknown, unknown>, ctx: Context): RunnableBinding<unknown, unknown> {
  let bound: unknown;
  return new Proxy(binding, {
    get(target, prop, receiver) {
      if (prop === GOVERNED) return ctx;
      if (prop === "bound") return (bound ??= govern(target.bound, ctx));
      const v = Reflect.get(target, prop, receiver) as unknown;
      if (typeof v === "function" && DERIVING.has(prop)) {
        return function (this: unknown, ...args: unknown[]) {
          return adopt((v as (...a: unknown[]) => unknown).apply(this, args), ctx);
        };
      }
      return v;
    },
  });
}

function governModel(model: BaseChatModel, ctx: Context): BaseChatModel {
  const call = new GovernedCall(model, ctx);
  const invoke = (input: BaseLanguageModelInput, options?: Record<string, unknown>) => call.invoke(input, options);
  const streamIterator = (input: BaseLanguageModelInput, options?: Record<string, unknown>) => call.stream(input, options);
  const streamEvents = (messages: BaseMessage[], options: Record<string, unknown>, runManager?: unknown) =>
    call.streamEvents(messages, options, runManager);
  const deriving = new Map<PropertyKey, unknown>();
  return new Proxy(model, {
    get(target, prop, receiver) {
      switch (prop) {
        case GOVERNED:
          return ctx;
        case "invoke":
          return invoke;
        case "_streamIterator":
          return streamIterator;
        case "_streamChatModelEvents":
          return streamEvents;
      }
      const v = Reflect.get(target, prop, receiver) as unknown;
      if (typeof v !== "function" || !DERIVING.has(prop)) return v;
      let w = deriving.get(prop);
      if (!w) {
        w = function (this: unknown, ...args: unknown[]) {
          return adopt((v as (...a: unknown[]) => unknown).apply(this, args), ctx);
        };
        deriving.set(prop, w);
      }
      return w;
    },
  });
}

interface CallState {
  traceId: string;
  startedAt: Date;
  input: string;
  engine: GuardEngine;
  sent: BaseLanguageModelInput;
  /** the classifier's scores of the input that had a say: sent with the trace */
  classifierScores?: HeadScores;
  /** why the classifier could not score the input (the API did not answer; onGuardError "allow") */
  unavailable?: string;
}

/** The guarded, traced calls of one model. */
class GovernedCall {
  readonly #model: BaseChatModel;
  readonly #ctx: Context;

  constructor(model: BaseChatModel, ctx: Context) {
    this.#model = model;
    this.#ctx = ctx;
  }

  get #g(): Governance {
    return this.#ctx.governance;
  }

  /** Input guards; throws GuardBlockedError (after recording the trace) when they block. */
  async #before(input: BaseLanguageModelInput, options: Record<string, unknown> | undefined): Promise<CallState | undefined> {
    if (this.#g.mode === "noop") return undefined;
    // rejects only under requireConfig, when the config could not be loaded: the call fails closed
    await this.#g.start();
    const engine = this.#g.engine;
    if (!engine) throw new Error("berth governance: no guard engine after start()");
    const messages = typeof input === "string" ? undefined : toMessages(input);
    const text = messages ? promptText(messages) : (input as string);
    const state: CallState = { traceId: randomUUID(), startedAt: new Date(), input: text, engine, sent: input };
    const { decision, scores } = await scoreWithClassifier(engine, text, "input", (t, floors) =>
      this.#classifierScore(t, floors, state, options),
    );
    if (scores !== undefined) state.classifierScores = scores;
    if (decision.decision === "block") {
      this.#submit(state, options, { output: "", latency: 0, tokens: { prompt: 0, completion: 0, total: 0 } });
      throw new GuardBlockedError("input", decision, state.traceId);
    }
    if (decision.decision === "redact") state.sent = messages ? redactMessages(messages, engine) : (decision.redactedText ?? input);
    return state;
  }

  /**
   * The classifier (guards.prompt_injection.classifier, on by default, and toxicity templates with
   * classifier) on a prompt the patterns let pass: this process's model when the service has its
   * files (BERTH_GUARD_MODEL_DIR: a model that cannot load fails the call), else the API's through
   * the guard check, where onGuardError decides when the API does not answer ("allow": no score,
   * the trace marked; "block": the call refused and recorded). The scores go with the trace, so
   * ingestion records this very decision.
   */
  async #classifierScore(
    text: string,
    floors: ScoreFloors | undefined,
    state: CallState,
    options: Record<string, unknown> | undefined,
  ): Promise<number | HeadScores | undefined> {
    if (defaultClassifierDir() !== undefined) return (await sharedInjectionClassifier()).scores(text, floors);
    try {
      const remote = await this.#g.classifierScore(text);
      state.unavailable = remote.unavailable;
      return remote.score;
    } catch (err) {
      if (err instanceof GuardUnavailableError) {
        this.#submit(state, options, { output: "", latency: 0, tokens: { prompt: 0, completion: 0, total: 0 }, error: err.message });
        err.traceId = state.traceId;
      }
      throw err;
    }
  }

  #submit(
    state: CallState,
    options: Record<string, unknown> | undefined,
    rest: { output: string; latency: number; tokens: Tokens; response?: BaseMessage; error?: string },
  ): void {
    const metadata = options?.metadata as Record<string, unknown> | undefined;
    const session = metadata?.sessionId ?? metadata?.session_id ?? this.#ctx.opts.sessionId;
    const trace: Trace = {
      traceId: state.traceId,
      input: state.input,
      output: rest.output,
      model: this.#ctx.opts.modelName ?? modelNameOf(this.#model, rest.response),
      latency: Math.round(rest.latency * 1000) / 1000,
      tokens: rest.tokens,
      timestamp: state.startedAt,
    };
    if (typeof session === "string" && session !== "") trace.sessionId = session;
    const scores = state.classifierScores;
    if (scores !== undefined)
      trace.classifierScores = {
        ...(scores.promptInjection === undefined ? {} : { promptInjection: scores.promptInjection }),
        ...(scores.toxicity === undefined ? {} : { toxicity: scores.toxicity }),
      };
    // as the Python toolkit marks a call whose guards could not run (on_guard_error "allow")
    if (state.unavailable !== undefined) trace.metadata = { "berth.guards": "unavailable", "berth.guards_unavailable": "input" };
    if (rest.error !== undefined) trace.error = rest.error;
    const project = this.#ctx.opts.project;
    this.#g.submit(trace, project !== undefined ? { project } : {});
  }

  /** Output guards on a complete response: the decision, with the trace recorded. */
  #after(state: CallState, options: Record<string, unknown> | undefined, response: BaseMessage, latency: number): GuardDecision {
    const output = outputText(response);
    this.#submit(state, options, { output, latency, tokens: tokensOf(response), response });
    return state.engine.evaluate(output, "output");
  }

  async invoke(input: BaseLanguageModelInput, options?: Record<string, unknown>): Promise<AIMessageChunk> {
    const state = await this.#before(input, options);
    if (!state) return this.#model.invoke(input, options);
    const t0 = performance.now();
    let response: AIMessageChunk;
    try {
      response = await this.#model.invoke(state.sent, options);
    } catch (err) {
      this.#submit(state, options, {
        output: "",
        latency: performance.now() - t0,
        tokens: { prompt: 0, completion: 0, total: 0 },
        error: errorText(err),
      });
      throw err;
    }
    const latency = performance.now() - t0;
    const decision = this.#after(state, options, response, latency);
    if (decision.decision === "block") throw new GuardBlockedError("output", decision, state.traceId);
    if (decision.decision === "redact") return redactOutput(response, state.engine, decision.redactedText);
    return response;
  }

  async *stream(input: BaseLanguageModelInput, options?: Record<string, unknown>): AsyncGenerator<AIMessageChunk> {
    const state = await this.#before(input, options);
    if (!state) {
      yield* this.#model._streamIterator(input, options);
      return;
    }
    yield* this.#guardedChunks(
      state,
      options,
      this.#model._streamIterator(state.sent, options),
      (c) => c,
      (c) => c,
    );
  }

  /**
   * The event protocol of streamEvents() without a version: the same guarded chunks, turned into
   * events by BaseChatModel's own bridge from chunks to events.
   */
  async *streamEvents(messages: BaseMessage[], options: Record<string, unknown>, runManager?: unknown): AsyncGenerator<unknown> {
    const model = this.#model as unknown as {
      _streamResponseChunks(m: BaseMessage[], o: unknown, r?: unknown): AsyncGenerator<ChatGenerationChunk>;
      _streamChatModelEvents(m: BaseMessage[], o: unknown, r?: unknown): AsyncGenerator<unknown>;
    };
    const state = await this.#before(messages, options);
    if (!state) {
      yield* model._streamChatModelEvents(messages, options, runManager);
      return;
    }
    const sent = toMessages(state.sent);
    const chunks = this.#guardedChunks(
      state,
      options,
      model._streamResponseChunks(sent, options, runManager),
      (c: ChatGenerationChunk) => c.message as AIMessageChunk,
      (m: AIMessageChunk) => new ChatGenerationChunk({ message: m, text: typeof m.content === "string" ? m.content : "" }),
    );
    const bridge = BaseChatModel.prototype as unknown as {
      _streamChatModelEvents(this: unknown, m: BaseMessage[], o: unknown, r?: unknown): AsyncGenerator<unknown>;
    };
    yield* bridge._streamChatModelEvents.call({ _streamResponseChunks: () => chunks }, sent, options, runManager);
  }

  /** Streams `source` through the output guards (stream-guard.ts), recording one trace. */
  async *#guardedChunks<C>(
    state: CallState,
    options: Record<string, unknown> | undefined,
    source: AsyncIterable<C>,
    toMessage: (c: C) => AIMessageChunk,
    fromMessage: (m: AIMessageChunk) => C,
  ): AsyncGenerator<C> {
    const guard = new StreamGuard(state.engine, this.#ctx.opts.stream);
    const held: C[] = [];
    let full: AIMessageChunk | undefined;
    let recorded = false;
    const record = (error?: string) => {
      if (recorded) return;
      recorded = true;
      this.#submit(state, options, {
        output: full ? outputText(full) : "",
        latency: performance.now() - t0,
        tokens: tokensOf(full),
        ...(full ? { response: full } : {}),
        ...(error !== undefined ? { error } : {}),
      });
    };
    const emit = function* (release: { count: number; text?: string } | undefined): Generator<C> {
      if (!release) return;
      const out = held.splice(0, release.count);
      if (release.text === undefined) {
        yield* out;
        return;
      }
      const merged = out.map(toMessage).reduce((a, b) => concatChunks(a, b));
      yield fromMessage(redactText(merged, release.text));
    };
    const t0 = performance.now();
    try {
      for await (const chunk of source) {
        const message = toMessage(chunk);
        full = full ? concatChunks(full, message) : message;
        held.push(chunk);
        const calls = (message as { tool_call_chunks?: unknown[] }).tool_call_chunks;
        const step = guard.push(contentText(message.content), calls !== undefined && calls.length > 0);
        if (step.kind === "block") {
          record();
          throw new GuardBlockedError("output", step.decision, state.traceId);
        }
        yield* emit(step.release);
      }
    } catch (err) {
      if (!(err instanceof GuardBlockedError)) record(errorText(err));
      throw err;
    } finally {
      // the end of the answer, or the consumer stopped early: record what came
      record();
    }
    const decision = state.engine.evaluate(full ? outputText(full) : "", "output");
    const end = guard.finish(decision);
    if (end.kind === "block") throw new GuardBlockedError("output", end.decision, state.traceId);
    if (end.release && held.length > 0) {
      const hasCalls = full !== undefined && (full.tool_calls?.length ?? 0) > 0;
      if (decision.decision === "redact" && hasCalls) {
        // tool-call chunks were held to the end: their arguments go out redacted, merged
        const merged = held
          .splice(0)
          .map(toMessage)
          .reduce((a, b) => concatChunks(a, b));
        const redacted = redactOutput(merged, state.engine);
        yield fromMessage(end.release.text === undefined ? redacted : redactText(redacted, end.release.text));
      } else {
        yield* emit(end.release);
      }
    }
  }
}

function concatChunks(a: AIMessageChunk, b: AIMessageChunk): AIMessageChunk {
  // a model without streaming yields one complete AIMessage, which has no concat
  return typeof a.concat === "function" ? a.concat(b) : b;
}

/** The chunk with this text as its only text content (tool calls and metadata kept). */
function redactText(m: AIMessageChunk, text: string): AIMessageChunk {
  if (typeof m.content === "string") return cloneMessage(m, { content: text });
  const others = m.content.filter((b) => !(typeof b === "object" && b !== null && b.type === "text"));
  return cloneMessage(m, { content: others.length === 0 ? text : [{ type: "text", text }, ...others] });
}

function errorText(err: unknown): string {
  const text = err instanceof Error ? `${err.name}: ${err.message}` : String(err);
  return text.toWellFormed().replaceAll("\u0000", "");
}

export { GuardBlockedError } from "../client/errors.ts";
export { GovernanceCallbackHandler } from "./callback.ts";
export type { GovernanceCallbackOptions } from "./callback.ts";
export { StreamGuard, streamStrategy } from "./stream-guard.ts";
export type { Release, StepResult, StreamGuardOptions, StreamStrategy } from "./stream-guard.ts";
export { contentText, modelNameOf, outputText, promptText, tokensOf } from "./messages.ts";
