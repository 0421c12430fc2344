// WorkQueue: client-go workqueue semantics (dirty + processing sets), delays and backoff.
import test from "ava";
import { WorkQueue } from "../../../operator/runtime/queue.ts";

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Resolves with the next key, or "timeout" when none comes within `ms`. */
async function getWithin(q: WorkQueue, ms: number): Promise<string | undefined> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<string>((r) => {
    timer = setTimeout(() => r("timeout"), ms);
  });
  const key = await Promise.race([q.get(), timeout]);
  clearTimeout(timer);
  return key;
}

test("add dedupes keys that are waiting", async (t) => {
  const q = new WorkQueue();
  q.add("a");
  q.add("b");
  q.add("a");
  q.add("a");
  t.is(q.length, 2);
  t.is(await q.get(), "a");
  t.is(await q.get(), "b");
  t.is(q.length, 0);
  q.shutDown();
});

test("a key added while processing is not handed out until done, then runs again once", async (t) => {
  const q = new WorkQueue();
  q.add("a");
  const first = await q.get();
  t.is(first, "a");
  q.add("a");
  q.add("a");
  t.is(q.length, 0, "the key being processed is not in line");
  const waiting = q.get();
  t.is(await Promise.race([waiting, sleep(50).then(() => "still waiting")]), "still waiting", "never handed out while processing");
  q.done("a");
  t.is(await waiting, "a", "runs again after done");
  q.done("a");
  t.is(await getWithin(q, 50), "timeout", "the two adds during processing collapse into one run");
  q.shutDown();
});

test("concurrent workers never hold the same key at once", async (t) => {
  const q = new WorkQueue();
  const active = new Set<string>();
  let overlaps = 0;
  let runs = 0;
  const worker = async () => {
    for (let key = await q.get(); key !== undefined; key = await q.get()) {
      if (active.has(key)) overlaps++;
      active.add(key);
      runs++;
      await sleep(1);
      if (runs < 200) q.add(key); // re-added while processing: must wait for done()
      await sleep(1);
      active.delete(key);
      q.done(key);
    }
  };
  const workers = Array.from({ length: 8 }, worker);
  for (const k of ["a", "b", "c"]) q.add(k);
  while (runs < 200) await sleep(5);
  q.shutDown();
  await Promise.all(workers);
  t.is(overlaps, 0);
  t.true(runs >= 200);
});

test("addRateLimited backs off exponentially, caps, and forget resets", async (t) => {
  const q = new WorkQueue({ baseDelayMs: 20, maxDelayMs: 80 });
  const delays: number[] = [];
  for (let i = 0; i < 5; i++) {
    const start = Date.now();
    q.addRateLimited("a");
    const key = await q.get();
    delays.push(Date.now() - start);
    t.is(key, "a");
    q.done("a");
  }
  t.is(q.numRequeues("a"), 5);
  // 20, 40, 80, 80 (cap), 80: each at least its delay, growing until the cap.
  const expected = [20, 40, 80, 80, 80];
  delays.forEach((d, i) => t.true(d >= expected[i]! - 2 && d < expected[i]! + 60, `retry ${i}: ${d} ms, expected about ${expected[i]}`));
  q.forget("a");
  t.is(q.numRequeues("a"), 0);
  const start = Date.now();
  q.addRateLimited("a");
  await q.get();
  t.true(Date.now() - start < 60, "after forget the delay is the base again");
  q.shutDown();
});

test("addAfter delays a key and keeps the earliest schedule", async (t) => {
  const q = new WorkQueue();
  const start = Date.now();
  q.addAfter("a", 300);
  q.addAfter("a", 60);
  q.addAfter("a", 500);
  t.is(q.length, 0);
  t.is(await q.get(), "a");
  const took = Date.now() - start;
  t.true(took >= 55 && took < 250, `took ${took} ms`);
  q.done("a");
  t.is(await getWithin(q, 400), "timeout", "the later schedules were merged into the earliest");
  q.shutDown();
});

test("shutDown releases waiting getters and drops delayed keys", async (t) => {
  const q = new WorkQueue();
  const getters = [q.get(), q.get(), q.get()];
  q.addAfter("late", 20);
  q.shutDown();
  t.deepEqual(await Promise.all(getters), [undefined, undefined, undefined]);
  await sleep(40);
  q.add("b");
  t.is(await q.get(), undefined);
  t.is(q.length, 0);
});

test("hooks report adds after dedupe and the depth", async (t) => {
  let adds = 0;
  let depth = -1;
  const q = new WorkQueue({
    onAdd: () => adds++,
    onDepth: (n) => {
      depth = n;
    },
  });
  q.add("a");
  q.add("a");
  q.add("b");
  t.is(adds, 2);
  t.is(depth, 2);
  await q.get();
  t.is(depth, 1);
  q.shutDown();
  t.is(depth, 0);
});
