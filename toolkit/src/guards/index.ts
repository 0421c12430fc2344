// The guards, each a pure (text, config) -> verdict function, and their building blocks.
import type { CustomConfig } from "./custom.ts";
import { customDefinition } from "./custom.ts";
import type { InjectionConfig } from "./injection.ts";
import { injectionDefinition } from "./injection.ts";
import type { OffTopicConfig } from "./off-topic.ts";
import { offTopicDefinition } from "./off-topic.ts";
import type { PiiConfig } from "./pii/common.ts";
import { piiDefinition } from "./pii/index.ts";
import { SENSITIVITY_THRESHOLDS } from "./template.ts";
import type { ToxicityConfig } from "./toxicity.ts";
import { toxicityDefinition } from "./toxicity.ts";
import type { GuardVerdict } from "./types.ts";
import type { GuardOptions } from "./verdict.ts";
import { guardFunction } from "./verdict.ts";

export * from "./types.ts";
export type { GuardOptions, Evaluation } from "./verdict.ts";
export { evaluateGuard, resultFor, verdictOf } from "./verdict.ts";
export { redact, placeholder } from "./redact.ts";
export { applyAllowlist, compileAllowlist } from "./allowlist.ts";
export type { CompiledAllowlist } from "./allowlist.ts";
export { checkPattern, compilePattern, MAX_PATTERN_LENGTH } from "./regex-safety.ts";
export type { Pattern, PatternCheck } from "./regex-safety.ts";
export { detectPii, piiDefinition, PII_CHAIN, PII_KINDS, DEFAULT_PHONE_REGIONS } from "./pii/index.ts";
export type { PiiConfig, PiiKind } from "./pii/index.ts";
export { detectInjection, injectionConfidence, injectionDefinition, INJECTION_KINDS, SIGNALS } from "./injection.ts";
export type { InjectionConfig, InjectionKind } from "./injection.ts";
export { detectToxicity, toxicityConfidence, toxicityDefinition, TOXICITY_CATEGORIES, SEVERITY } from "./toxicity.ts";
export type { ToxicityCategory, ToxicityConfig } from "./toxicity.ts";
export { detectOffTopic, offTopicDefinition, topicOverlap } from "./off-topic.ts";
export type { OffTopicConfig, Topic as TopicSpec } from "./off-topic.ts";
export { detectCustom, customDefinition } from "./custom.ts";
export type { CustomConfig, CustomPattern } from "./custom.ts";
export {
  AllowlistEntry,
  CustomPatternSpec,
  DEFAULT_PHASES,
  GuardTemplateConfig,
  GuardTemplateSpec,
  PhoneRegion,
  SENSITIVITIES,
  SENSITIVITY_THRESHOLDS,
  sensitivityThreshold,
  templateRulesJsonSchema,
  Topic,
} from "./template.ts";
export type { GuardTemplateConfigInput, Sensitivity, TopicInput } from "./template.ts";

type GuardFn<C> = (text: string, options?: Partial<C> & GuardOptions) => GuardVerdict;

/** pii_detection; default threshold 0.5 (the sensitive_data default). */
export const piiGuard: GuardFn<PiiConfig> = guardFunction(piiDefinition, { threshold: 0.5 });
/** prompt_injection; default threshold 0.7. */
export const injectionGuard: GuardFn<InjectionConfig> = guardFunction(injectionDefinition, { threshold: 0.7 });
/** toxicity; default threshold 0.6 (sensitivity medium). */
export const toxicityGuard: GuardFn<ToxicityConfig> = guardFunction(toxicityDefinition, { threshold: SENSITIVITY_THRESHOLDS.medium });
/** off_topic; default threshold 0.6; passes when no topics are given. */
export const offTopicGuard: GuardFn<OffTopicConfig> = guardFunction(offTopicDefinition, { threshold: SENSITIVITY_THRESHOLDS.medium });
/** custom patterns and keywords; default threshold 0.6. */
export const customGuard: GuardFn<CustomConfig> = guardFunction(customDefinition, { threshold: SENSITIVITY_THRESHOLDS.medium });
