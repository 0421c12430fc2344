// Guard templates: the `config` object of a guard template (docs/spec.md part 2, "complete set of
// config keys and values: not shown" -> decided here), as zod schemas the API validates with and
// the engine resolves. The full table of keys is in docs/guards.md.
import { getCountries, type CountryCode } from "libphonenumber-js/max";
import { z } from "zod";
import { PII_KINDS } from "./pii/common.ts";
import { checkPattern, parsePatternLiteral } from "./regex-safety.ts";
import { TOXICITY_CATEGORIES } from "./toxicity.ts";
import type { GuardType, Phase } from "./types.ts";
import { GUARD_ACTIONS, GUARD_TYPES, PHASES } from "./types.ts";

export const SENSITIVITIES = ["low", "medium", "high"] as const;
export type Sensitivity = (typeof SENSITIVITIES)[number];

/** Sensitivity -> threshold: a more sensitive guard acts on less evidence. */
export const SENSITIVITY_THRESHOLDS: Readonly<Record<Sensitivity, number>> = { low: 0.8, medium: 0.6, high: 0.4 };

/**
 * Sensitivity -> the score of the classifier's toxicity head at which a toxicity template with
 * `classifier` blocks (docs/guards.md, "The toxicity head"): higher than the patterns' thresholds,
 * as the model's scores are calibrated differently; chosen on the dev split.
 */
export const TOXICITY_CLASSIFIER_THRESHOLDS: Readonly<Record<Sensitivity, number>> = { low: 0.95, medium: 0.9, high: 0.8 };

/** Where each guard type runs unless a template says otherwise. */
export const DEFAULT_PHASES: Readonly<Record<GuardType, readonly Phase[]>> = {
  pii_detection: ["input", "output"],
  prompt_injection: ["input"],
  toxicity: ["input", "output"],
  off_topic: ["input"],
  custom: ["input", "output"],
};

function refinePattern(source: string, flags: string | undefined, ctx: z.RefinementCtx) {
  const check = checkPattern(source, flags ?? "");
  if (!check.ok) ctx.addIssue({ code: "custom", message: check.reason });
}

/** An allowlist entry: a literal (case-insensitive) or "/pattern/flags". */
export const AllowlistEntry = z
  .string()
  .min(1)
  .max(256)
  .superRefine((entry, ctx) => {
    const lit = parsePatternLiteral(entry);
    if (lit) refinePattern(lit.source, lit.flags, ctx);
  })
  .describe('A literal (matched case-insensitively) or a "/pattern/flags" regular expression');

export const CustomPatternSpec = z
  .union([
    z.string().min(1).max(256),
    z.strictObject({
      pattern: z.string().min(1).max(256).describe("JavaScript regular expression source"),
      flags: z
        .string()
        .regex(/^[imsu]*$/, "flags may only be i, m, s and u")
        .optional(),
      name: z.string().min(1).max(100).optional().describe("Shown in descriptions instead of the matched text"),
      weight: z.number().min(0).max(1).optional().describe("Confidence of a match, default 0.9"),
      kind: z
        .string()
        .regex(/^[a-z][a-z0-9_]{0,39}$/, "lower-case letters, digits and _")
        .optional()
        .describe("Match kind and redaction placeholder, default custom_pattern"),
    }),
  ])
  .superRefine((spec, ctx) => {
    if (typeof spec === "string") refinePattern(spec, "", ctx);
    else refinePattern(spec.pattern, spec.flags, ctx);
  });

export const Topic = z.strictObject({
  name: z.string().min(1).max(100),
  keywords: z.array(z.string().min(1).max(100)).min(1).max(200).describe("Keywords or phrases that mark the topic"),
});
export type TopicInput = z.input<typeof Topic>;

// An enum (not a string checked by a refinement) so that the documented schema lists the regions.
export const PhoneRegion = z
  .enum(getCountries() as [CountryCode, ...CountryCode[]], { error: "not a region libphonenumber knows" })
  .describe("ISO 3166-1 alpha-2 region (one libphonenumber knows)");

/**
 * The `config` of a guard template. Common keys: sensitivity, action, allowlist, phases.
 * Per guard type: entities and phoneRegions (pii_detection), categories and classifier (toxicity),
 * topics (off_topic), patterns, keywords and keywordWeight (custom), decodeBase64 (prompt_injection).
 * Unknown keys are refused, so that a typo does not silently weaken a guard.
 */
export const GuardTemplateConfig = z.strictObject({
  sensitivity: z.enum(SENSITIVITIES).default("medium").describe("low, medium, high -> threshold 0.8, 0.6, 0.4"),
  action: z.enum(GUARD_ACTIONS).default("block").describe("What happens at or above the threshold: block, redact or flag"),
  allowlist: z.array(AllowlistEntry).max(200).default([]).describe("Text that never triggers the guard"),
  phases: z.array(z.enum(PHASES)).min(1).max(2).optional().describe("input, output; default by guard type"),
  entities: z.array(z.enum(PII_KINDS)).min(1).optional().describe("pii_detection: kinds to detect, default all"),
  phoneRegions: z.array(PhoneRegion).min(1).max(50).optional().describe("pii_detection: regions whose national phone formats count"),
  categories: z.array(z.enum(TOXICITY_CATEGORIES)).min(1).optional().describe("toxicity: categories to detect, default all"),
  topics: z.array(Topic).min(1).max(50).optional().describe("off_topic: allowed topics; default the app's allowed topics"),
  patterns: z.array(CustomPatternSpec).max(50).optional().describe("custom: regular expressions"),
  keywords: z.array(z.string().min(1).max(100)).max(500).optional().describe("custom: keywords or phrases (case-insensitive, whole words)"),
  keywordWeight: z.number().min(0).max(1).optional().describe("custom: confidence of a keyword match, default 0.8"),
  decodeBase64: z.boolean().optional().describe("prompt_injection: look inside base64 blobs, default true"),
  classifier: z
    .boolean()
    .optional()
    .describe(
      "toxicity: also block (or flag) what the classifier's toxicity head scores at or above its threshold (low, medium, high -> 0.95, 0.9, 0.8) in a prompt its patterns let pass; default true, except with action redact (the score has no span to redact)",
    ),
});
export type GuardTemplateConfig = z.output<typeof GuardTemplateConfig>;
export type GuardTemplateConfigInput = z.input<typeof GuardTemplateConfig>;

/** Keys that only make sense for one guard type. */
export const TYPE_KEYS: Readonly<Record<string, GuardType>> = {
  entities: "pii_detection",
  phoneRegions: "pii_detection",
  categories: "toxicity",
  topics: "off_topic",
  patterns: "custom",
  keywords: "custom",
  keywordWeight: "custom",
  decodeBase64: "prompt_injection",
  classifier: "toxicity",
};

/**
 * refineTemplate's rules as JSON Schema, for documents that describe a { guardType, config } body
 * (the API's OpenAPI document): one if/then per guard type.
 */
export function templateRulesJsonSchema(): Record<string, unknown>[] {
  return GUARD_TYPES.map((type) => {
    const foreign = Object.entries(TYPE_KEYS)
      .filter(([, t]) => t !== type)
      .map(([key]) => ({ required: [key] }));
    const config: Record<string, unknown> = { not: { anyOf: foreign } };
    const then: Record<string, unknown> = { properties: { config } };
    if (type === "custom") {
      config.anyOf = [
        { required: ["patterns"], properties: { patterns: { minItems: 1 } } },
        { required: ["keywords"], properties: { keywords: { minItems: 1 } } },
      ];
      then.required = ["config"];
    }
    if (type === "off_topic") config.properties = { action: { not: { const: "redact" } } };
    if (type === "toxicity")
      config.not = {
        anyOf: [
          ...foreign,
          { required: ["classifier", "action"], properties: { classifier: { const: true }, action: { const: "redact" } } },
        ],
      };
    return { if: { properties: { guardType: { const: type } }, required: ["guardType"] }, then };
  });
}

/** Cross-checks a config against its guard type (used by GuardTemplateSpec and the engine config). */
export function refineTemplate(t: { guardType: GuardType; config: GuardTemplateConfig }, ctx: z.RefinementCtx, path: PropertyKey[] = []) {
  for (const [key, type] of Object.entries(TYPE_KEYS)) {
    if ((t.config as Record<string, unknown>)[key] !== undefined && type !== t.guardType) {
      ctx.addIssue({
        code: "custom",
        path: [...path, "config", key],
        message: `${key} applies to ${type} guards only, not ${t.guardType}`,
      });
    }
  }
  if (t.guardType === "custom" && !(t.config.patterns?.length || t.config.keywords?.length)) {
    ctx.addIssue({ code: "custom", path: [...path, "config"], message: "a custom guard needs patterns or keywords" });
  }
  if (t.guardType === "toxicity" && t.config.classifier === true && t.config.action === "redact") {
    ctx.addIssue({
      code: "custom",
      path: [...path, "config", "action"],
      message:
        "the classifier scores the whole text and has no span to redact: with classifier, a toxicity guard's action is block or flag",
    });
  }
  if (t.guardType === "off_topic" && t.config.action === "redact") {
    ctx.addIssue({
      code: "custom",
      path: [...path, "config", "action"],
      message: "an off_topic guard judges the whole text: its action is block or flag",
    });
  }
}

/** A guard template's type and config, validated together (the API's create and replace bodies). */
export const GuardTemplateSpec = z
  .object({
    guardType: z.enum(GUARD_TYPES),
    config: GuardTemplateConfig.prefault({}),
  })
  .superRefine((t, ctx) => refineTemplate(t, ctx));
export type GuardTemplateSpec = z.output<typeof GuardTemplateSpec>;

/** The threshold a template's sensitivity stands for. */
export function sensitivityThreshold(sensitivity: Sensitivity): number {
  return SENSITIVITY_THRESHOLDS[sensitivity];
}
