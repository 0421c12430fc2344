// A scoring worker thread (scoring.ts WorkerPoolScorer): compiles each config version once and
// scores the traces it is sent, or checks the one text. No I/O besides its port to the main thread.
import { parentPort, workerData } from "node:worker_threads";
import { GuardEngine, sharedInjectionClassifier, type TextClassifier } from "../../../toolkit/src/index.ts";
import { asModelWork } from "./model-gate.ts";
import {
  checkText,
  ClassifierUnavailableError,
  EngineCache,
  packScores,
  scoreTraces,
  type ScoringTask,
  type WorkerMessage,
  type WorkerReady,
} from "./scoring.ts";

const engines = new EngineCache(100);

// the pool's word for this thread's model work (model-gate.ts): loading and scoring are marked, so
// that a cut waits for them instead of aborting the process
const gate = new Int32Array((workerData as { modelGate?: SharedArrayBuffer } | undefined)?.modelGate ?? new SharedArrayBuffer(4));
export const gatedClassifier = async (): Promise<TextClassifier> => {
  const c = await asModelWork(gate, sharedInjectionClassifier);
  return {
    info: c.info,
    score: (text) => asModelWork(gate, () => c.score(text)),
    scores: (text, floors) => asModelWork(gate, () => c.scores(text, floors)),
    close: () => c.close(),
  };
};

// Warm: the first scoring on a thread builds the toxicity word matcher and compiles the detectors'
// code (about 0.15 s), and the prompt-injection classifier (BERTH_GUARD_MODEL_DIR) is loaded and run
// once (0.2 s on a quiet core, seconds on a loaded one). That is the thread's start, not any task's:
// loaded on a thread's first prompt instead, the model counts against that task's deadline, and a
// replacement thread on a loaded node could be cut while it loads, and its replacement too. A model
// that cannot load is reported, and each prompt that needs it tries again (sharedInjectionClassifier
// keeps no failure). Then ready: the pool counts a task's deadline from now on, so no task runs
// before. A task posted to a starting thread waits for `ready`: one that ran away during the load
// would keep the load's callback from ever running and the thread from ever being ready, to be cut
// at its start deadline and its task sent to the next thread, which it would stop the same way.
async function warm(): Promise<WorkerReady["classifier"]> {
  await scoreTraces(new GuardEngine({}), [{ input: "warm", output: "warm", latency: 0, model: "" }]);
  try {
    const model = await gatedClassifier();
    await model.score("warm");
    return { state: "loaded", sha256: model.info.sha256 };
  } catch (err) {
    return { state: "unavailable", reason: err instanceof Error ? err.message : String(err) };
  }
}
/** Resolves once the thread is warm and has told the pool; no task runs before. */
const ready: Promise<void> = warm().then((classifier) => parentPort!.postMessage({ ready: true, classifier } satisfies WorkerMessage));

/** Runs one task and posts its answer (or its error). */
function run(task: ScoringTask): void {
  const reply = (m: WorkerMessage) => parentPort!.postMessage(m);
  void engines
    .get(task.version, () => task.config)
    .then(async (engine) =>
      reply(
        "check" in task
          ? { id: task.id, check: await checkText(engine, task.check.text, task.check.phase, gatedClassifier) }
          : { id: task.id, results: packScores(await scoreTraces(engine, task.traces, gatedClassifier)) },
      ),
    )
    .catch((err: unknown) =>
      reply({
        id: task.id,
        error: err instanceof Error ? err.message : String(err),
        ...(err instanceof ClassifierUnavailableError ? { unavailable: err.reason } : {}),
      }),
    );
}

// Tasks posted before the thread is ready wait, and then start in the order they came, each in a
// turn of the event loop of its own, as tasks that come one message at a time do: started together,
// their awaits would interleave them, and one that runs away would hold the answer of an older one,
// which its deadline would then cut in its place. Tasks that come meanwhile queue behind them.
const early: ScoringTask[] = [];
let starting = true;
parentPort!.on("message", (task: ScoringTask) => (starting ? early.push(task) : run(task)));
function startEarly(): void {
  const task = early.shift();
  if (task === undefined) {
    starting = false;
    return;
  }
  run(task);
  setImmediate(startEarly);
}
void ready.then(startEarly);
