// Benchmark of the toolkit's LangChain wrapper, run by hand (no cluster, no database):
//   node hack/bench/toolkit.ts [--iterations 5000] [--warmup 500] [--stream-iterations 500]
// The overhead withGovernance adds to a LangChain call: the same FakeListChatModel called bare and
// wrapped, alternately, in the same run. The wrapped calls run the guards before and after the call
// (the built-in prompt_injection and sensitive_data guards plus a redacting PII template and a
// toxicity template) and submit a trace to the background queue (an in-process transport that
// accepts every batch, so the sending runs in this process too, as it would in a service).
// Scenarios:
//   invoke   a 1 KB prompt, a 400-character answer
//   stream   the same call streamed (FakeListChatModel: one character per chunk, 400 chunks; windowed output guards)
// The loop yields to the event loop between calls (as a service does while it waits for the
// network), so the queue sends between calls rather than inside one. Prints p50/p90/p99/max of the
// bare and wrapped calls, in wall time and in CPU time of the process (which leaves out the time
// other processes hold the core), the difference, and a comparison line against the goal (under
// 1 ms added at p99 for invoke).
import { availableParallelism, loadavg } from "node:os";
import { parseArgs } from "node:util";
import { FakeListChatModel } from "@langchain/core/utils/testing";
import type { EngineConfigInput, SendOutcome } from "../../toolkit/src/index.ts";
import { Governance } from "../../toolkit/src/index.ts";
import { withGovernance } from "../../toolkit/src/langchain/index.ts";

const { values } = parseArgs({
  options: {
    iterations: { type: "string", default: "5000" },
    warmup: { type: "string", default: "500" },
    "stream-iterations": { type: "string", default: "500" },
  },
});
const N = Number(values.iterations);
const WARMUP = Number(values.warmup);
const NS = Number(values["stream-iterations"]);
const GOAL_P99_MS = 1;

const engine: EngineConfigInput = {
  guards: {
    prompt_injection: { enabled: true, threshold: 0.7 },
    sensitive_data: { enabled: true, threshold: 0.5 },
    custom_templates: [
      { template_id: "pii", template_name: "Redact PII", enabled: true, threshold: 0.5 },
      { template_id: "tox", template_name: "Toxicity", enabled: true, threshold: 0.6 },
    ],
  },
  templates: {
    pii: { name: "Redact PII", guardType: "pii_detection", config: { action: "redact", allowlist: ["support@example.com"] } },
    tox: { name: "Toxicity", guardType: "toxicity", config: { sensitivity: "medium" } },
  },
};

function toLength(base: string, n: number): string {
  let s = base;
  while (s.length < n) s += " " + base;
  return s.slice(0, n);
}

const prompt = toLength(
  "Hello, I placed an order last Tuesday for a pair of running shoes and a rain jacket, and the delivery was supposed to arrive on Friday. " +
    "The tracking page still says the parcel is being prepared, which seems odd after almost a week. Could you check whether the shipping " +
    "label was created and whether the payment went through? I would also like to know if I can change the delivery address to my office.",
  1024,
);
const answer = toLength(
  "Thanks for your patience. Your parcel left our warehouse this morning and should arrive within two business days. " +
    "You can change the delivery address from the order page until the courier picks it up. The payment went through on Tuesday.",
  400,
);

let batches = 0;
let traces = 0;
const transport = {
  send(body: string, count: number): Promise<SendOutcome> {
    batches++;
    traces += count;
    void body;
    return Promise.resolve({ kind: "accepted", results: [] });
  },
  config: () => Promise.resolve({ ok: true as const, config: { project: "bench", observability: {}, engine } }),
};
const governance = new Governance({ connection: `govdb://gov_sk_${"b".repeat(43)}@127.0.0.1:1/bench`, env: {}, transport, lingerMs: 50 });
await governance.start();

const bare = new FakeListChatModel({ responses: [answer] });
const wrapped = withGovernance(new FakeListChatModel({ responses: [answer] }), { governance });

function percentile(sorted: number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!;
}

interface Stats {
  p50: number;
  p90: number;
  p99: number;
  max: number;
}
function stats(times: number[]): Stats {
  const s = [...times].sort((a, b) => a - b);
  return { p50: percentile(s, 50), p90: percentile(s, 90), p99: percentile(s, 99), max: s[s.length - 1]! };
}

interface Sample {
  wall: number;
  cpu: number;
}

async function timed(fn: () => Promise<void>): Promise<Sample> {
  const c0 = process.cpuUsage();
  const t0 = performance.now();
  await fn();
  const wall = performance.now() - t0;
  const c = process.cpuUsage(c0);
  return { wall, cpu: (c.user + c.system) / 1000 };
}

const invoke = (m: FakeListChatModel) =>
  timed(async () => {
    await m.invoke(prompt);
  });

const stream = (m: FakeListChatModel) =>
  timed(async () => {
    let n = 0;
    for await (const c of await m.stream(prompt)) n += c.text.length;
    if (n !== answer.length) throw new Error(`streamed ${n} of ${answer.length} characters`);
  });

/** A turn of the event loop, as a service gets between two LLM calls (the queue sends then). */
const turn = () => new Promise<void>((r) => setImmediate(r));

/** Bare and wrapped alternately, so that both see the same machine. */
async function compare(name: string, iterations: number, warmup: number, run: (m: FakeListChatModel) => Promise<Sample>) {
  for (let i = 0; i < warmup; i++) {
    await run(bare);
    await run(wrapped);
    await turn();
  }
  const a: Sample[] = [];
  const b: Sample[] = [];
  for (let i = 0; i < iterations; i++) {
    if (i % 2 === 0) {
      a.push(await run(bare));
      b.push(await run(wrapped));
    } else {
      b.push(await run(wrapped));
      a.push(await run(bare));
    }
    await turn();
  }
  return {
    name,
    bare: { wall: stats(a.map((x) => x.wall)), cpu: stats(a.map((x) => x.cpu)) },
    wrapped: { wall: stats(b.map((x) => x.wall)), cpu: stats(b.map((x) => x.cpu)) },
  };
}

const results = [await compare("invoke", N, WARMUP, invoke), await compare("stream", NS, Math.min(WARMUP, 50), stream)];
await governance.flush(10_000);

const ms = (x: number) => x.toFixed(3).padStart(7);
console.log(
  `toolkit benchmark: ${N} invoke and ${NS} stream pairs after warm-up, prompt ${prompt.length} chars, answer ${answer.length} chars, node ${process.version}`,
);
console.log(
  `load average ${loadavg()
    .map((l) => l.toFixed(2))
    .join(
      " ",
    )} on ${availableParallelism()} cores; traces delivered ${traces} in ${batches} batches; queue ${JSON.stringify(governance.stats())}`,
);
console.log("scenario      | bare p50   p90     p99     max   | wrapped p50 p90   p99     max   | added p50  p99");
for (const r of results) {
  for (const what of ["wall", "cpu"] as const) {
    const x = r.bare[what];
    const y = r.wrapped[what];
    console.log(
      `${`${r.name} ${what}`.padEnd(13)} | ${ms(x.p50)} ${ms(x.p90)} ${ms(x.p99)} ${ms(x.max)} | ${ms(y.p50)} ${ms(y.p90)} ${ms(y.p99)} ${ms(y.max)} | ${ms(y.p50 - x.p50)} ${ms(y.p99 - x.p99)}`,
    );
  }
}
const inv = results[0]!;
const verdict = (what: "wall" | "cpu") => {
  const added = inv.wrapped[what].p99 - inv.bare[what].p99;
  return `${what} ${added.toFixed(3)} ms: ${added < GOAL_P99_MS ? `MET (${(GOAL_P99_MS / Math.max(added, 1e-3)).toFixed(1)}x headroom)` : `MISSED (${(added / GOAL_P99_MS).toFixed(1)}x over)`}`;
};
console.log(
  `\ncomparison (invoke, guards on, submission in the background), added at p99 vs goal < ${GOAL_P99_MS} ms: ${verdict("cpu")}; ${verdict("wall")}`,
);
await governance.shutdown();
