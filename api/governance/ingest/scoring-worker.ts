// A scoring worker thread (scoring.ts WorkerPoolScorer): compiles each config version once and
// scores the traces it is sent, or checks the one text. No I/O besides its port to the main thread.
import { parentPort } from "node:worker_threads";
import { checkText, EngineCache, packScores, scoreTraces, type ScoringReply, type ScoringTask } from "./scoring.ts";

const engines = new EngineCache(100);

parentPort!.on("message", (task: ScoringTask) => {
  const reply = (m: ScoringReply) => parentPort!.postMessage(m);
  void engines
    .get(task.version, () => task.config)
    .then(async (engine) =>
      reply(
        "check" in task
          ? { id: task.id, check: await checkText(engine, task.check.text, task.check.phase) }
          : { id: task.id, results: packScores(await scoreTraces(engine, task.traces)) },
      ),
    )
    .catch((err: unknown) => reply({ id: task.id, error: err instanceof Error ? err.message : String(err) }));
});
