// The guard engine: an app's observability config (docs/spec.md part 2) plus the guard templates it
// references, compiled once into an ordered chain of pure checks, and the decision for one text.
//
// The chain, in order: prompt_injection (built in), sensitive_data (built in, guard type
// pii_detection), then each enabled entry of guards.custom_templates in the order given. Every
// check in the chain runs on every text of its phases (no short-circuit), so that a trace records
// all verdicts; the decision is then: block if any verdict is block, else redact if any is redact,
// else allow.
//
// The prompt-injection classifier (guards/classifier), when guards.prompt_injection.classifier is
// on, is the one step that is not pure: evaluateWithClassifier runs the chain, then scores an input
// the lexical layer let pass with the model it is given and blocks it at the guard's threshold.
//
// Pure: no I/O, no clock, no randomness. The compiled form of a config object is memoised by
// identity, so treat configs as immutable.
import { z } from "zod";
import type { CompiledAllowlist } from "./guards/allowlist.ts";
import { compileAllowlist, EMPTY_ALLOWLIST } from "./guards/allowlist.ts";
import { compileCustom, customDefinition } from "./guards/custom.ts";
import { injectionDefinition } from "./guards/injection.ts";
import { offTopicDefinition } from "./guards/off-topic.ts";
import { piiDefinition } from "./guards/pii/index.ts";
import type { PiiConfig } from "./guards/pii/common.ts";
import { redact } from "./guards/redact.ts";
import { toxicityHeadOn, type ToxicityHeadKeys } from "./guards/kinds.ts";
import type { GuardTemplateConfig } from "./guards/template.ts";
import {
  DEFAULT_PHASES,
  GuardTemplateConfig as GuardTemplateConfigSchema,
  PhoneRegion,
  refineTemplate,
  sensitivityThreshold,
  Topic,
  TOXICITY_CLASSIFIER_THRESHOLDS,
} from "./guards/template.ts";
import { prepareToxicity, toxicityDefinition } from "./guards/toxicity.ts";
import type { GuardAction, GuardDefinition, GuardPolicy, GuardResult, GuardType, GuardVerdict, Hit, Phase } from "./guards/types.ts";
import { GUARD_TYPES } from "./guards/types.ts";
import { evaluateGuard } from "./guards/verdict.ts";
import type { ScoreFloors, TextClassifier } from "./guards/classifier/index.ts";

// ---------------------------------------------------------------------------------------------
// Configuration

/** Defaults for the two built-in guards (the interface leaves them open; decided and documented here). */
export const DEFAULT_THRESHOLDS = { prompt_injection: 0.7, sensitive_data: 0.5 } as const;

const Threshold = z.number().min(0).max(1);

const BuiltinGuard = (threshold: number) =>
  z.object({
    enabled: z.boolean().default(true),
    threshold: Threshold.default(threshold),
  });

/** One entry of guards.custom_templates. `threshold` overrides the template's sensitivity. */
export const CustomTemplateRef = z.object({
  template_id: z.string().min(1),
  template_name: z.string().default(""),
  enabled: z.boolean().default(true),
  threshold: Threshold.optional(),
});

export const GuardsConfig = z.object({
  prompt_injection: BuiltinGuard(DEFAULT_THRESHOLDS.prompt_injection)
    // the model layer (guards/classifier): its score is compared with the same threshold. On by
    // default where it costs a user nothing: before a model call (the wrappers, the guard check);
    // on ingestion, a trace carries the score its request path computed, and a trace without one
    // (the plain path) is scored by the model only with classifier_on_ingestion (docs/guards.md)
    .extend({ classifier: z.boolean().default(true), classifier_on_ingestion: z.boolean().default(false) })
    .prefault({}),
  sensitive_data: BuiltinGuard(DEFAULT_THRESHOLDS.sensitive_data).prefault({}),
  custom_templates: z.array(CustomTemplateRef).max(100).default([]),
});

const EvalToggle = (threshold: number) =>
  z.object({
    enabled: z.boolean().default(true),
    threshold: Threshold.default(threshold),
  });

/** evals.latency (docs/spec.md part 2) plus the engine's own evals, each with enabled and a pass threshold. */
export const EvalsConfig = z.object({
  latency: z
    .object({
      enabled: z.boolean().default(true),
      threshold_ms: z.number().positive().default(5000),
      target_ms: z.number().nonnegative().default(1000),
      max_ms: z.number().positive().default(10000),
    })
    .refine((l) => l.target_ms < l.max_ms, { message: "target_ms must be below max_ms", path: ["target_ms"] })
    .prefault({}),
  relevance: EvalToggle(0.5).prefault({}),
  safety: EvalToggle(0.5).prefault({}),
  policy_compliance: z.object({ enabled: z.boolean().default(true) }).prefault({}),
});

/** A guard template as the engine needs it: resolved by the API from the template's id. */
export const ResolvedTemplate = z.object({
  name: z.string().default(""),
  guardType: z.enum(GUARD_TYPES),
  config: GuardTemplateConfigSchema.prefault({}),
});

/**
 * Everything the engine needs for one app: its observability config (`guards`, `evals`), the
 * templates its custom_templates entries reference (by template_id), the app's allowed topics
 * (the default of off_topic templates without their own) and the regions whose national phone
 * formats the built-in sensitive_data guard recognises.
 */
export const EngineConfig = z
  .object({
    guards: GuardsConfig.prefault({}),
    evals: EvalsConfig.prefault({}),
    templates: z.record(z.string(), ResolvedTemplate).default({}),
    allowedTopics: z.array(Topic).max(50).default([]),
    phoneRegions: z.array(PhoneRegion).min(1).max(50).optional(),
  })
  .superRefine((c, ctx) => {
    c.guards.custom_templates.forEach((ref, i) => {
      const t = c.templates[ref.template_id];
      if (!t && ref.enabled) {
        ctx.addIssue({
          code: "custom",
          path: ["guards", "custom_templates", i, "template_id"],
          message: `template ${ref.template_id} is not resolved in templates`,
        });
      }
    });
    for (const [id, t] of Object.entries(c.templates)) refineTemplate(t, ctx, ["templates", id]);
  });
export type EngineConfig = z.output<typeof EngineConfig>;
export type EngineConfigInput = z.input<typeof EngineConfig>;

// ---------------------------------------------------------------------------------------------
// Results

/** One entry of a trace's guardEvaluations (docs/spec.md part 2: { guardType, result, confidence }), plus its source. */
export interface GuardEvaluation {
  guardType: GuardType;
  result: GuardResult;
  confidence: number;
  /** "prompt_injection", "sensitive_data" or "template:<template_id>" */
  source: string;
}

/** A guard block record (docs/spec.md part 2: guard block fields other than id, traceId, createdAt). */
export interface GuardBlock {
  guardType: GuardType;
  /** what matched, described without the matched text */
  blockedContent: string;
  confidence: number;
  action: Exclude<GuardAction, "flag">;
  source: string;
}

export interface GuardDecision {
  decision: "allow" | "block" | "redact";
  /** the text with redacted spans replaced, present when any guard redacted */
  redactedText?: string;
  evaluations: GuardEvaluation[];
  blocks: GuardBlock[];
  /** the full verdicts, with match descriptions, in chain order */
  verdicts: GuardVerdict[];
}

// ---------------------------------------------------------------------------------------------
// Compilation

interface Check {
  source: string;
  guardType: GuardType;
  phases: ReadonlySet<Phase>;
  policy: GuardPolicy;
  allowlist: CompiledAllowlist;
  // the definition and its config travel together; the pair is type-safe where it is built
  def: GuardDefinition<unknown>;
  config: unknown;
  /** checks with the same key detect the same hits: one evaluation detects once */
  detectKey: string;
  /** a toxicity template's model layer: the toxicity head's score at which it acts (config.classifier) */
  classifier?: { threshold: number };
}

/**
 * What identifies a detection: checks (and evals) with the same key get the same hits from the
 * same text. Custom configs hold compiled patterns by identity, so a custom check is its own key;
 * the other configs are plain data.
 */
export function detectKey(guardType: GuardType, config: unknown, source?: string): string {
  return guardType === "custom" ? `custom:${source}` : `${guardType}:${JSON.stringify(config)}`;
}

function check<C>(c: Omit<Check, "def" | "config" | "detectKey"> & { def: GuardDefinition<C>; config: C }): Check {
  return { ...c, detectKey: detectKey(c.guardType, c.config, c.source) };
}

/**
 * The raw hits (before allowlists) each evaluation detected, by detect key, kept on its decision
 * under a module-private symbol, as a non-enumerable property: not part of the public data (JSON,
 * structured clones, spreads and util.inspect leave it out; hits carry internal scores), and it
 * lives exactly as long as the decision. runEvals reuses them for the same text instead of running
 * the same detector again. (A WeakMap from decision to hits did the same at ~2.5 us more per
 * trace: every entry is an ephemeron the garbage collector must trace.)
 */
const DETECTED = Symbol("berth.detected");
interface Detected {
  text: string;
  hits: ReadonlyMap<string, readonly Hit[]>;
}

/** The hits the evaluation behind `decision` detected in `text` under `key`, if it ran that detection on that text. */
export function detectedFor(decision: GuardDecision | undefined, text: string, key: string): readonly Hit[] | undefined {
  const d = decision && (decision as unknown as Record<symbol, Detected | undefined>)[DETECTED];
  return d && d.text === text ? d.hits.get(key) : undefined;
}

function templateCheck(id: string, guardType: GuardType, config: GuardTemplateConfig, threshold: number, engine: EngineConfig): Check {
  const base = {
    source: `template:${id}`,
    guardType,
    phases: new Set(config.phases ?? DEFAULT_PHASES[guardType]),
    policy: { threshold, action: config.action },
    allowlist: compileAllowlist(config.allowlist),
  };
  switch (guardType) {
    case "pii_detection":
      return check({
        ...base,
        def: piiDefinition,
        config: { entities: config.entities, phoneRegions: config.phoneRegions ?? engine.phoneRegions },
      });
    case "prompt_injection":
      return check({ ...base, def: injectionDefinition, config: { decodeBase64: config.decodeBase64 } });
    case "toxicity":
      return check({
        ...base,
        def: toxicityDefinition,
        config: { categories: config.categories },
        ...(toxicityHeadOn(config) ? { classifier: { threshold: TOXICITY_CLASSIFIER_THRESHOLDS[config.sensitivity] } } : {}),
      });
    case "off_topic":
      return check({ ...base, def: offTopicDefinition, config: { topics: config.topics ?? engine.allowedTopics } });
    case "custom": {
      const custom = { patterns: config.patterns, keywords: config.keywords, keywordWeight: config.keywordWeight };
      compileCustom(custom); // compile (and check) the patterns now, not on the first prompt
      return check({ ...base, def: customDefinition, config: custom });
    }
  }
}

/** The compiled chain for one config. */
export class GuardEngine {
  readonly config: EngineConfig;
  readonly checks: readonly Check[];
  /**
   * The PII detection of the built-in sensitive_data guard, and its detect key. The safety eval
   * detects PII with this very config, so it finds the guard's hits under this key (detectedFor).
   */
  readonly sensitiveData: { config: PiiConfig; key: string };

  constructor(input: EngineConfigInput | EngineConfig) {
    this.config = EngineConfig.parse(input);
    const c = this.config;
    const sensitive: PiiConfig = { phoneRegions: c.phoneRegions };
    this.sensitiveData = { config: sensitive, key: detectKey("pii_detection", sensitive) };
    const checks: Check[] = [];
    if (c.guards.prompt_injection.enabled) {
      checks.push(
        check({
          source: "prompt_injection",
          guardType: "prompt_injection",
          phases: new Set(DEFAULT_PHASES.prompt_injection),
          policy: { threshold: c.guards.prompt_injection.threshold, action: "block" },
          allowlist: EMPTY_ALLOWLIST,
          def: injectionDefinition,
          config: {},
        }),
      );
    }
    if (c.guards.sensitive_data.enabled) {
      checks.push(
        check({
          source: "sensitive_data",
          guardType: "pii_detection",
          phases: new Set(DEFAULT_PHASES.pii_detection),
          policy: { threshold: c.guards.sensitive_data.threshold, action: "block" },
          allowlist: EMPTY_ALLOWLIST,
          def: piiDefinition,
          config: this.sensitiveData.config,
        }),
      );
    }
    for (const ref of c.guards.custom_templates) {
      const t = c.templates[ref.template_id];
      if (!ref.enabled || !t) continue;
      const threshold = ref.threshold ?? sensitivityThreshold(t.config.sensitivity);
      checks.push(templateCheck(ref.template_id, t.guardType, t.config, threshold, c));
    }
    this.checks = checks;
    // the first prompt should not pay for building the word matcher
    if (c.evals.safety.enabled || checks.some((k) => k.guardType === "toxicity")) prepareToxicity();
  }

  /** Runs the chain on one text of one phase and decides. */
  evaluate(text: string, phase: Phase): GuardDecision {
    const evaluations: GuardEvaluation[] = [];
    const blocks: GuardBlock[] = [];
    const verdicts: GuardVerdict[] = [];
    const toRedact: Hit[] = [];
    const detected = new Map<string, Hit[]>();
    let blocked = false;
    for (const c of this.checks) {
      if (!c.phases.has(phase)) continue;
      let raw = detected.get(c.detectKey);
      if (!raw) {
        raw = c.def.detect(text, c.config);
        detected.set(c.detectKey, raw);
      }
      const { verdict, hits } = evaluateGuard(c.def, text, c.config, c.policy, c.allowlist, raw);
      verdicts.push(verdict);
      evaluations.push({ guardType: verdict.guardType, result: verdict.result, confidence: verdict.confidence, source: c.source });
      if (verdict.result === "block" || verdict.result === "redact") {
        const decisive = hits.filter((h) => h.score >= c.policy.threshold);
        // aggregated guards (injection) may act on several weaker signals together
        const shown = decisive.length > 0 ? decisive : hits;
        blocks.push({
          guardType: verdict.guardType,
          blockedContent: describe(shown),
          confidence: verdict.confidence,
          action: verdict.result,
          source: c.source,
        });
        if (verdict.result === "block") blocked = true;
        // one push per hit: a spread of tens of thousands of arguments overflows the stack
        else for (const h of shown) if (!h.whole) toRedact.push(h);
      }
    }
    const decision: GuardDecision = {
      decision: blocked ? "block" : toRedact.length > 0 ? "redact" : "allow",
      evaluations,
      blocks,
      verdicts,
    };
    if (toRedact.length > 0) decision.redactedText = redact(text, toRedact);
    Object.defineProperty(decision, DETECTED, { value: { text, hits: detected } });
    return decision;
  }
}

/**
 * Where a config runs guards.prompt_injection's model: `requestPath`, on prompts before the call
 * (the wrappers, the guard check; `classifier`), and `ingestion`, also on traces that carry no
 * score (`classifier_on_ingestion`). Neither when the guard is off.
 */
export function classifierUse(guards: EngineConfig["guards"]): { requestPath: boolean; ingestion: boolean } {
  const p = guards.prompt_injection;
  const requestPath = p.enabled && p.classifier;
  return { requestPath, ingestion: requestPath && p.classifier_on_ingestion };
}

/**
 * Where a config runs the classifier at all: on the request path for prompt_injection
 * (classifierUse) or for an enabled toxicity template with its head (toxicityHeadOn: both heads come from one
 * run of the model); on ingestion as classifierUse says (a toxicity score comes from the request
 * path, or from a run that classifier_on_ingestion asked for).
 */
export function modelLayerUse(config: {
  guards: EngineConfig["guards"];
  /** the referenced templates, parsed or as stored (only guardType, config.classifier and config.action are read) */
  templates?: Readonly<Record<string, { guardType: GuardType; config?: ToxicityHeadKeys | undefined }>> | undefined;
}): { requestPath: boolean; ingestion: boolean } {
  const use = classifierUse(config.guards);
  const toxicity = config.guards.custom_templates.some((ref) => {
    const t = ref.enabled ? config.templates?.[ref.template_id] : undefined;
    return t?.guardType === "toxicity" && toxicityHeadOn(t.config);
  });
  return { requestPath: use.requestPath || toxicity, ingestion: use.ingestion };
}

/** Whether this engine runs the classifier on the request path (modelLayerUse). */
export function usesClassifier(engine: GuardEngine): boolean {
  return modelLayerUse(engine.config).requestPath;
}

/**
 * Where the classifier's scores of a text come from: the model itself, or a function that gives
 * them (from anywhere: a model, the API, a trace) or undefined when there are none. A number is a
 * prompt-injection score alone.
 */
export type ClassifierSource =
  TextClassifier | ((text: string, floors?: ScoreFloors) => number | HeadScores | undefined | Promise<number | HeadScores | undefined>);

/**
 * Scores of a text by the classifier's heads, each present when known: what the request path sends
 * with a trace (classifierScores) and what ingestion applies.
 */
export interface HeadScores {
  promptInjection?: number | undefined;
  toxicity?: number | undefined;
}

/** The prompt_injection check's evaluation, when the injection head has a say on it (an input it did not block). */
function injectionWants(engine: GuardEngine, decision: GuardDecision, phase: Phase): boolean {
  if (phase !== "input" || !classifierUse(engine.config.guards).requestPath) return false;
  const evaluation = decision.evaluations.find((e) => e.source === "prompt_injection");
  return evaluation !== undefined && evaluation.result !== "block";
}

/**
 * The toxicity checks with a model layer that ran on this decision's text, an input, and did not
 * block it. Prompts only: the model runs before the call, where it costs a user nothing; a
 * response is judged by the patterns.
 */
function toxicityWants(engine: GuardEngine, decision: GuardDecision, phase: Phase): Check[] {
  if (phase !== "input") return [];
  return engine.checks.filter(
    (c) => c.classifier !== undefined && decision.evaluations.some((e) => e.source === c.source && e.result !== "block"),
  );
}

/**
 * Whether the classifier has a say on this decision: an input whose prompt_injection check did not
 * block, under a config that turns that guard's classifier on, or a text a toxicity template with
 * `classifier` checked and did not block. Otherwise its scores change nothing and no model needs
 * to run.
 */
export function wantsClassifierScore(engine: GuardEngine, decision: GuardDecision, phase: Phase): boolean {
  return injectionWants(engine, decision, phase) || toxicityWants(engine, decision, phase).length > 0;
}

/** A score as a decision records it: at most 1, three decimals. */
const rounded = (raw: number) => Math.min(1, Math.round(raw * 1000) / 1000);

/**
 * The chain's decision on a text of `phase` (default input) with the classifier's scores applied
 * (a number: the prompt-injection score alone). Where a head has a say (wantsClassifierScore), its
 * score at or above the threshold makes its check act, as one more hit of that check (kind
 * `classifier`): the prompt_injection check blocks at the guard's threshold; a toxicity template
 * with `classifier` takes its action (block or flag) at its toxicity threshold. Elsewhere the
 * decision is unchanged. Pure: the scores may come from this process's model or from the request
 * path that already ran it (a trace's classifierScores).
 */
export function withClassifierScore(
  engine: GuardEngine,
  decision: GuardDecision,
  text: string,
  raw: number | HeadScores,
  phase: Phase = "input",
): GuardDecision {
  const scores: HeadScores = typeof raw === "number" ? { promptInjection: raw } : raw;
  const acting: Array<{ source: string; guardType: GuardType; action: "block" | "flag"; score: number; description: string }> = [];
  if (
    scores.promptInjection !== undefined &&
    injectionWants(engine, decision, phase) &&
    scores.promptInjection >= engine.config.guards.prompt_injection.threshold
  ) {
    const score = rounded(scores.promptInjection);
    acting.push({
      source: "prompt_injection",
      guardType: "prompt_injection",
      action: "block",
      score,
      description: `prompt-injection classifier score ${score.toFixed(2)}`,
    });
  }
  if (scores.toxicity !== undefined) {
    for (const c of toxicityWants(engine, decision, phase)) {
      if (!(scores.toxicity >= c.classifier!.threshold)) continue;
      const score = rounded(scores.toxicity);
      const action = c.policy.action === "flag" ? "flag" : "block";
      acting.push({ source: c.source, guardType: "toxicity", action, score, description: `toxicity classifier score ${score.toFixed(2)}` });
    }
  }
  if (acting.length === 0) return decision;
  let evaluations = decision.evaluations;
  let verdicts = decision.verdicts;
  const blocks = [...decision.blocks];
  for (const a of acting) {
    const i = evaluations.findIndex((e) => e.source === a.source);
    const evaluation = evaluations[i]!;
    const confidence = Math.max(a.score, evaluation.confidence);
    // the check had not blocked (the head has no say then), and a template with the head never redacts
    const result: GuardResult = a.action;
    evaluations = evaluations.map((e, k) => (k === i ? { ...e, result, confidence } : e));
    verdicts = verdicts.map((v, k) =>
      k === i
        ? {
            ...v,
            result,
            confidence,
            matches: [...v.matches, { kind: "classifier", start: 0, end: text.length, description: a.description }],
          }
        : v,
    );
    if (a.action === "block")
      blocks.push({ guardType: a.guardType, blockedContent: a.description, confidence, action: "block", source: a.source });
  }
  const blocked = evaluations.some((e) => e.result === "block");
  const changed: GuardDecision = { ...decision, decision: blocked ? "block" : decision.decision, evaluations, blocks, verdicts };
  // the raw hits of the chain stay reusable by the evals (detectedFor)
  const detected = Object.getOwnPropertyDescriptor(decision, DETECTED);
  if (detected) Object.defineProperty(changed, DETECTED, detected);
  return changed;
}

/**
 * The chain's decision (GuardEngine.evaluate), then, where the classifier has a say
 * (wantsClassifierScore), the scores `source` gives applied (withClassifierScore); `source` is
 * asked only then. `score` is the prompt-injection score and `scores` the scores that had a say
 * (undefined when none was asked for or given). Throws when the config turns a classifier on and
 * no source is given: a guard that is configured never silently runs without its model.
 */
export async function scoreWithClassifier(
  engine: GuardEngine,
  text: string,
  phase: Phase,
  source: ClassifierSource | undefined,
): Promise<{ decision: GuardDecision; score?: number; scores?: HeadScores }> {
  const decision = engine.evaluate(text, phase);
  // the heads that have a say (wantsClassifierScore), and the thresholds they act at: the model's
  // screen spares its layer where it can tell a window stays under them
  const injection = injectionWants(engine, decision, phase);
  const toxic = toxicityWants(engine, decision, phase);
  if (!injection && toxic.length === 0) return { decision };
  if (!source) throw new Error("guards.prompt_injection.classifier or a toxicity template's classifier is on, but no classifier is loaded");
  const floors: ScoreFloors = {};
  if (injection) floors.promptInjection = engine.config.guards.prompt_injection.threshold;
  if (toxic.length > 0) floors.toxicity = Math.min(...toxic.map((c) => c.classifier!.threshold));
  const given = typeof source === "function" ? await source(text, floors) : await source.scores(text, floors);
  if (given === undefined) return { decision };
  const all: HeadScores = typeof given === "number" ? { promptInjection: given } : given;
  // only the scores that had a say travel on (a trace's classifierScores)
  const scores: HeadScores = {};
  if (all.promptInjection !== undefined && injection) scores.promptInjection = all.promptInjection;
  if (all.toxicity !== undefined && toxic.length > 0) scores.toxicity = all.toxicity;
  const had = scores.promptInjection !== undefined || scores.toxicity !== undefined;
  return {
    decision: withClassifierScore(engine, decision, text, scores, phase),
    ...(scores.promptInjection !== undefined ? { score: scores.promptInjection } : {}),
    ...(had ? { scores } : {}),
  };
}

/** scoreWithClassifier's decision. */
export async function evaluateWithClassifier(
  engine: GuardEngine,
  text: string,
  phase: Phase,
  source: ClassifierSource | undefined,
): Promise<GuardDecision> {
  return (await scoreWithClassifier(engine, text, phase, source)).decision;
}

const MAX_DESCRIPTIONS = 5;
const MAX_BLOCKED_CONTENT = 500;

/** blockedContent: the distinct descriptions, strongest first, capped. */
export function describe(hits: readonly Hit[]): string {
  // the distinct descriptions in order of first occurrence (a Set, not a scan of a list per hit:
  // a long text may hold tens of thousands of distinct ones)
  const seen = new Set<string>();
  for (const h of [...hits].sort((a, b) => b.score - a.score)) seen.add(h.description);
  const distinct = [...seen];
  let out = distinct.slice(0, MAX_DESCRIPTIONS).join("; ");
  if (distinct.length > MAX_DESCRIPTIONS) out += `; and ${distinct.length - MAX_DESCRIPTIONS} more`;
  return out.length > MAX_BLOCKED_CONTENT ? out.slice(0, MAX_BLOCKED_CONTENT - 1) + "…" : out;
}

const engines = new WeakMap<object, GuardEngine>();

/** The compiled engine for a config (memoised by object identity). */
export function engineFor(config: EngineConfigInput | EngineConfig | GuardEngine): GuardEngine {
  if (config instanceof GuardEngine) return config;
  let engine = engines.get(config);
  if (!engine) {
    engine = new GuardEngine(config);
    engines.set(config, engine);
  }
  return engine;
}

/**
 * Runs an app's guards on one text. `config` is an EngineConfig (input form, defaults applied
 * here) or a GuardEngine built from one.
 */
export function evaluateGuards(text: string, phase: Phase, config: EngineConfigInput | EngineConfig | GuardEngine): GuardDecision {
  return engineFor(config).evaluate(text, phase);
}
