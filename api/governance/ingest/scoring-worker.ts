// A scoring worker thread (scoring.ts WorkerPoolScorer): compiles each config version once and
// scores the traces it is sent, or checks the one text. No I/O besides its port to the main thread.
import { parentPort } from "node:worker_threads";
import { GuardEngine } from "../../../toolkit/src/index.ts";
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

parentPort!.on("message", (task: ScoringTask) => {
  const reply = (m: WorkerMessage) => parentPort!.postMessage(m);
  void engines
    .get(task.version, () => task.config)
    .then(async (engine) =>
      reply(
        "check" in task
          ? { id: task.id, check: await checkText(engine, task.check.text, task.check.phase) }
          : { id: task.id, results: packScores(await scoreTraces(engine, task.traces)) },
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
