// A scoring worker thread (scoring.ts WorkerPoolScorer): compiles each config version once and
// scores the traces it is sent. No I/O besides its port to the main thread.
import { parentPort } from "node:worker_threads";
import type { EngineConfigInput } from "../../../toolkit/src/index.ts";
import { EngineCache, packScores, scoreTraces, type ScoreInput } from "./scoring.ts";

const engines = new EngineCache(100);

parentPort!.on("message", (task: { id: number; version: number; config: EngineConfigInput; traces: ScoreInput[] }) => {
  void engines
    .get(task.version, () => task.config)
    .then(async (engine) => parentPort!.postMessage({ id: task.id, results: packScores(await scoreTraces(engine, task.traces)) }))
    .catch((err: unknown) => parentPort!.postMessage({ id: task.id, error: err instanceof Error ? err.message : String(err) }));
});
