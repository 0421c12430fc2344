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
} from "./scoring.ts";

const engines = new EngineCache(100);

// the pool's word for this thread's model work (model-gate.ts): loading and scoring are marked, so
// that a cut waits for them instead of aborting the process
const gate = new Int32Array((workerData as { modelGate?: SharedArrayBuffer } | undefined)?.modelGate ?? new SharedArrayBuffer(4));
export const gatedClassifier = async (): Promise<TextClassifier> => {
  const c = await asModelWork(gate, sharedInjectionClassifier);
  return { info: c.info, score: (text) => asModelWork(gate, () => c.score(text)), close: () => c.close() };
};

parentPort!.on("message", (task: ScoringTask) => {
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
});

// Warm: the first scoring on a thread builds the toxicity word matcher and compiles the detectors'
// code (about 0.15 s), which is the thread's start, not any task's. Then ready: the pool counts a
// task's deadline from now on.
void scoreTraces(new GuardEngine({}), [{ input: "warm", output: "warm", latency: 0, model: "" }]).finally(() =>
  parentPort!.postMessage({ ready: true } satisfies WorkerMessage),
);
