// The trace object a client submits after each LLM call (SPEC.md part 1), and its wire form.
import { randomUUID } from "node:crypto";

/** Token counts of one call. `total` defaults to prompt + completion. */
export interface TraceTokens {
  prompt: number;
  completion: number;
  total?: number;
}

/** What a client submits after each LLM call (SPEC.md part 1). */
export interface Trace {
  /** client-generated unique id (UUID form); generated when absent. Retries reuse it (idempotent). */
  traceId?: string;
  /** the prompt text */
  input: string;
  /** the model's response text ("" when the call was blocked before the model ran) */
  output: string;
  /** the model name */
  model: string;
  /** milliseconds */
  latency: number;
  tokens: TraceTokens;
  /** time of the call; default now */
  timestamp?: Date | string;
  /** groups the traces of one conversation (the trace list's session_id filter) */
  sessionId?: string;
  /** set when the call failed (counts towards the error rate); at most 10,000 characters */
  error?: string;
  /** a small flat object: up to 32 keys, values string (up to 1,000 characters), number, boolean or null */
  metadata?: Record<string, string | number | boolean | null>;
}

/** The trace as sent to the API: every default applied. */
export interface TraceRecord {
  traceId: string;
  input: string;
  output: string;
  model: string;
  latency: number;
  tokens: { prompt: number; completion: number; total: number };
  timestamp: string;
  sessionId?: string;
  error?: string;
  metadata?: Record<string, string | number | boolean | null>;
  project?: string;
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** Why a trace cannot be sent (one message per problem), or [] when it can. */
export function traceProblems(trace: Trace): string[] {
  const problems: string[] = [];
  const t = trace as Partial<Record<keyof Trace, unknown>>;
  if (typeof t !== "object" || t === null) return ["the trace is not an object"];
  if (t.traceId !== undefined && (typeof t.traceId !== "string" || !UUID.test(t.traceId))) problems.push("traceId must be a UUID");
  if (typeof t.input !== "string") problems.push("input must be a string");
  if (typeof t.output !== "string") problems.push("output must be a string");
  if (typeof t.model !== "string" || t.model === "") problems.push("model must be a non-empty string");
  if (typeof t.latency !== "number" || !Number.isFinite(t.latency) || t.latency < 0) problems.push("latency must be a number of milliseconds >= 0");
  const tokens = t.tokens as Partial<Record<keyof TraceTokens, unknown>> | undefined;
  if (typeof tokens !== "object" || tokens === null) problems.push("tokens must be { prompt, completion, total }");
  else {
    for (const k of ["prompt", "completion", "total"] as const) {
      const v = tokens[k];
      if (v === undefined && k === "total") continue;
      if (typeof v !== "number" || !Number.isInteger(v) || v < 0) problems.push(`tokens.${k} must be an integer >= 0`);
    }
  }
  if (t.timestamp !== undefined) {
    const ms = t.timestamp instanceof Date ? t.timestamp.getTime() : typeof t.timestamp === "string" ? Date.parse(t.timestamp) : NaN;
    if (Number.isNaN(ms)) problems.push("timestamp must be a Date or an ISO 8601 string");
  }
  if (t.sessionId !== undefined && typeof t.sessionId !== "string") problems.push("sessionId must be a string");
  if (t.error !== undefined && typeof t.error !== "string") problems.push("error must be a string");
  if (t.metadata !== undefined && (typeof t.metadata !== "object" || t.metadata === null || Array.isArray(t.metadata))) problems.push("metadata must be an object");
  return problems;
}

/** Applies the defaults (traceId, timestamp = now, tokens.total) and the project tag. */
export function toRecord(trace: Trace, project: string | undefined, now: () => number = Date.now): TraceRecord {
  const prompt = trace.tokens.prompt;
  const completion = trace.tokens.completion;
  const record: TraceRecord = {
    traceId: trace.traceId ?? randomUUID(),
    input: trace.input,
    output: trace.output,
    model: trace.model,
    latency: trace.latency,
    tokens: { prompt, completion, total: trace.tokens.total ?? prompt + completion },
    timestamp: trace.timestamp === undefined ? new Date(now()).toISOString() : new Date(trace.timestamp).toISOString(),
  };
  if (trace.sessionId !== undefined) record.sessionId = trace.sessionId;
  if (trace.error !== undefined) record.error = trace.error.length > 10_000 ? trace.error.slice(0, 9_999) + "…" : trace.error;
  if (trace.metadata !== undefined) record.metadata = trace.metadata;
  if (project !== undefined) record.project = project;
  return record;
}
