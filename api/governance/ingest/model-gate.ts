// The model work of a scoring thread, and its cut (WorkerPoolScorer's deadline). onnxruntime-node
// runs a model (and loads one) on a thread of libuv's pool and then calls back into the JavaScript
// thread that asked: a worker terminated while such work is in flight takes the whole process down
// with it (SIGABRT, "terminate called after throwing an instance of 'Napi::Error'"), every app's
// requests with it. So a scoring thread marks its model work in a word of shared memory, and the
// pool, before it terminates a worker, tells it to start no more and waits for the work in flight
// to end (one score: milliseconds, at most a few hundred for a 1 MiB prompt). JavaScript that runs
// away is not model work: its worker is terminated at once, as before.

// the word: how many model works are in flight (a thread interleaves tasks while the model scores,
// so several may be), and a bit that says the thread is being stopped
const STOPPING = 1 << 30;
const IN_FLIGHT = STOPPING - 1;

/** The shared word of a new worker (passed in its workerData as `modelGate`). */
export function modelGateBuffer(): SharedArrayBuffer {
  return new SharedArrayBuffer(4);
}

/** In the scoring thread: runs `work` as model work, or refuses it once the thread is being stopped. */
export async function asModelWork<T>(gate: Int32Array, work: () => Promise<T>): Promise<T> {
  for (;;) {
    const word = Atomics.load(gate, 0);
    if (word & STOPPING) throw new Error("the scoring thread is being stopped");
    if (Atomics.compareExchange(gate, 0, word, word + 1) === word) break;
  }
  try {
    return await work();
  } finally {
    Atomics.sub(gate, 0, 1);
  }
}

/**
 * How long the pool waits for a cut thread's model work. A score ends in milliseconds (a few hundred
 * for 1 MiB); work that has not ended by then never will: the thread is stuck in JavaScript (a
 * runaway task posted while the model loaded), so the callback that ends the work cannot run.
 */
export const MODEL_WORK_WAIT_MS = 2000;

/**
 * In the pool: tells the thread to start no more model work; resolves once none is in flight (true:
 * it may be terminated safely), or after MODEL_WORK_WAIT_MS with false (it is terminated all the
 * same: a thread that never yields cannot be left running).
 */
export async function stopModelWork(gate: Int32Array, waitMs = MODEL_WORK_WAIT_MS): Promise<boolean> {
  Atomics.or(gate, 0, STOPPING);
  const until = Date.now() + waitMs;
  while (Atomics.load(gate, 0) & IN_FLIGHT) {
    if (Date.now() >= until) return false;
    await new Promise((resolve) => setTimeout(resolve, 1));
  }
  return true;
}
