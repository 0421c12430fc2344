// @berth/toolkit: the client SDK of Berth. This entry point exports the pure guard and eval
// engine, shared by the Berth API (on trace ingestion) and by services (in the request path).
export * from "./guards/index.ts";
export * from "./evals/index.ts";
export {
  classifierUse,
  CustomTemplateRef,
  DEFAULT_THRESHOLDS,
  describe as describeHits,
  EngineConfig,
  engineFor,
  EvalsConfig,
  evaluateGuards,
  evaluateWithClassifier,
  GuardEngine,
  GuardsConfig,
  modelLayerUse,
  ResolvedTemplate,
  scoreWithClassifier,
  usesClassifier,
  wantsClassifierScore,
  withClassifierScore,
} from "./engine.ts";
// The guards' classifier (needs the optional peer dependency onnxruntime-node to load).
export { ClassifierInfo, defaultClassifierDir, loadInjectionClassifier, sharedInjectionClassifier } from "./guards/classifier/index.ts";
export type { ClassifierScores, ScoreFloors, TextClassifier } from "./guards/classifier/index.ts";
export type { ClassifierSource, EngineConfigInput, GuardBlock, GuardDecision, GuardEvaluation, HeadScores } from "./engine.ts";

// The client: configure() once at boot, submit() after each LLM call (docs/spec.md part 1, plain path).
// The LangChain wrapper is the subpath "@berth/toolkit/langchain" (it needs @langchain/core).
export * from "./client/index.ts";
