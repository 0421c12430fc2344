// REST shapes of the governance module (docs/spec.md parts 1, 2 and 4), one zod schema each: the
// router validates with them and the OpenAPI document is generated from them.
import { z } from "zod";
import {
  EngineConfig,
  EVAL_TYPES,
  GUARD_TYPES,
  GuardTemplateConfig,
  GuardTemplateSpec,
  MAX_BATCH_SIZE,
  MAX_TRACE_TEXT,
  PHASES,
  templateRulesJsonSchema,
  TraceRecord,
} from "../../toolkit/src/index.ts";
import { fieldErrorsFromZod, type FieldError } from "../errors.ts";
import { FieldErrorSchema } from "../http/problem.ts";
import { AppId } from "../apps/schemas.ts";
import { ObservabilityConfig } from "./configs/observability.ts";

const ts = z.iso.datetime();

// ---------------------------------------------------------------------------------------------
// Limits

/** Largest page of the governance lists (traces, evals, guard blocks). */
export const MAX_PAGE = 100;
/** How far in the future a trace's timestamp may be (client clock skew). */
export const MAX_FUTURE_SKEW_MS = 60 * 60_000;

// ---------------------------------------------------------------------------------------------
// Trace ingestion

// The trace object and the batch limit are the toolkit's (toolkit/src/client/trace.ts): the client
// that sends a trace and the API that accepts it share one definition of it.

/** A trace as accepted: TraceRecord's output (traceId in lower case). */
export type TraceInput = z.output<typeof TraceRecord>;

// As documented: an item is a trace (TraceRecord), and an item that is not one does not make the
// batch invalid: it is rejected on its own, in its result (status rejected, errors).
const TraceBatch = z
  .object({
    traces: z
      .array(
        z.union([TraceRecord, z.unknown().describe("Anything else: rejected on its own (its result has status rejected and the errors)")]),
      )
      .min(1)
      .max(MAX_BATCH_SIZE)
      .describe(`1-${MAX_BATCH_SIZE} traces; each is accepted or rejected on its own`),
  })
  .strict()
  .describe("A batch of traces");

const Envelope = z
  .object({
    traces: z
      .array(z.unknown())
      .min(1, "a batch needs at least one trace")
      .max(MAX_BATCH_SIZE, `at most ${MAX_BATCH_SIZE} traces per batch; split larger batches`),
  })
  .strict();

export type IngestItem = { ok: true; trace: TraceInput } | { ok: false; traceId: string | null; errors: FieldError[] };

export interface IngestRequest {
  batch: boolean;
  items: IngestItem[];
  /** raw `project` values, checked against the key before anything else */
  projects: string[];
}

function futureSkew(trace: TraceInput, now: number): string | undefined {
  return Date.parse(trace.timestamp) > now + MAX_FUTURE_SKEW_MS ? "is more than 1 hour in the future" : undefined;
}

function rawProject(v: unknown): string | undefined {
  return v && typeof v === "object" && "project" in v && typeof v.project === "string" ? (v as { project: string }).project : undefined;
}

/**
 * One trace, or `{ traces: [...] }`. A single trace must be valid (422 with every offending field
 * otherwise); in a batch each item is checked on its own and an invalid one is answered as
 * `rejected` with its errors while the others are stored.
 */
export function parseIngestBody(
  value: unknown,
  now = Date.now(),
): { ok: true; request: IngestRequest } | { ok: false; issues: z.core.$ZodIssue[] } {
  const isObject = value !== null && typeof value === "object" && !Array.isArray(value);
  if (isObject && Object.hasOwn(value, "traces")) {
    const env = Envelope.safeParse(value);
    if (!env.success) return { ok: false, issues: env.error.issues };
    const items = env.data.traces.map((raw, i): IngestItem => {
      const r = TraceRecord.safeParse(raw);
      const at = (field: string) => field.replace(/^body/, `body.traces[${i}]`);
      const rawId =
        raw && typeof raw === "object" && typeof (raw as { traceId?: unknown }).traceId === "string"
          ? (raw as { traceId: string }).traceId.slice(0, 100)
          : null;
      if (!r.success)
        return {
          ok: false,
          traceId: rawId,
          errors: fieldErrorsFromZod(r.error, "body").map((e) => ({ field: at(e.field), message: e.message })),
        };
      const skew = futureSkew(r.data, now);
      if (skew) return { ok: false, traceId: r.data.traceId, errors: [{ field: `body.traces[${i}].timestamp`, message: skew }] };
      return { ok: true, trace: r.data };
    });
    return { ok: true, request: { batch: true, items, projects: env.data.traces.map(rawProject).filter((p) => p !== undefined) } };
  }
  if (!isObject)
    return { ok: false, issues: [{ code: "custom", path: [], message: 'must be a trace object or { "traces": [...] }', input: value }] };
  const r = TraceRecord.safeParse(value);
  if (!r.success) return { ok: false, issues: r.error.issues };
  const skew = futureSkew(r.data, now);
  if (skew) return { ok: false, issues: [{ code: "custom", path: ["timestamp"], message: skew, input: r.data.timestamp }] };
  return {
    ok: true,
    request: { batch: false, items: [{ ok: true, trace: r.data }], projects: r.data.project === undefined ? [] : [r.data.project] },
  };
}

const jsonSchemaOf = (s: z.ZodType) => {
  const { $schema: _s, ...rest } = z.toJSONSchema(s, { io: "input", unrepresentable: "any", reused: "inline" }) as Record<string, unknown>;
  return rest;
};

/**
 * The body of POST /governance/traces. Parsed by parseIngestBody (which chooses the shape from the
 * `traces` key, so errors name fields rather than "no union member matched"); documented as the
 * union of the two shapes.
 */
export const IngestBody = z
  .unknown()
  .transform((value, ctx) => {
    const r = parseIngestBody(value);
    if (r.ok) return r.request;
    for (const issue of r.issues) ctx.addIssue(issue as Parameters<typeof ctx.addIssue>[0]);
    return z.NEVER;
  })
  .meta({
    description: `One trace object, or { "traces": [ ... ] } with 1-${MAX_BATCH_SIZE} of them`,
    anyOf: [jsonSchemaOf(TraceRecord), jsonSchemaOf(TraceBatch)],
  });

export const TraceIngestResult = z
  .object({
    traceId: z.string().nullable().describe("null when a rejected item had no usable traceId"),
    status: z
      .enum(["created", "duplicate", "rejected"])
      .describe("duplicate: a trace with this traceId was already stored (it is not changed)"),
    guardBlocked: z
      .boolean()
      .nullable()
      .describe("Whether a guard blocked the prompt or the response (of the stored trace, for a duplicate); null when rejected"),
    evalScore: z.number().nullable().describe("The mean eval score, 0-1 (of the stored trace, for a duplicate); null when rejected"),
    guardError: z
      .string()
      .optional()
      .describe(
        "A created trace whose scoring passed its deadline (BERTH_SCORING_TASK_TIMEOUT_MS): why the guards gave no verdict. The trace is stored, its guardEvaluations with result error, no evals or guard blocks",
      ),
    errors: z.array(FieldErrorSchema).optional().describe("Why an item was rejected"),
  })
  .strict()
  .meta({ id: "TraceIngestResult" });

export const TraceBatchResult = z
  .object({
    results: z.array(TraceIngestResult).describe("One per item, in the order sent"),
    created: z.int(),
    duplicates: z.int(),
    rejected: z.int(),
  })
  .strict()
  .meta({ id: "TraceBatchResult" });

// ---------------------------------------------------------------------------------------------
// Reading traces, evals and guard blocks

export const TraceListItem = z
  .object({
    traceId: z.string(),
    sessionId: z.string().nullable(),
    model: z.string(),
    promptTokens: z.int(),
    completionTokens: z.int(),
    totalTokens: z.int(),
    latencyMs: z.number(),
    guardBlocked: z.boolean(),
    evalScore: z.number().describe("0-1: the mean of the trace's eval scores"),
    createdAt: ts.describe("The time of the call (the trace's timestamp)"),
  })
  .strict()
  .meta({ id: "TraceListItem" });

const GUARD_RESULTS = ["pass", "flag", "block", "redact"] as const;

/** A verdict as a guard check answers it. */
const GuardVerdict = z
  .object({
    guardType: z.enum(GUARD_TYPES),
    result: z.enum(GUARD_RESULTS),
    confidence: z.number(),
    source: z.string().describe("prompt_injection, sensitive_data or template:<template_id>"),
  })
  .strict();

export const GuardEvaluation = GuardVerdict.extend({
  result: z
    .enum([...GUARD_RESULTS, "error"])
    .describe("error: the guard gave no verdict, the trace's scoring passed its deadline (see error); confidence is then 0"),
  phase: z.enum(["input", "output"]).describe("input: the prompt; output: the response"),
  error: z.string().optional().describe("Present when result is error: why (scoring timed out after N ms)"),
})
  .strict()
  .meta({ id: "GuardEvaluation" });

export const TraceDetail = TraceListItem.extend({
  prompt: z.string(),
  response: z.string(),
  guardEvaluations: z.array(GuardEvaluation),
  error: z.string().nullable(),
  metadata: z.record(z.string(), z.union([z.string(), z.number(), z.boolean(), z.null()])).nullable(),
  costUsd: z.number().describe("From the model price table; 0 for an unknown model"),
  costKnown: z.boolean().describe("false when the model is in no price table"),
  priceTableVersion: z.string(),
  ingestedAt: ts,
})
  .strict()
  .meta({ id: "TraceDetail" });

export const TraceList = z
  .object({
    data: z.array(TraceListItem),
    total: z.int(),
    limit: z.int(),
    offset: z.int(),
  })
  .strict()
  .meta({ id: "TraceList" });

export const Eval = z
  .object({
    id: z.string(),
    traceId: z.string(),
    evalType: z.enum(EVAL_TYPES),
    score: z.number(),
    passed: z.boolean(),
    details: z.string(),
    createdAt: ts,
  })
  .strict()
  .meta({ id: "Eval" });

export const GuardBlock = z
  .object({
    id: z.string(),
    traceId: z.string(),
    guardType: z.enum(GUARD_TYPES),
    blockedContent: z.string().describe("What matched, described without repeating it"),
    confidence: z.number(),
    action: z.enum(["block", "redact"]),
    phase: z.enum(["input", "output"]),
    source: z.string(),
    createdAt: ts,
  })
  .strict()
  .meta({ id: "GuardBlock" });

const Limit = z.coerce.number().int().min(1).max(MAX_PAGE).default(20).describe(`Page size, 1-${MAX_PAGE}`);
const Offset = z.coerce.number().int().min(0).max(10_000_000).default(0);

export const TracesQuery = z
  .object({
    limit: Limit,
    offset: Offset,
    project: z.string().max(63).optional().describe("Only this project's traces: the app's own id matches all, any other none"),
    session_id: z.string().max(200).optional(),
  })
  .strict();
export const EvalsQuery = z.object({ limit: Limit, offset: Offset, trace_id: z.guid().optional() }).strict();
export const GuardBlocksQuery = z.object({ limit: Limit, offset: Offset, guard_type: z.enum(GUARD_TYPES).optional() }).strict();

export const AppParams = z.object({ workspaceId: z.string().min(1).max(64), appId: AppId }).strict();
export const TraceParams = AppParams.extend({ traceId: z.string().min(1).max(100) }).strict();

// ---------------------------------------------------------------------------------------------
// Provisioning, audit, config

export const ProvisioningResult = z
  .object({
    appId: z.string(),
    harborDatabase: z.string().describe("The store's name (its PostgreSQL schema)"),
    connectionString: z
      .string()
      .describe("govdb://****@<host>/<database>: the credential is masked; the operator writes the real one into the app's Secret"),
  })
  .strict()
  .meta({ id: "ProvisioningResult" });

export const AuditVerification = z
  .object({
    valid: z.boolean(),
    entries: z.int(),
    firstBrokenLink: z
      .object({
        sequence: z.int().describe("The first entry that does not fit (or, for entries missing from the end, the first missing one)"),
        traceId: z.string().nullable().describe("null when that entry is gone"),
        reason: z.string(),
      })
      .strict()
      .nullable(),
    headHash: z
      .string()
      .nullable()
      .describe("The hash of the last entry when the chain is valid: record it elsewhere to detect a rewrite of the whole chain"),
    restarts: z
      .array(
        z
          .object({
            at: z.string().describe("When the chain began again"),
            reason: z
              .enum(["reprovisioned", "disabled", "replaced_by_new_app", "app_deleted"])
              .describe(
                "reprovisioned: POST .../provision; disabled: DELETE .../provision; replaced_by_new_app: a new App of the same id; app_deleted: the App was deleted",
              ),
            actor: z.string().describe("key:<workspace key id>, member:<email> (a member's console session), or operator"),
            previousEntries: z.int().describe("How many entries the chain that went had"),
            previousHeadHash: z.string().nullable().describe("The hash of its last entry"),
          })
          .strict(),
      )
      .describe("Every time this app's chain began again, oldest first: the entries above are only those since the last one"),
  })
  .strict()
  .meta({ id: "AuditVerification" });

export const ObservabilityConfigSchema = ObservabilityConfig;

// The operator ↔ API messages are the contract's (crds/governance.ts): the operator parses the
// answers with the same schemas.
export {
  ProvisionRequest as ProvisionInternalBody,
  DeprovisionRequest as DeprovisionInternalBody,
  Provisioned as InternalProvisioned,
} from "../../crds/governance.ts";

export const ToolkitConfig = z
  .object({
    project: z.string(),
    observability: ObservabilityConfig,
    engine: EngineConfig.describe("The EngineConfig the API itself evaluates this app's traces with (templates resolved)"),
  })
  .strict()
  .meta({ id: "ToolkitConfig" });

// ---------------------------------------------------------------------------------------------
// Guard checks (POST /governance/guard-check): a toolkit without the engine asks for the decision

/**
 * Body limit of POST /governance/guard-check: the most text a trace's prompt or response may hold
 * (MAX_TRACE_TEXT, which the ingestion route's default body limit equals), so any prompt or
 * response a trace can carry can be checked, and no more.
 */
export const GUARD_CHECK_BODY_LIMIT_BYTES = MAX_TRACE_TEXT;

export const GuardCheckBody = z
  .object({
    phase: z
      .enum(PHASES)
      .describe("input: a prompt, checked before the model is called; output: the model's response, checked before it is used"),
    // the router refuses text PostgreSQL could not store (NUL, lone surrogates) on every route, as
    // TraceRecord does in a trace: the same texts are refused here, once
    text: z
      .string()
      .max(MAX_TRACE_TEXT)
      .describe(
        `The prompt or response, as the service would send or use it: at most as long as a trace's (${MAX_TRACE_TEXT} characters; the body limit, ${GUARD_CHECK_BODY_LIMIT_BYTES} bytes, binds first), well-formed Unicode without NUL`,
      ),
    project: TraceRecord.shape.project.describe("GOVERNANCE_PROJECT; must be the key's own app id when given (403 project_mismatch)"),
  })
  .strict()
  .meta({ id: "GuardCheckRequest" });
export type GuardCheckRequest = z.output<typeof GuardCheckBody>;

export const GuardCheckResponse = z
  .object({
    decision: z.enum(["allow", "block", "redact"]).describe("block if any guard blocked, else redact if any redacted, else allow"),
    redactedText: z
      .string()
      .optional()
      .describe(
        "The text sent, with the spans the redacting guards matched replaced by [REDACTED:KIND]; present when any guard redacted, also when another blocked",
      ),
    evaluations: z
      .array(GuardVerdict)
      .describe("Every verdict of the app's guards for this phase, in chain order (as a trace's guardEvaluations record them)"),
    blocks: z
      .array(GuardBlock.pick({ guardType: true, blockedContent: true, confidence: true, action: true, source: true }))
      .describe("One per guard whose result is block or redact (as a trace's guard blocks record them)"),
    classifierScore: TraceRecord.shape.classifierScores
      .unwrap()
      .shape.promptInjection.describe(
        "The prompt-injection classifier's score of an input, present when the classifier ran (the prompt_injection patterns did not block): send it with the call's trace as classifierScores.promptInjection, so that ingestion records this decision without running the model again",
      ),
    classifierScores: TraceRecord.shape.classifierScores
      .unwrap()
      .optional()
      .describe(
        "The classifier's scores of an input that had a say on this decision (promptInjection as classifierScore; toxicity when a toxicity template with classifier did not block on its patterns): send them with the call's trace as classifierScores, so that ingestion records this decision without running the model again",
      ),
  })
  .strict()
  .meta({
    id: "GuardCheckResult",
    description:
      "The decision of the app's guards (its current observability config) on one text: the toolkit's GuardDecision without its verdicts",
  });

// ---------------------------------------------------------------------------------------------
// Guard templates

const templateName = z.string().trim().min(1).max(100);
const templateDescription = z.string().max(2000);

/** Checks config against guardType with the toolkit's GuardTemplateSpec (keys of another guard type are refused). */
function checkTemplate(t: { guardType: (typeof GUARD_TYPES)[number]; config?: unknown }, ctx: z.RefinementCtx): void {
  const r = GuardTemplateSpec.safeParse({ guardType: t.guardType, config: t.config });
  if (!r.success) for (const issue of r.error.issues) ctx.addIssue(issue as Parameters<typeof ctx.addIssue>[0]);
}

export const CreateGuardTemplateBody = z
  .object({
    name: templateName,
    description: templateDescription.optional(),
    guardType: z.enum(GUARD_TYPES),
    config: GuardTemplateConfig.optional().describe("Guard-specific settings; the complete set of keys is in docs/guards.md"),
  })
  .strict()
  .superRefine(checkTemplate)
  .meta({ id: "CreateGuardTemplateRequest", allOf: templateRulesJsonSchema() });

export const ReplaceGuardTemplateBody = z
  .object({
    name: templateName,
    description: templateDescription.nullable(),
    guardType: z.enum(GUARD_TYPES),
    config: GuardTemplateConfig,
  })
  .strict()
  .superRefine(checkTemplate)
  .meta({
    id: "ReplaceGuardTemplateRequest",
    description: "A full replacement: every field is required (description may be null)",
    allOf: templateRulesJsonSchema(),
  });

export const GuardTemplateSchema = z
  .object({
    id: z.string(),
    workspaceId: z.string().nullable().describe("The owning workspace; null for a platform template (read-only to workspace keys)"),
    name: z.string(),
    description: z.string().nullable(),
    guardType: z.enum(GUARD_TYPES),
    config: GuardTemplateConfig,
    createdAt: ts,
    updatedAt: ts,
  })
  .strict()
  .meta({ id: "GuardTemplate" });

export const TemplateParams = z.object({ id: z.string().min(1).max(100) }).strict();
