// From LangChain messages to the trace's text and back (redaction), and what a response says
// about itself (tokens, model). The same functions serve invoke, stream and batch, so a call gives
// the same trace whichever way it was made.
import type { BaseLanguageModelInput } from "@langchain/core/language_models/base";
import type { AIMessage, AIMessageChunk, BaseMessage, MessageContent } from "@langchain/core/messages";
import { coerceMessageLikeToMessage, HumanMessage } from "@langchain/core/messages";
import type { GuardEngine } from "../engine.ts";
import type { Phase } from "../guards/types.ts";

/** The messages a chat model receives for an input (what BaseChatModel does with it). */
export function toMessages(input: BaseLanguageModelInput): BaseMessage[] {
  if (typeof input === "string") return [new HumanMessage(input)];
  if (Array.isArray(input)) return input.map(coerceMessageLikeToMessage);
  return input.toChatMessages();
}

interface TextBlock {
  type: "text";
  text: string;
}
const isTextBlock = (b: unknown): b is TextBlock =>
  typeof b === "object" && b !== null && (b as { type?: unknown }).type === "text" && typeof (b as { text?: unknown }).text === "string";

/** The text of a message's content: a string as is, the text blocks of a list concatenated. */
export function contentText(content: MessageContent): string {
  if (typeof content === "string") return content;
  let out = "";
  for (const b of content) if (isTextBlock(b)) out += b.text;
  return out;
}

const isSystem = (m: BaseMessage) => m.getType() === "system";

/**
 * The trace's `input` for a call: the text of every message but the system messages (the service's
 * own instructions), in order, separated by a blank line. A plain string prompt is itself.
 */
export function promptText(messages: readonly BaseMessage[]): string {
  const parts: string[] = [];
  for (const m of messages) {
    if (isSystem(m)) continue;
    const t = contentText(m.content);
    if (t !== "") parts.push(t);
  }
  return parts.join("\n\n");
}

interface ToolCallLike {
  name: string;
  args: Record<string, unknown>;
  id?: string | undefined;
}

/**
 * The trace's `output` for a response: its text, then (when it calls tools) the tool calls as JSON
 * `[{"name":...,"args":{...}}]`, separated by a blank line.
 */
export function outputText(message: BaseMessage): string {
  const text = contentText(message.content);
  const calls = (message as AIMessage).tool_calls ?? [];
  if (calls.length === 0) return text;
  const json = JSON.stringify(calls.map((c: ToolCallLike) => ({ name: c.name, args: c.args })));
  return text === "" ? json : `${text}\n\n${json}`;
}

/** A copy of a message (same class, same fields) with other content and fields. */
export function cloneMessage<M extends BaseMessage>(message: M, fields: { content?: MessageContent } & Record<string, unknown>): M {
  const clone = Object.assign(Object.create(Object.getPrototypeOf(message) as object) as M, message, fields);
  clone.lc_kwargs = { ...message.lc_kwargs, ...fields };
  return clone;
}

/** The content with each text redacted by the guards of `phase`; undefined when nothing changed. */
function redactContent(content: MessageContent, engine: GuardEngine, phase: Phase): MessageContent | undefined {
  if (typeof content === "string") return engine.evaluate(content, phase).redactedText;
  let changed = false;
  const out = content.map((b) => {
    if (!isTextBlock(b)) return b;
    const r = engine.evaluate(b.text, phase).redactedText;
    if (r === undefined) return b;
    changed = true;
    return { ...b, text: r };
  });
  return changed ? out : undefined;
}

/** The messages with the text of each non-system message redacted by the input guards. */
export function redactMessages(messages: readonly BaseMessage[], engine: GuardEngine): BaseMessage[] {
  return messages.map((m) => {
    if (isSystem(m)) return m;
    const content = redactContent(m.content, engine, "input");
    return content === undefined ? m : cloneMessage(m, { content });
  });
}

/** Every string in a JSON value, redacted by the output guards. */
function redactValue(value: unknown, engine: GuardEngine): unknown {
  if (typeof value === "string") return engine.evaluate(value, "output").redactedText ?? value;
  if (Array.isArray(value)) return value.map((v) => redactValue(v, engine));
  if (typeof value === "object" && value !== null)
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, redactValue(v, engine)]));
  return value;
}

/**
 * The response as the caller receives it when the output guards redact: its text redacted, and
 * the string arguments of its tool calls. `whole` is the redacted text when the decision was taken
 * on the text alone (no tool calls), which saves evaluating it again.
 */
export function redactOutput<M extends BaseMessage>(message: M, engine: GuardEngine, whole?: string): M {
  const ai = message as unknown as AIMessageChunk;
  const calls = ai.tool_calls ?? [];
  const fields: { content?: MessageContent } & Record<string, unknown> = {};
  const content =
    calls.length === 0 && whole !== undefined && typeof message.content === "string"
      ? whole
      : redactContent(message.content, engine, "output");
  if (content !== undefined) fields.content = content;
  if (calls.length > 0) {
    const redacted = calls.map((c) => ({ ...c, args: redactValue(c.args, engine) as Record<string, unknown> }));
    fields.tool_calls = redacted;
    if (ai.tool_call_chunks?.length) {
      fields.tool_call_chunks = ai.tool_call_chunks.map((tc, i) => {
        const call = redacted.find((c) => c.id !== undefined && c.id === tc.id) ?? redacted[i];
        return call ? { ...tc, args: JSON.stringify(call.args) } : tc;
      });
    }
  }
  return cloneMessage(message, fields);
}

export interface Tokens {
  prompt: number;
  completion: number;
  total: number;
}

const int = (v: unknown): number | undefined => (typeof v === "number" && Number.isFinite(v) && v >= 0 ? Math.round(v) : undefined);

/**
 * Token usage of a response: usage_metadata (LangChain's standard field, also summed over stream
 * chunks), else what the provider put in response_metadata (tokenUsage, usage); zeros when the
 * provider reports nothing.
 */
export function tokensOf(message: BaseMessage | undefined): Tokens {
  if (!message) return { prompt: 0, completion: 0, total: 0 };
  const u = (message as AIMessage).usage_metadata;
  if (u && (int(u.input_tokens) !== undefined || int(u.output_tokens) !== undefined)) {
    const prompt = int(u.input_tokens) ?? 0;
    const completion = int(u.output_tokens) ?? 0;
    return { prompt, completion, total: int(u.total_tokens) ?? prompt + completion };
  }
  const meta = (message.response_metadata ?? {}) as Record<string, unknown>;
  for (const key of ["tokenUsage", "usage", "token_usage"]) {
    const r = meta[key] as Record<string, unknown> | undefined;
    if (!r || typeof r !== "object") continue;
    const prompt = int(r.promptTokens) ?? int(r.prompt_tokens) ?? int(r.input_tokens);
    const completion = int(r.completionTokens) ?? int(r.completion_tokens) ?? int(r.output_tokens);
    if (prompt === undefined && completion === undefined) continue;
    const total = int(r.totalTokens) ?? int(r.total_tokens);
    return { prompt: prompt ?? 0, completion: completion ?? 0, total: total ?? (prompt ?? 0) + (completion ?? 0) };
  }
  return { prompt: 0, completion: 0, total: 0 };
}

/**
 * The model name recorded on a trace: the model the service configured (`model` or `modelName`
 * of the chat model), else the one the response names, else the chat model's type. The configured
 * name comes first so that a blocked call (no response) and an answered one are recorded alike.
 */
export function modelNameOf(model: object, response?: BaseMessage): string {
  const m = model as { model?: unknown; modelName?: unknown; _llmType?: () => string; getName?: () => string };
  for (const v of [m.model, m.modelName]) if (typeof v === "string" && v.trim() !== "") return v;
  const meta = (response?.response_metadata ?? {}) as Record<string, unknown>;
  for (const v of [meta.model_name, meta.model]) if (typeof v === "string" && v.trim() !== "") return v;
  try {
    const t = m._llmType?.();
    if (typeof t === "string" && t !== "") return t;
  } catch {
    // a model without a type
  }
  return m.getName?.() ?? "unknown";
}
