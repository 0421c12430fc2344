// Scoring of traces on ingestion: the app's guard engine on the prompt (phase input) and the
// response (phase output), then the evals given those decisions (toolkit runEvals) and their
// aggregate (aggregateEvalScore). The engine is the bulk of ingestion's CPU, so it can run in a
// pool of worker threads (BERTH_INGEST_WORKERS) next to the thread that serves HTTP and talks to
// PostgreSQL; with 0 workers it runs in-process. Both paths call scoreTraces, so they agree.
//
// The prompt-injection classifier (guards.prompt_injection.classifier, on by default) runs in the
// request path: the wrappers score the prompt before the call (in process, or through the guard
// check) and send the score with the trace (classifierScores). Ingestion applies that score, so a
// trace records the block its call got, at the cost of the pattern chain. A trace without a score
// (the plain path) is scored by the model here only when the config's classifier_on_ingestion
// says so (each thread loads it once, from BERTH_GUARD_MODEL_DIR): that costs a model run per
// prompt, the price docs/guards.md measures.
//
// The same engines answer guard checks (POST /governance/guard-check): one text of one phase, for
// a toolkit that does not carry the engine itself, through the same threads and caches.
import { Worker } from "node:worker_threads";
import {
  aggregateEvalScore,
  classifierUse,
  DEFAULT_PHASES,
  EngineConfig,
  GuardEngine,
  runEvals,
  scoreWithClassifier,
  sharedInjectionClassifier,
  type EngineConfigInput,
  type EvalResult,
  type GuardBlock,
  type GuardDecision,
  type GuardEvaluation,
  type GuardType,
  type HeadScores,
  type Phase,
  type ScoreFloors,
  type TextClassifier,
} from "../../../toolkit/src/index.ts";
import type { Logger } from "../../../kube/logger.ts";
import { modelGateBuffer, stopModelWork } from "./model-gate.ts";

export interface ScoreInput {
  input: string;
  output: string;
  latency: number;
  model: string;
  /** the trace's classifierScores.promptInjection: the request path's score of the input */
  classifierScore?: number | undefined;
  /** the trace's classifierScores.toxicity: the request path's toxicity score of the input */
  toxicityScore?: number | undefined;
}

/**
 * Whether a trace carries the request path's classifier scores: then ingestion applies them and runs
 * no model, even under classifier_on_ingestion (which is only for traces without any).
 */
export function carriesScores(t: ScoreInput): boolean {
  return t.classifierScore !== undefined || t.toxicityScore !== undefined;
}

/** A guard decision without the full verdicts (match offsets). */
type DecisionSummary = Pick<GuardDecision, "decision" | "evaluations" | "blocks">;

/**
 * What ingestion stores of a trace's scoring. Built where the engine runs (a scoring thread), as
 * the rows need it: the guard evaluations and the audit's guard decision already as JSON text, so
 * that the thread that writes to PostgreSQL neither builds nor serialises them, and a reply to
 * the main thread carries a few strings per trace instead of a tree of small objects.
 */
export interface ScoreResult {
  /** the blocks and redactions of each phase (guard_blocks rows) */
  blocks: { input: GuardBlock[]; output: GuardBlock[] };
  evals: EvalResult[];
  evalScore: number;
  guardBlocked: boolean;
  /** traces.guard_evaluations: every verdict of both phases, in chain order */
  evaluationsJson: string;
  /** audit_log.guard_decision: canonical JSON (guardDecisionOf, or unscored's) */
  decisionJson: string;
  /**
   * Why the guards gave no verdict (the trace's scoring passed its deadline): then there are no
   * blocks and no evals, and every guard of the chain is recorded with result "error" (unscored).
   */
  guardError?: string;
}

/**
 * Scores traces with a compiled engine. Under a config that turns the classifier on, a prompt the
 * lexical layer lets pass gets the score its trace carries, or, without one, this thread's
 * classifier's when the config's classifier_on_ingestion says so (then a missing model fails the
 * batch rather than record it unguarded); otherwise the lexical layer's verdict stands.
 * `classifier` loads the model (the thread's shared one; tests give their own).
 */
export async function scoreTraces(
  engine: GuardEngine,
  traces: readonly ScoreInput[],
  classifier: () => Promise<TextClassifier> = sharedInjectionClassifier,
): Promise<ScoreResult[]> {
  const onIngestion = classifierUse(engine.config.guards).ingestion;
  const model = async (text: string, floors?: ScoreFloors) => (await loaded(classifier)).scores(text, floors);
  const out: ScoreResult[] = [];
  for (const t of traces) {
    // the scores the request path sent; without any, the model's when classifier_on_ingestion says so
    const { decision: input } = await scoreWithClassifier(engine, t.input, "input", (_, floors) =>
      carriesScores(t)
        ? { promptInjection: t.classifierScore, toxicity: t.toxicityScore }
        : onIngestion
          ? model(t.input, floors)
          : undefined,
    );
    const output = engine.evaluate(t.output, "output");
    const evals = runEvals({ input: t.input, output: t.output, latencyMs: t.latency, model: t.model }, engine, { input, output });
    const guardBlocked = input.decision === "block" || output.decision === "block";
    out.push({
      blocks: { input: input.blocks, output: output.blocks },
      evals,
      evalScore: aggregateEvalScore(evals),
      guardBlocked,
      evaluationsJson: JSON.stringify(evaluationsOf(input, output)),
      decisionJson: JSON.stringify(guardDecisionOf({ guardBlocked, input, output })),
    });
  }
  return out;
}

/**
 * What a guard check answers for one text: the engine's decision without its verdicts (their match
 * offsets and descriptions), so exactly what GuardDecision's other fields expose: redactedText is
 * the caller's own text with the redacted spans replaced, blockedContent describes a match without
 * repeating it.
 */
export interface GuardCheckResult {
  decision: GuardDecision["decision"];
  redactedText?: string;
  evaluations: GuardEvaluation[];
  blocks: GuardBlock[];
  /** the classifier's prompt-injection score of an input, when it had a say: the caller sends it with the trace */
  classifierScore?: number;
  /** every score of the classifier that had a say (prompt injection, toxicity): sent with the trace */
  classifierScores?: HeadScores;
}

/**
 * A decision as a guard check answers it. Copied field by field, not spread: whatever else a
 * decision object carries (the verdicts, and anything a later engine adds) stays in the API.
 */
export function guardCheckResult(d: GuardDecision, classifierScore?: number, classifierScores?: HeadScores): GuardCheckResult {
  return {
    ...(classifierScore === undefined ? {} : { classifierScore }),
    ...(classifierScores === undefined ? {} : { classifierScores: { ...classifierScores } }),
    decision: d.decision,
    ...(d.redactedText === undefined ? {} : { redactedText: d.redactedText }),
    evaluations: d.evaluations.map((e) => ({ guardType: e.guardType, result: e.result, confidence: e.confidence, source: e.source })),
    blocks: d.blocks.map((b) => ({
      guardType: b.guardType,
      blockedContent: b.blockedContent,
      confidence: b.confidence,
      action: b.action,
      source: b.source,
    })),
  };
}

/**
 * One text of one phase through a compiled engine, as the request path checks it: a prompt the
 * patterns let pass is also scored by this thread's classifier when the engine's config turns it
 * on (a model that cannot load fails the check rather than run the guard without it), and the
 * score is answered for the caller's trace.
 * `classifier` loads the model (the thread's shared one; tests give their own).
 */
export async function checkText(
  engine: GuardEngine,
  text: string,
  phase: Phase,
  classifier: () => Promise<TextClassifier> = sharedInjectionClassifier,
): Promise<GuardCheckResult> {
  const { decision, score, scores } = await scoreWithClassifier(engine, text, phase, async (t, floors) =>
    (await loaded(classifier)).scores(t, floors),
  );
  return guardCheckResult(decision, score, scores);
}

/**
 * The classifier a config runs could not be loaded (its files are missing or of another build, or
 * onnxruntime-node is absent): the text cannot be guarded as the app configured it, and nothing
 * is decided without the model. The API answers 503 guard_unavailable (guard-check.ts, ingest.ts);
 * `reason` (the loader's message, which names server paths) is for the operator's log only.
 */
export class ClassifierUnavailableError extends Error {
  readonly reason: string;
  constructor(reason: string, options?: ErrorOptions) {
    super(`the guards' classifier could not be loaded: ${reason}`, options);
    this.name = "ClassifierUnavailableError";
    this.reason = reason;
  }
}

/** The classifier `classifier` loads; a failure to load is ClassifierUnavailableError. */
async function loaded(classifier: () => Promise<TextClassifier>): Promise<TextClassifier> {
  try {
    return await classifier();
  } catch (err) {
    throw new ClassifierUnavailableError(err instanceof Error ? err.message : String(err), { cause: err });
  }
}

/**
 * ScoreResults as columns of primitives and strings, as a scoring thread replies: a structured
 * clone of a few arrays costs a third of one of a hundred small object trees (measured).
 */
export interface PackedScores {
  guardBlocked: boolean[];
  evalScore: number[];
  evaluationsJson: string[];
  decisionJson: string[];
  /** evals per trace, then the evals of every trace in order, column by column */
  evalCount: number[];
  evalType: EvalResult["evalType"][];
  evalValue: number[];
  evalPassed: boolean[];
  evalDetails: string[];
  /** the blocks of the traces that have any: [trace index, blocks] */
  blocks: [number, ScoreResult["blocks"]][];
}

export function packScores(results: readonly ScoreResult[]): PackedScores {
  const p: PackedScores = {
    guardBlocked: [],
    evalScore: [],
    evaluationsJson: [],
    decisionJson: [],
    evalCount: [],
    evalType: [],
    evalValue: [],
    evalPassed: [],
    evalDetails: [],
    blocks: [],
  };
  results.forEach((r, i) => {
    p.guardBlocked.push(r.guardBlocked);
    p.evalScore.push(r.evalScore);
    p.evaluationsJson.push(r.evaluationsJson);
    p.decisionJson.push(r.decisionJson);
    p.evalCount.push(r.evals.length);
    for (const e of r.evals) {
      p.evalType.push(e.evalType);
      p.evalValue.push(e.score);
      p.evalPassed.push(e.passed);
      p.evalDetails.push(e.details);
    }
    if (r.blocks.input.length > 0 || r.blocks.output.length > 0) p.blocks.push([i, r.blocks]);
  });
  return p;
}

function unpackScores(p: PackedScores): ScoreResult[] {
  const none = (): ScoreResult["blocks"] => ({ input: [], output: [] });
  const blocks = new Map(p.blocks);
  let e = 0;
  return p.guardBlocked.map((guardBlocked, i) => {
    const evals: EvalResult[] = [];
    for (let k = 0; k < p.evalCount[i]!; k++, e++)
      evals.push({ evalType: p.evalType[e]!, score: p.evalValue[e]!, passed: p.evalPassed[e]!, details: p.evalDetails[e]! });
    return {
      blocks: blocks.get(i) ?? none(),
      evals,
      evalScore: p.evalScore[i]!,
      guardBlocked,
      evaluationsJson: p.evaluationsJson[i]!,
      decisionJson: p.decisionJson[i]!,
    };
  });
}

/** A trace's guardEvaluations: every verdict of both phases, in chain order. */
function evaluationsOf(input: DecisionSummary, output: DecisionSummary): unknown[] {
  return [
    ...input.evaluations.map((e) => ({
      guardType: e.guardType,
      result: e.result,
      confidence: e.confidence,
      phase: "input",
      source: e.source,
    })),
    ...output.evaluations.map((e) => ({
      guardType: e.guardType,
      result: e.result,
      confidence: e.confidence,
      phase: "output",
      source: e.source,
    })),
  ];
}

/**
 * The guard decision an audit entry records (no match offsets, no matched text). Every object is
 * built with its keys in sorted order, so JSON.stringify of it is its canonical JSON.
 */
export function guardDecisionOf(i: { guardBlocked: boolean; input: DecisionSummary; output: DecisionSummary }): unknown {
  const phase = (d: DecisionSummary) => ({
    blocks: d.blocks.map((b) => ({
      action: b.action,
      blockedContent: b.blockedContent,
      confidence: b.confidence,
      guardType: b.guardType,
      source: b.source,
    })),
    decision: d.decision,
    evaluations: d.evaluations.map((e) => ({ confidence: e.confidence, guardType: e.guardType, result: e.result, source: e.source })),
  });
  return { blocked: i.guardBlocked, input: phase(i.input), output: phase(i.output) };
}

/**
 * The checks of a config's chain, in order, as GuardEngine's constructor builds them (a test
 * holds the two equal): the built-in guards that are on, then each enabled template. Read from
 * the config alone, nothing compiled, so that the thread that serves HTTP can name the guards of
 * a task that a scoring thread could not finish.
 */
export function guardChain(config: EngineConfigInput): { guardType: GuardType; source: string; phases: readonly Phase[] }[] {
  const c = EngineConfig.parse(config);
  const chain: { guardType: GuardType; source: string; phases: readonly Phase[] }[] = [];
  if (c.guards.prompt_injection.enabled)
    chain.push({ guardType: "prompt_injection", source: "prompt_injection", phases: DEFAULT_PHASES.prompt_injection });
  if (c.guards.sensitive_data.enabled)
    chain.push({ guardType: "pii_detection", source: "sensitive_data", phases: DEFAULT_PHASES.pii_detection });
  for (const ref of c.guards.custom_templates) {
    const t = c.templates[ref.template_id];
    if (!ref.enabled || !t) continue;
    chain.push({ guardType: t.guardType, source: `template:${ref.template_id}`, phases: t.config.phases ?? DEFAULT_PHASES[t.guardType] });
  }
  return chain;
}

/**
 * What ingestion stores of a trace whose scoring could not finish (its task passed its deadline):
 * each guard of the chain, in each of its phases, with result "error", confidence 0 and the error;
 * no block, no eval (evalScore is that of no evals, 1, as for an app whose evals are all off), not
 * blocked. The audit's guard decision says the same: decision "error" per phase and the error.
 * One per trace of the task; they are equal, so the caller may share it.
 */
export function unscored(config: EngineConfigInput, error: string): ScoreResult {
  const chain = guardChain(config);
  const phase = (p: Phase) => chain.filter((g) => g.phases.includes(p));
  const evaluations = (["input", "output"] as const).flatMap((p) =>
    phase(p).map((g) => ({ guardType: g.guardType, result: "error", confidence: 0, phase: p, source: g.source, error })),
  );
  // canonical JSON: every object's keys in sorted order (as guardDecisionOf builds them)
  const decided = (p: Phase) => ({
    blocks: [],
    decision: "error",
    evaluations: phase(p).map((g) => ({ confidence: 0, error, guardType: g.guardType, result: "error", source: g.source })),
  });
  const evals: EvalResult[] = [];
  return {
    blocks: { input: [], output: [] },
    evals,
    evalScore: aggregateEvalScore(evals),
    guardBlocked: false,
    evaluationsJson: JSON.stringify(evaluations),
    decisionJson: JSON.stringify({ blocked: false, error, input: decided("input"), output: decided("output") }),
    guardError: error,
  };
}

/** Compiled engines by config version (LRU). Config versions are never reused. */
export class EngineCache {
  readonly #max: number;
  readonly #engines = new Map<number, GuardEngine>();

  constructor(max = 500) {
    this.#max = max;
  }

  async get(version: number, load: () => Promise<EngineConfigInput> | EngineConfigInput): Promise<GuardEngine> {
    const hit = this.#engines.get(version);
    if (hit) {
      this.#engines.delete(version);
      this.#engines.set(version, hit);
      return hit;
    }
    const engine = new GuardEngine(await load());
    if (this.#engines.size >= this.#max) this.#engines.delete(this.#engines.keys().next().value!);
    this.#engines.set(version, engine);
    return engine;
  }

  get size(): number {
    return this.#engines.size;
  }
}

/** What scores a batch, or checks one text: in-process, or a pool of worker threads. */
export interface Scorer {
  /**
   * The traces' scores, in order. A trace whose task passed its deadline (worker threads only)
   * is unscored(config, its error), not a failure of the call: its batch is still stored.
   */
  score(version: number, config: EngineConfigInput, traces: readonly ScoreInput[]): Promise<ScoreResult[]>;
  /** checkText with the engine of this config version; ScoringTimeoutError past the deadline */
  check(version: number, config: EngineConfigInput, text: string, phase: Phase): Promise<GuardCheckResult>;
  close(): Promise<void>;
}

/**
 * Scoring on the calling thread (BERTH_INGEST_WORKERS=0). Nothing can preempt it: a task has no
 * deadline here (BERTH_SCORING_TASK_TIMEOUT_MS needs worker threads), and a task that runs away
 * holds the API's event loop.
 */
export class InProcessScorer implements Scorer {
  readonly #engines = new EngineCache();

  async score(version: number, config: EngineConfigInput, traces: readonly ScoreInput[]): Promise<ScoreResult[]> {
    return await scoreTraces(await this.#engines.get(version, () => config), traces);
  }

  async check(version: number, config: EngineConfigInput, text: string, phase: Phase): Promise<GuardCheckResult> {
    return await checkText(await this.#engines.get(version, () => config), text, phase);
  }

  close(): Promise<void> {
    return Promise.resolve();
  }
}

/** A scoring thread's work: traces to score, or one text to check. */
export type ScoringTask = { id: number; version: number; config: EngineConfigInput } & (
  { traces: readonly ScoreInput[] } | { check: { text: string; phase: Phase } }
);
/** A scoring thread's answer to a task of the same id. */
export type ScoringReply =
  | { id: number; results: PackedScores }
  | { id: number; check: GuardCheckResult }
  /** `unavailable`: the error was a ClassifierUnavailableError, and this its reason */
  | { id: number; error: string; unavailable?: string };
/**
 * What a scoring thread posts once it is ready: its modules loaded and warmed up, and the
 * prompt-injection classifier loaded (BERTH_GUARD_MODEL_DIR), or why it could not be.
 */
export interface WorkerReady {
  ready: true;
  classifier: { state: "loaded"; sha256: string } | { state: "unavailable"; reason: string };
}
/** What a scoring thread posts: its answers, and once that it is ready. */
export type WorkerMessage = ScoringReply | WorkerReady;
type Answer = Exclude<ScoringReply, { error: string }>;

/**
 * A scoring task passed its deadline (BERTH_SCORING_TASK_TIMEOUT_MS): its worker was terminated
 * and replaced. Only the task the worker was running gets it; see WorkerPoolScorer.
 */
export class ScoringTimeoutError extends Error {
  readonly timeoutMs: number;
  constructor(timeoutMs: number) {
    super(`scoring timed out after ${timeoutMs} ms`);
    this.name = "ScoringTimeoutError";
    this.timeoutMs = timeoutMs;
  }
}

/** A task and the settling of its caller's promise; it moves to another worker when re-dispatched. */
interface Job {
  task: ScoringTask;
  resolve: (r: Answer) => void;
  reject: (e: Error) => void;
}
interface Slot {
  worker: Worker;
  /** the thread's model work (model-gate.ts): a cut waits for it to end before terminating */
  gate: Int32Array;
  dead: boolean;
  /** the thread has loaded its modules: a task's deadline runs from then on, not from the thread's start */
  ready: boolean;
  whenReady: Promise<void>;
  markReady: () => void;
  /** the tasks posted to this worker, oldest first: the worker takes them in that order */
  pending: Map<number, Job>;
  /** the deadline of the oldest pending task, and that task's id */
  timer?: NodeJS.Timeout;
  timed?: number;
}

/** Traces per task: a batch is split so that several workers share it. */
const MIN_CHUNK = 25;

export interface WorkerPoolOptions {
  size: number;
  log: Logger;
  /**
   * BERTH_SCORING_TASK_TIMEOUT_MS: how long a task may hold its worker, counted from when it is
   * the oldest task posted to that worker (the one the worker runs: earlier ones have answered)
   * and the worker is ready (a new thread takes a few hundred ms to load its modules).
   * Past it the worker is terminated and replaced, the task rejected with ScoringTimeoutError and
   * the tasks queued behind it re-dispatched. Unset, 0 or not finite: no deadline.
   */
  taskTimeoutMs?: number | undefined;
  /**
   * How long a new thread may take to post its WorkerReady (default 30 s; 0: no limit). A thread
   * that has not by then is terminated and replaced, and the tasks posted to it, which it never
   * started, go to the pool again: without it, a thread stuck loading would hold its tasks (and
   * the ingestion transactions waiting on them) for good, since task deadlines run only on ready
   * workers.
   */
  startTimeoutMs?: number | undefined;
  /**
   * The worker's module: scoring-worker.ts; tests give one that can be made to run away. It must
   * post a WorkerReady once loaded: no deadline runs on a worker before.
   */
  workerUrl?: URL;
}

const DEFAULT_START_TIMEOUT_MS = 30_000;

/**
 * Scoring in worker threads. Tasks go to the worker with the fewest in flight and each worker
 * takes its tasks in order. Each task has a deadline (taskTimeoutMs) once it is the oldest of its
 * worker's: a task that runs away (a bug, a pathological input, a future guard) is cut there. Its
 * worker is terminated (V8 stops JavaScript wherever it is) and replaced by a fresh thread; the
 * task is rejected with ScoringTimeoutError; the tasks queued behind it on that worker, which had
 * not answered, are re-dispatched to the pool (scoring is pure: a task that had started runs again
 * from the start), each with a deadline of its own once it is a worker's oldest. So one runaway
 * task costs one worker for one deadline, and the other workers keep serving meanwhile.
 *
 * A worker that crashes (an error or exit of the thread) is replaced too, but every task it held
 * is rejected: any of them may have crashed it.
 *
 * The oldest task is the running one because a worker runs one task at a time, except with the
 * classifier on: a task awaits the model's inference and the worker starts the next meanwhile. A
 * younger task that runs away there gets the oldest cut first (blamed wrongly: its traces are
 * recorded with the error) and is cut itself once it is the oldest. Documented, not prevented.
 */
export class WorkerPoolScorer implements Scorer {
  readonly #size: number;
  readonly #log: Logger;
  readonly #timeoutMs: number | undefined;
  readonly #startTimeoutMs: number | undefined;
  readonly #workerUrl: URL;
  readonly #slots: Slot[] = [];
  #next = 1;
  #closed = false;

  constructor(opts: WorkerPoolOptions) {
    this.#size = opts.size;
    this.#log = opts.log;
    const t = opts.taskTimeoutMs;
    // setTimeout fires at once past 2^31 - 1 ms: such a deadline is none
    this.#timeoutMs = t !== undefined && Number.isFinite(t) && t > 0 && t < 2 ** 31 ? t : undefined;
    const st = opts.startTimeoutMs ?? DEFAULT_START_TIMEOUT_MS;
    this.#startTimeoutMs = Number.isFinite(st) && st > 0 && st < 2 ** 31 ? st : undefined;
    this.#workerUrl = opts.workerUrl ?? new URL("./scoring-worker.ts", import.meta.url);
    for (let i = 0; i < opts.size; i++) this.#slots.push(this.#spawn());
  }

  /** Resolves once every worker (as of now) has loaded and warmed up. */
  async ready(): Promise<void> {
    await Promise.all(this.#slots.map((s) => s.whenReady));
  }

  /** The worker threads' ids, in slot order (tests: a replaced worker has a new one). */
  get threadIds(): number[] {
    return this.#slots.map((s) => s.worker.threadId);
  }

  #spawn(): Slot {
    const modelGate = modelGateBuffer();
    const worker = new Worker(this.#workerUrl, { workerData: { modelGate } });
    worker.unref();
    const { promise: whenReady, resolve: markReady } = Promise.withResolvers<void>();
    const slot: Slot = { worker, gate: new Int32Array(modelGate), dead: false, ready: false, whenReady, markReady, pending: new Map() };
    let starting: NodeJS.Timeout | undefined;
    if (this.#startTimeoutMs !== undefined) {
      starting = setTimeout(() => this.#notStarted(slot), this.#startTimeoutMs);
      starting.unref();
    }
    worker.on("message", (m: WorkerMessage) => {
      if ("ready" in m) {
        clearTimeout(starting);
        const { classifier } = m;
        if (classifier.state === "unavailable")
          this.#log.warn(
            { threadId: worker.threadId, reason: classifier.reason },
            "a scoring worker could not load the prompt-injection classifier: prompts whose config runs it fail until it can",
          );
        else this.#log.info({ threadId: worker.threadId, classifier }, "a scoring worker is ready");
        slot.ready = true;
        slot.markReady();
        this.#arm(slot);
        return;
      }
      const job = this.#take(slot, m.id);
      if (!job) return;
      if ("error" in m)
        job.reject(m.unavailable === undefined ? new Error(`scoring failed: ${m.error}`) : new ClassifierUnavailableError(m.unavailable));
      else job.resolve(m);
    });
    const fail = (err: Error) => {
      clearTimeout(starting);
      if (slot.dead) return;
      const jobs = this.#retire(slot);
      for (const j of jobs) j.reject(err);
      if (this.#closed) return;
      this.#log.error({ err }, "a scoring worker died; starting another");
      this.#replace(slot);
    };
    worker.on("error", fail);
    worker.on("exit", (code) => {
      if (!this.#closed) fail(new Error(`scoring worker exited with code ${code}`));
    });
    return slot;
  }

  /** Removes a task from its worker's, once answered; the next oldest then runs to its own deadline. */
  #take(slot: Slot, id: number): Job | undefined {
    const job = slot.pending.get(id);
    if (!job) return undefined;
    slot.pending.delete(id);
    if (slot.pending.size === 0) slot.worker.unref();
    this.#arm(slot);
    return job;
  }

  /** Marks a worker dead and takes its tasks, oldest first. */
  #retire(slot: Slot): Job[] {
    slot.dead = true;
    clearTimeout(slot.timer);
    slot.timer = undefined;
    const jobs = [...slot.pending.values()];
    slot.pending.clear();
    slot.worker.unref();
    return jobs;
  }

  #replace(slot: Slot): void {
    const i = this.#slots.indexOf(slot);
    if (i >= 0) this.#slots[i] = this.#spawn();
  }

  /** Arms the deadline of the worker's oldest task, unless it is already armed for it. */
  #arm(slot: Slot): void {
    if (this.#timeoutMs === undefined || slot.dead || !slot.ready) return;
    const oldest = slot.pending.keys().next();
    if (oldest.done) {
      clearTimeout(slot.timer);
      slot.timer = slot.timed = undefined;
      return;
    }
    if (slot.timer && slot.timed === oldest.value) return;
    clearTimeout(slot.timer);
    const id = oldest.value;
    slot.timed = id;
    slot.timer = setTimeout(() => this.#expire(slot, id), this.#timeoutMs);
    slot.timer.unref(); // the worker's ref keeps the process alive while work is in flight
  }

  /** A new thread did not say it is ready in time: a fresh one in its place, its tasks (never started) dispatched again. */
  #notStarted(slot: Slot): void {
    if (slot.dead || slot.ready || this.#closed) return;
    const jobs = this.#cut(slot);
    this.#log.error(
      { startTimeoutMs: this.#startTimeoutMs, threadId: slot.worker.threadId, requeued: jobs.length },
      "a scoring worker did not start in time; replacing it",
    );
    for (const j of jobs) this.#dispatch(j);
  }

  /** A task passed its deadline: a fresh worker for its own, the task cut, the ones behind it re-dispatched. */
  #expire(slot: Slot, id: number): void {
    if (slot.dead || this.#closed || slot.timed !== id || !slot.pending.has(id)) return;
    const jobs = this.#cut(slot);
    this.#log.warn(
      { timeoutMs: this.#timeoutMs, threadId: slot.worker.threadId, requeued: jobs.length - 1 },
      "a scoring task passed its deadline; replacing its worker",
    );
    for (const j of jobs) {
      if (j.task.id === id) j.reject(new ScoringTimeoutError(this.#timeoutMs!));
      else this.#dispatch(j);
    }
  }

  /**
   * Terminates a worker that is stuck and puts a fresh one in its slot; returns the tasks it held,
   * oldest first. The termination waits for model work in flight (model-gate.ts: terminating a
   * thread in the middle of one aborts the process); the tasks are handed back at once.
   */
  #cut(slot: Slot): Job[] {
    const jobs = this.#retire(slot);
    slot.markReady(); // nobody waits on a thread that is gone
    this.#replace(slot);
    void stopModelWork(slot.gate).then((ended) => {
      if (!ended) this.#log.warn({ threadId: slot.worker.threadId }, "a cut scoring worker's model work did not end; terminating it");
      return slot.worker.terminate();
    });
    return jobs;
  }

  async score(version: number, config: EngineConfigInput, traces: readonly ScoreInput[]): Promise<ScoreResult[]> {
    if (this.#closed) throw new Error("the scoring pool is closed");
    const chunk = Math.max(MIN_CHUNK, Math.ceil(traces.length / this.#size));
    const parts: Promise<ScoreResult[]>[] = [];
    for (let at = 0; at < traces.length; at += chunk)
      parts.push(
        this.#run({ id: this.#next++, version, config, traces: traces.slice(at, at + chunk) }).then(
          (r) => unpackScores((r as { results: PackedScores }).results),
          // the task's traces are stored with the guards' error: the batch is not lost for them
          (err: unknown) => {
            if (!(err instanceof ScoringTimeoutError)) throw err;
            const failed = unscored(config, err.message);
            return Array.from({ length: Math.min(chunk, traces.length - at) }, () => failed);
          },
        ),
      );
    return (await Promise.all(parts)).flat();
  }

  async check(version: number, config: EngineConfigInput, text: string, phase: Phase): Promise<GuardCheckResult> {
    if (this.#closed) throw new Error("the scoring pool is closed");
    const r = await this.#run({ id: this.#next++, version, config, check: { text, phase } });
    return (r as { check: GuardCheckResult }).check;
  }

  #run(task: ScoringTask): Promise<Answer> {
    return new Promise((resolve, reject) => this.#dispatch({ task, resolve, reject }));
  }

  /**
   * Posts a task to the worker with the fewest in flight, a starting one (a replacement loads for
   * a few hundred ms) counted as one more, so that a task goes to a ready worker when one is free.
   */
  #dispatch(job: Job): void {
    if (this.#closed) {
      job.reject(new Error("the scoring pool is closed"));
      return;
    }
    const load = (s: Slot) => s.pending.size + (s.ready ? 0 : 1);
    const slot = this.#slots.reduce((a, b) => (load(b) < load(a) ? b : a));
    slot.pending.set(job.task.id, job);
    slot.worker.ref(); // keep the process alive while work is in flight
    slot.worker.postMessage(job.task);
    this.#arm(slot);
  }

  async close(): Promise<void> {
    this.#closed = true;
    for (const s of this.#slots) {
      clearTimeout(s.timer);
      s.markReady(); // nobody waits on a closed pool
    }
    await Promise.all(
      this.#slots.map(async (s) => {
        await stopModelWork(s.gate);
        await s.worker.terminate();
      }),
    );
  }
}
