// The trace object a client submits after each LLM call (docs/spec.md part 1), and its wire form: the
// zod schema below is the one definition of a trace on the wire, which the Berth API validates
// ingestion with (api/governance/schemas.ts), and the batch limit both sides keep.
import { randomUUID } from "node:crypto";
import { z } from "zod";

/** Token counts of one call. `total` defaults to prompt + completion. */
export interface TraceTokens {
  prompt: number;
  completion: number;
  total?: number;
}

/** What a client submits after each LLM call (docs/spec.md part 1). */
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
  /**
   * Scores the guards' model layers gave the input in the request path (the wrappers set it: the
   * API records them instead of running the model again). 0-1.
   */
  classifierScores?: { promptInjection?: number; toxicity?: number };
}

/** Traces per batch of POST /governance/traces: the API refuses a larger batch. */
export const MAX_BATCH_SIZE = 500;
/** Characters of a prompt or a response (the API's body limit, 1 MiB by default, usually binds first). */
export const MAX_TRACE_TEXT = 1_048_576;
/** Characters of a trace's `error`. */
export const MAX_TRACE_ERROR = 10_000;
const MAX_TOKENS = 2_000_000_000;
const DAY_MS = 86_400_000;

/** Text PostgreSQL can store and the audit hash can cover exactly: well-formed UTF-16 (no lone surrogates), no NUL. */
const storable = (s: string) => s.isWellFormed() && !s.includes("\u0000");
const STORABLE = "must be well-formed Unicode text without NUL characters";
const text = (max: number) => z.string().max(max).refine(storable, STORABLE);

/**
 * The trace as sent to the API, every default applied (toRecord), and what the API accepts: its
 * input type is what a client sends, its output what the API stores (traceId in lower case).
 */
export const TraceRecord = z
  .object({
    traceId: z
      .guid("must be a UUID")
      .transform((s) => s.toLowerCase())
      .describe("Client-generated unique id (UUID); a trace sent twice is stored once"),
    input: text(MAX_TRACE_TEXT).describe("Prompt text"),
    output: text(MAX_TRACE_TEXT).describe("Model response text (empty when the call failed)"),
    model: z.string().trim().min(1).max(200).refine(storable, STORABLE).describe("Model name; priced from the model price table"),
    latency: z.number().min(0).max(DAY_MS).describe("Milliseconds"),
    tokens: z
      .object({
        prompt: z.int().min(0).max(MAX_TOKENS),
        completion: z.int().min(0).max(MAX_TOKENS),
        total: z.int().min(0).max(MAX_TOKENS),
      })
      .strict(),
    timestamp: z.iso.datetime({ offset: true }).describe("Time of the call (ISO 8601); at most 1 h ahead of the server's clock"),
    project: z.string().min(1).max(63).optional().describe("GOVERNANCE_PROJECT; must be the key's own app id when given"),
    sessionId: z.string().min(1).max(200).refine(storable, STORABLE).optional().describe("Groups the traces of one conversation"),
    error: text(MAX_TRACE_ERROR).optional().describe("Set when the call failed (counts towards the error rate)"),
    metadata: z
      .record(
        z.string().min(1).max(64).refine(storable, STORABLE),
        z.union([z.string().max(1000).refine(storable, STORABLE), z.number(), z.boolean(), z.null()]),
      )
      .refine((m) => Object.keys(m).length <= 32, "at most 32 keys")
      .optional()
      .describe("A small flat object: up to 32 keys with string (up to 1000 characters), number, boolean or null values"),
    classifierScores: z
      .object({
        promptInjection: z
          .number()
          .min(0)
          .max(1)
          .optional()
          .describe("The prompt-injection classifier's score of the input (0-1), computed before the model was called"),
        toxicity: z
          .number()
          .min(0)
          .max(1)
          .optional()
          .describe(
            "The classifier's toxicity score of the input (0-1), computed before the model was called, when a toxicity template with classifier had a say",
          ),
      })
      .strict()
      .optional()
      .describe(
        "Scores the guards' model layers gave the input in the request path (the toolkit's wrappers send them). When the app's config turns the layer on, ingestion records the guard's verdict from this score instead of running the model again; when it is off, the score is ignored (docs/guards.md, The classifier)",
      ),
  })
  .strict()
  .describe("One LLM call (docs/spec.md part 1, trace object)");
export type TraceRecord = z.input<typeof TraceRecord>;

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
  if (typeof t.latency !== "number" || !Number.isFinite(t.latency) || t.latency < 0)
    problems.push("latency must be a number of milliseconds >= 0");
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
  if (t.metadata !== undefined && (typeof t.metadata !== "object" || t.metadata === null || Array.isArray(t.metadata)))
    problems.push("metadata must be an object");
  const scores = t.classifierScores as Record<string, unknown> | undefined;
  if (scores !== undefined) {
    // not an object: one problem, as for a bad prompt-injection score
    const heads =
      typeof scores === "object" && scores !== null ? (["promptInjection", "toxicity"] as const) : (["promptInjection"] as const);
    for (const head of heads) {
      const s = typeof scores === "object" && scores !== null ? scores[head] : NaN;
      if (s !== undefined && (typeof s !== "number" || !(s >= 0 && s <= 1)))
        problems.push(`classifierScores.${head} must be a number from 0 to 1`);
    }
  }
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
  if (trace.error !== undefined)
    record.error = trace.error.length > MAX_TRACE_ERROR ? trace.error.slice(0, MAX_TRACE_ERROR - 1) + "…" : trace.error;
  if (trace.metadata !== undefined) record.metadata = trace.metadata;
  if (trace.classifierScores !== undefined) record.classifierScores = trace.classifierScores;
  if (project !== undefined) record.project = project;
  return record;
}
