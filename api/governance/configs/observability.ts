// An app's observability config (docs/spec.md part 2) as the API stores and serves it, and the partial
// update of PUT .../observability-config (pure). The stored form has every default applied, so GET
// always shows the thresholds in force. The engine's own eval toggles (relevance, safety,
// policy_compliance) are accepted next to the interface's evals.latency (docs/guards.md).
import { z } from "zod";
import {
  EvalsConfig,
  GuardsConfig,
  sensitivityThreshold,
  type EngineConfigInput,
  type GuardTemplateConfig,
} from "../../../toolkit/src/index.ts";
import type { FieldError } from "../../errors.ts";

const Threshold = z.number().min(0).max(1).describe("0-1: the confidence at or above which the guard acts");
const DAY_MS = 86_400_000;

const Guard = z.object({ enabled: z.boolean(), threshold: Threshold }).strict();
const CLASSIFIER_DESCRIPTION =
  "Also score prompts the pattern layer lets pass with the prompt-injection classifier (a small model, 1-6 ms of CPU per prompt) and block at the same threshold, in the request path: the wrappers score before the model call and send the score with the trace, which ingestion records (docs/guards.md, The classifier). Default true";
const CLASSIFIER_ON_INGESTION_DESCRIPTION =
  "With classifier on, also run the classifier on ingestion for the prompts of traces that carry no score (the plain path: submit() or the API without a wrapper). Costs a model run per such prompt; docs/guards.md gives ingestion's rate with and without it. Default false";
const InjectionGuard = Guard.extend({
  // stored configs from before the field read as off (readStoredConfig)
  classifier: z.boolean().default(false).describe(CLASSIFIER_DESCRIPTION),
  classifier_on_ingestion: z.boolean().default(false).describe(CLASSIFIER_ON_INGESTION_DESCRIPTION),
}).strict();
const CustomTemplateEntry = z
  .object({
    template_id: z.string(),
    template_name: z.string().describe("The template's name when the entry was applied"),
    enabled: z.boolean(),
    threshold: Threshold.describe("Overrides the template's sensitivity"),
  })
  .strict();
const Latency = z
  .object({
    enabled: z.boolean(),
    threshold_ms: z.number().describe("passed when the latency is at or below this"),
    target_ms: z.number().describe("score 1 at or below this"),
    max_ms: z.number().describe("score 0 at or above this"),
  })
  .strict();
const Toggle = z.object({ enabled: z.boolean(), threshold: Threshold }).strict();

export const ObservabilityConfig = z
  .object({
    guards: z
      .object({
        prompt_injection: InjectionGuard,
        sensitive_data: Guard.describe("The built-in pii_detection guard"),
        custom_templates: z.array(CustomTemplateEntry),
      })
      .strict(),
    evals: z
      .object({
        latency: Latency,
        relevance: Toggle,
        safety: Toggle,
        policy_compliance: z.object({ enabled: z.boolean() }).strict(),
      })
      .strict(),
  })
  .strict()
  .meta({ id: "ObservabilityConfig", description: "An app's guards and evals, every default applied" });
export type ObservabilityConfig = z.output<typeof ObservabilityConfig>;

const GuardPatch = z.object({ enabled: z.boolean().optional(), threshold: Threshold.optional() }).strict();
const InjectionGuardPatch = GuardPatch.extend({
  classifier: z.boolean().optional().describe(CLASSIFIER_DESCRIPTION),
  classifier_on_ingestion: z.boolean().optional().describe(CLASSIFIER_ON_INGESTION_DESCRIPTION),
}).strict();
const TogglePatch = z.object({ enabled: z.boolean().optional(), threshold: Threshold.optional() }).strict();

export const MAX_CUSTOM_TEMPLATES = 100;

export const ObservabilityConfigPatch = z
  .object({
    guards: z
      .object({
        prompt_injection: InjectionGuardPatch.optional(),
        sensitive_data: GuardPatch.optional(),
        custom_templates: z
          .array(
            z
              .object({
                template_id: z.string().min(1).max(64).describe("Id of an existing guard template"),
                template_name: z.string().max(100).optional().describe("Informational; the stored entry carries the template's own name"),
                enabled: z.boolean().optional().describe("default true"),
                threshold: Threshold.optional().describe(
                  "default: the threshold of the template's sensitivity (low 0.8, medium 0.6, high 0.4)",
                ),
              })
              .strict(),
          )
          .max(MAX_CUSTOM_TEMPLATES)
          .optional()
          .describe(
            "Replaces the whole list; each entry must name an existing template, whose configuration is kept with the app's config",
          ),
      })
      .strict()
      .optional(),
    evals: z
      .object({
        latency: z
          .object({
            enabled: z.boolean().optional(),
            threshold_ms: z.number().positive().max(DAY_MS).optional(),
            target_ms: z.number().min(0).max(DAY_MS).optional(),
            max_ms: z.number().positive().max(DAY_MS).optional(),
          })
          .strict()
          .optional()
          .describe("target_ms must stay below max_ms after the update"),
        relevance: TogglePatch.optional(),
        safety: TogglePatch.optional(),
        policy_compliance: z.object({ enabled: z.boolean().optional() }).strict().optional(),
      })
      .strict()
      .optional(),
  })
  .strict()
  .meta({
    id: "ObservabilityConfigUpdate",
    description: "A partial update: only the fields given change, nested objects merge, custom_templates (an array) is replaced as a whole",
  });
export type ObservabilityConfigPatch = z.output<typeof ObservabilityConfigPatch>;

/** A guard template as kept with an app's config (a snapshot: later changes to the template do not reach the app). */
export interface ResolvedTemplate {
  name: string;
  guardType: string;
  config: GuardTemplateConfig;
}
export type TemplateSnapshot = Record<string, ResolvedTemplate>;

/**
 * A config as stored, read with the defaults of the day it was written: one from before
 * `classifier` reads as off, and one from before `classifier_on_ingestion` reads as `classifier`
 * (when that key came, turning the classifier on meant the model on ingestion too; an app that
 * turned it on keeps what it had).
 */
export function readStoredConfig(raw: unknown): z.ZodSafeParseResult<ObservabilityConfig> {
  const injection = (raw as { guards?: { prompt_injection?: Record<string, unknown> } } | null)?.guards?.prompt_injection;
  if (injection && typeof injection === "object" && injection.classifier_on_ingestion === undefined) {
    const r = raw as { guards: Record<string, unknown> };
    raw = { ...r, guards: { ...r.guards, prompt_injection: { ...injection, classifier_on_ingestion: injection.classifier === true } } };
  }
  return ObservabilityConfig.safeParse(raw);
}

/** The config of an app that never set one. */
export function defaultObservabilityConfig(): ObservabilityConfig {
  const g = GuardsConfig.parse({});
  const e = EvalsConfig.parse({});
  return {
    guards: { prompt_injection: g.prompt_injection, sensitive_data: g.sensitive_data, custom_templates: [] },
    evals: { latency: e.latency, relevance: e.relevance, safety: e.safety, policy_compliance: e.policy_compliance },
  };
}

/**
 * Applies a patch (without custom_templates, which need the templates: see resolveCustomTemplates)
 * and checks what only the merged config can tell.
 */
export function mergeObservability(
  current: ObservabilityConfig,
  patch: ObservabilityConfigPatch,
): { config: ObservabilityConfig; errors: FieldError[] } {
  const g = patch.guards ?? {};
  const e = patch.evals ?? {};
  const config: ObservabilityConfig = {
    guards: {
      prompt_injection: { ...current.guards.prompt_injection, ...defined(g.prompt_injection) },
      sensitive_data: { ...current.guards.sensitive_data, ...defined(g.sensitive_data) },
      custom_templates: current.guards.custom_templates,
    },
    evals: {
      latency: { ...current.evals.latency, ...defined(e.latency) },
      relevance: { ...current.evals.relevance, ...defined(e.relevance) },
      safety: { ...current.evals.safety, ...defined(e.safety) },
      policy_compliance: { ...current.evals.policy_compliance, ...defined(e.policy_compliance) },
    },
  };
  const errors: FieldError[] = [];
  const l = config.evals.latency;
  if (!(l.target_ms < l.max_ms)) {
    errors.push({
      field: e.latency?.target_ms !== undefined ? "body.evals.latency.target_ms" : "body.evals.latency.max_ms",
      message: `target_ms (${l.target_ms}) must be below max_ms (${l.max_ms})`,
    });
  }
  return { config, errors };
}

/** The new custom_templates entries and snapshot, from the patch's entries and the templates they name. */
export function resolveCustomTemplates(
  entries: NonNullable<NonNullable<ObservabilityConfigPatch["guards"]>["custom_templates"]>,
  templates: ReadonlyMap<string, ResolvedTemplate>,
): { entries: ObservabilityConfig["guards"]["custom_templates"]; snapshot: TemplateSnapshot; errors: FieldError[] } {
  const out: ObservabilityConfig["guards"]["custom_templates"] = [];
  const snapshot: TemplateSnapshot = {};
  const errors: FieldError[] = [];
  const seen = new Set<string>();
  entries.forEach((entry, i) => {
    const field = `body.guards.custom_templates[${i}].template_id`;
    if (seen.has(entry.template_id)) {
      errors.push({ field, message: `template ${entry.template_id} is listed twice` });
      return;
    }
    seen.add(entry.template_id);
    const t = templates.get(entry.template_id);
    if (!t) {
      errors.push({ field, message: `no guard template ${entry.template_id}` });
      return;
    }
    out.push({
      template_id: entry.template_id,
      template_name: t.name,
      enabled: entry.enabled ?? true,
      threshold: entry.threshold ?? sensitivityThreshold(t.config.sensitivity),
    });
    snapshot[entry.template_id] = t;
  });
  return { entries: out, snapshot, errors };
}

/** What the guard engine is built from for an app. */
export function engineInput(config: ObservabilityConfig, snapshot: TemplateSnapshot): EngineConfigInput {
  return { guards: config.guards, evals: config.evals, templates: snapshot as EngineConfigInput["templates"] };
}

/** Whether any guard is on (pipeline state `harbor.guardsEnabled`). */
export function anyGuardEnabled(config: ObservabilityConfig): boolean {
  return (
    config.guards.prompt_injection.enabled || config.guards.sensitive_data.enabled || config.guards.custom_templates.some((t) => t.enabled)
  );
}

function defined<T extends object>(o: T | undefined): Partial<T> {
  if (!o) return {};
  return Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined)) as Partial<T>;
}
