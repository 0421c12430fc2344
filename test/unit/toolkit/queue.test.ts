// The trace sender (toolkit/src/client/queue.ts) with an injected transport and clock: batching,
// backoff with jitter, Retry-After, what is and is not retried, idempotent retries, the memory
// bound, flush and shutdown. Also the HTTP transport's reading of answers, against a real server.
import test from "ava";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import type { Clock, GovernanceLogger, SendOutcome, TraceRecord } from "../../../toolkit/src/index.ts";
import { backoffDelay, Governance, HttpTransport, parseConnection, parseRetryAfter, TraceQueue } from "../../../toolkit/src/index.ts";

/** A clock that moves only when told to; timers fire in order. */
class FakeClock implements Clock {
  t = 1_000_000;
  #timers: { at: number; fn: () => void; seq: number }[] = [];
  #seq = 0;

  now(): number {
    return this.t;
  }

  timer(fn: () => void, ms: number): () => void {
    const entry = { at: this.t + ms, fn, seq: this.#seq++ };
    this.#timers.push(entry);
    return () => {
      this.#timers = this.#timers.filter((e) => e !== entry);
    };
  }

  /** the time of the next timer, if any */
  get next(): number | undefined {
    return this.#timers.reduce<number | undefined>((m, e) => (m === undefined || e.at < m ? e.at : m), undefined);
  }

  /** Moves time forward by `ms`, firing every timer due on the way and letting promises settle. */
  async advance(ms: number): Promise<void> {
    const end = this.t + ms;
    await settle();
    for (;;) {
      const due = this.#timers.filter((e) => e.at <= end).sort((a, b) => a.at - b.at || a.seq - b.seq)[0];
      if (!due) break;
      this.t = due.at;
      this.#timers = this.#timers.filter((e) => e !== due);
      due.fn();
      await settle();
    }
    this.t = end;
    await settle();
  }
}

async function settle(): Promise<void> {
  for (let i = 0; i < 20; i++) await new Promise<void>((r) => setImmediate(r));
}

interface Sent {
  at: number;
  ids: string[];
  bytes: number;
}

/** A transport that answers from a script (default: every trace created) and records what it got. */
class ScriptedTransport {
  sent: Sent[] = [];
  stored = new Set<string>();
  script: ((ids: string[]) => SendOutcome | "store-then-fail")[] = [];
  readonly clock: FakeClock;
  constructor(clock: FakeClock) {
    this.clock = clock;
  }

  send(body: string): Promise<SendOutcome> {
    const ids = (JSON.parse(body) as { traces: TraceRecord[] }).traces.map((t) => t.traceId);
    this.sent.push({ at: this.clock.now(), ids, bytes: Buffer.byteLength(body) });
    const step = this.script.shift();
    const outcome = step ? step(ids) : "store";
    if (outcome === "store-then-fail") {
      // stored, but the answer is lost: the client sees a network error
      ids.forEach((id) => this.stored.add(id));
      return Promise.resolve({ kind: "retry", error: "network error: ECONNRESET" });
    }
    if (outcome !== "store") return Promise.resolve(outcome);
    return Promise.resolve({
      kind: "accepted",
      results: ids.map((id) => {
        const dup = this.stored.has(id);
        this.stored.add(id);
        return { traceId: id, status: dup ? ("duplicate" as const) : ("created" as const) };
      }),
    });
  }
}

class Warnings implements GovernanceLogger {
  lines: { message: string; details: Record<string, unknown> }[] = [];
  warn(message: string, details: Record<string, unknown>): void {
    this.lines.push({ message, details });
  }
  of(kind: string) {
    return this.lines.filter((l) => l.details.kind === kind);
  }
}

let n = 0;
function record(extra: Partial<TraceRecord> = {}): TraceRecord {
  n++;
  return {
    traceId: `00000000-0000-4000-8000-${String(n).padStart(12, "0")}`,
    input: "What is the capital of France?",
    output: "Paris.",
    model: "gpt-4o-mini",
    latency: 120,
    tokens: { prompt: 7, completion: 2, total: 9 },
    timestamp: "2026-11-21T21:20:00.000Z",
    ...extra,
  };
}

function setup(opts: Partial<ConstructorParameters<typeof TraceQueue>[0]> = {}) {
  const clock = new FakeClock();
  const transport = new ScriptedTransport(clock);
  const warnings = new Warnings();
  const queue = new TraceQueue({ transport, clock, logger: warnings, random: () => 0.5, ...opts });
  return { clock, transport, warnings, queue };
}

test("traces wait up to lingerMs for a batch, then go in one request", async (t) => {
  const { clock, transport, queue } = setup({ lingerMs: 250 });
  const ids = [record(), record(), record()].map((r) => (queue.enqueue(r), r.traceId));
  await clock.advance(249);
  t.is(transport.sent.length, 0, "nothing before the linger");
  await clock.advance(1);
  t.deepEqual(
    transport.sent.map((s) => s.ids),
    [ids],
  );
  t.like(queue.stats(), { queued: 0, submitted: 3, sent: 3, duplicates: 0, rejected: 0, dropped: 0, retries: 0 });
});

test("a full batch goes at once; batches hold at most 500 traces", async (t) => {
  const { clock, transport, queue } = setup({ lingerMs: 10_000 });
  for (let i = 0; i < 1200; i++) queue.enqueue(record());
  await clock.advance(0);
  t.deepEqual(
    transport.sent.map((s) => s.ids.length),
    [500, 500],
    "two full batches without waiting",
  );
  await clock.advance(10_000);
  t.deepEqual(
    transport.sent.map((s) => s.ids.length),
    [500, 500, 200],
  );
  t.is(queue.stats().sent, 1200);
});

test("batchSize above 500 is capped at 500", async (t) => {
  const { clock, transport, queue } = setup({ batchSize: 2000, lingerMs: 0 });
  for (let i = 0; i < 700; i++) queue.enqueue(record());
  await clock.advance(0);
  t.deepEqual(
    transport.sent.map((s) => s.ids.length),
    [500, 200],
  );
});

test("a batch stays under maxBatchBytes; a trace larger than a request is rejected without sending", async (t) => {
  const { clock, transport, queue, warnings } = setup({ lingerMs: 0, maxBatchBytes: 2000 });
  for (let i = 0; i < 10; i++) queue.enqueue(record({ input: "x".repeat(300) }));
  t.false(queue.enqueue(record({ input: "y".repeat(5000) })));
  await clock.advance(0);
  t.true(
    transport.sent.every((s) => s.bytes <= 2000),
    transport.sent.map((s) => s.bytes).join(","),
  );
  t.is(transport.sent.flatMap((s) => s.ids).length, 10);
  t.true(transport.sent.length >= 3);
  t.like(queue.stats(), { sent: 10, rejected: 1 });
  t.is(warnings.of("too_large").length, 1);
});

test("network errors and 5xx are retried with exponential backoff and jitter until they succeed", async (t) => {
  const { clock, transport, queue } = setup({ lingerMs: 0, initialBackoffMs: 1000, maxBackoffMs: 8000 });
  const fail: () => SendOutcome = () => ({ kind: "retry", error: "network error: ECONNREFUSED" });
  const unavailable: () => SendOutcome = () => ({ kind: "retry", error: "HTTP 503", status: 503 });
  transport.script = [fail, unavailable, fail, fail, fail];
  const r = record();
  queue.enqueue(r);
  await clock.advance(0);
  // random() = 0.5: each delay is 3/4 of min(max, initial * 2^(n-1))
  for (const delay of [750, 1500, 3000, 6000, 6000]) {
    const before = transport.sent.length;
    await clock.advance(delay - 1);
    t.is(transport.sent.length, before, `no attempt before ${delay} ms`);
    await clock.advance(1);
    t.is(transport.sent.length, before + 1, `an attempt at ${delay} ms`);
  }
  t.deepEqual(
    transport.sent.map((s) => s.ids),
    Array(6).fill([r.traceId]),
  );
  t.like(queue.stats(), { sent: 1, retries: 5, queued: 0 });
  t.like(queue.stats().lastError, { message: "network error: ECONNREFUSED" });
});

test("backoffDelay: exponential, capped, jitter within [half, full]", (t) => {
  t.is(
    backoffDelay(1, 500, 30_000, () => 0),
    250,
  );
  t.is(
    backoffDelay(1, 500, 30_000, () => 0.999999),
    500,
  );
  t.is(
    backoffDelay(4, 500, 30_000, () => 0),
    2000,
  );
  t.is(
    backoffDelay(20, 500, 30_000, () => 0),
    15_000,
  );
  t.is(
    backoffDelay(200, 500, 30_000, () => 1),
    30_000,
  );
});

test("Retry-After is honoured (and parsed from seconds or a date)", async (t) => {
  const { clock, transport, queue } = setup({ lingerMs: 0, initialBackoffMs: 100 });
  transport.script = [() => ({ kind: "retry", error: "HTTP 429", status: 429, retryAfterMs: 7000 })];
  queue.enqueue(record());
  await clock.advance(0);
  await clock.advance(6999);
  t.is(transport.sent.length, 1, "not before Retry-After");
  await clock.advance(1000);
  t.is(transport.sent.length, 2);
  t.is(parseRetryAfter("7"), 7000);
  t.is(parseRetryAfter("Sat, 21 Nov 2026 21:20:10 GMT", Date.parse("2026-11-21T21:20:00Z")), 10_000);
  t.is(parseRetryAfter(null), undefined);
  t.is(parseRetryAfter("soon"), undefined);
});

test("a 4xx on the batch is not retried: its traces count as rejected, with a warning", async (t) => {
  const { clock, transport, queue, warnings } = setup({ lingerMs: 0 });
  transport.script = [() => ({ kind: "rejected", error: "HTTP 422 validation_failed", status: 422 })];
  queue.enqueue(record());
  queue.enqueue(record());
  await clock.advance(60_000);
  t.is(transport.sent.length, 1);
  t.like(queue.stats(), { rejected: 2, retries: 0, queued: 0, sent: 0 });
  t.is(warnings.of("rejected").length, 1);
  t.regex(warnings.of("rejected")[0]!.message, /HTTP 422/);
});

test("per-item results: created, duplicate and rejected are counted apart", async (t) => {
  const { clock, transport, queue, warnings } = setup({ lingerMs: 0 });
  const [a, b, c] = [record(), record(), record()];
  transport.script = [
    () => ({
      kind: "accepted",
      results: [
        { traceId: a.traceId, status: "created" },
        { traceId: b.traceId, status: "duplicate" },
        { traceId: c.traceId, status: "rejected", reason: "body.traces[2].timestamp: is more than 1 hour in the future" },
      ],
    }),
  ];
  for (const r of [a, b, c]) queue.enqueue(r);
  await clock.advance(0);
  t.like(queue.stats(), { sent: 1, duplicates: 1, rejected: 1 });
  t.regex(warnings.of("rejected")[0]!.message, /1 hour in the future/);
  await clock.advance(60_000);
  t.is(transport.sent.length, 1, "a rejected item is never retried");
});

test("a retry after a lost answer never stores twice: the API answers duplicate", async (t) => {
  const { clock, transport, queue } = setup({ lingerMs: 0, initialBackoffMs: 100 });
  transport.script = [() => "store-then-fail"];
  const ids = [record(), record()].map((r) => (queue.enqueue(r), r.traceId));
  await clock.advance(1000);
  t.deepEqual(
    transport.sent.map((s) => s.ids),
    [ids, ids],
    "the same traceIds are sent again",
  );
  t.like(queue.stats(), { sent: 0, duplicates: 2, retries: 1, queued: 0 });
  t.is(transport.stored.size, 2);
});

test("413: the batch is split in half until it fits; a single trace too large is rejected", async (t) => {
  const { clock, transport, queue } = setup({ lingerMs: 0 });
  const script = (ids: string[]): SendOutcome =>
    ids.length > 3 ? { kind: "too_large", error: "HTTP 413" } : { kind: "accepted", results: [] };
  transport.script = Array(20).fill(script);
  for (let i = 0; i < 10; i++) queue.enqueue(record());
  await clock.advance(0);
  t.deepEqual(
    transport.sent.map((s) => s.ids.length),
    [10, 5, 3, 3, 3, 1],
  );
  t.like(queue.stats(), { sent: 10, rejected: 0, retries: 0 });

  const single = setup({ lingerMs: 0 });
  single.transport.script = [() => ({ kind: "too_large", error: "HTTP 413" })];
  single.queue.enqueue(record());
  await single.clock.advance(0);
  t.like(single.queue.stats(), { rejected: 1, sent: 0, queued: 0 });
});

test("the memory bound drops the oldest traces, with one counted warning per interval", async (t) => {
  const { clock, transport, queue, warnings } = setup({
    lingerMs: 0,
    maxQueue: 5,
    batchSize: 2,
    initialBackoffMs: 1000,
    maxBackoffMs: 2000,
    warnIntervalMs: 30_000,
  });
  transport.script = Array(1000).fill(() => ({ kind: "retry", error: "network error: ECONNREFUSED" }));
  const all = Array.from({ length: 9 }, () => record());
  for (const r of all) queue.enqueue(r);
  await clock.advance(0);
  t.like(queue.stats(), { queued: 5, dropped: 4 });
  t.is(warnings.of("dropped").length, 1, "one warning, the next ones counted");
  t.regex(warnings.of("dropped")[0]!.message, /the trace queue is full \(5\): dropped the oldest trace \(1 dropped in all\)/);
  await clock.advance(29_000);
  const late = record();
  queue.enqueue(late);
  t.is(warnings.of("dropped").length, 1);
  await clock.advance(1000);
  queue.enqueue(record());
  t.is(warnings.of("dropped").length, 2);
  t.regex(warnings.of("dropped")[1]!.message, /6 dropped in all.*\[4 similar warning\(s\) since the last one\]/);
  transport.script = [];
  await clock.advance(10_000);
  const delivered = transport.sent.filter((s) => transport.stored.has(s.ids[0]!)).flatMap((s) => s.ids);
  t.is(delivered.length, 5, "exactly the bound is delivered");
  t.false(delivered.includes(all[0]!.traceId), "the oldest were dropped");
  t.true(delivered.includes(late.traceId), "the newest were kept");
  t.like(queue.stats(), { queued: 0, sent: 5, dropped: 6, submitted: 11 });
});

test("flush sends at once, resolves when delivered, and reports a timeout while the API is down", async (t) => {
  const { clock, transport, queue } = setup({ lingerMs: 60_000, initialBackoffMs: 10_000 });
  queue.enqueue(record());
  const flushed = queue.flush(5000);
  await clock.advance(0);
  t.is(transport.sent.length, 1, "flush does not wait for the linger");
  t.true(await flushed);
  t.true(await queue.flush(), "nothing to flush");

  transport.script = Array(10).fill(() => ({ kind: "retry", error: "network error: ECONNREFUSED" }));
  queue.enqueue(record());
  const timedOut = queue.flush(5000);
  await clock.advance(5000);
  t.false(await timedOut);
  t.is(queue.stats().queued, 1);
});

test("shutdown flushes, then drops what is left with a warning; later submits are dropped", async (t) => {
  const { clock, transport, queue, warnings } = setup({ lingerMs: 0, initialBackoffMs: 100_000 });
  queue.enqueue(record());
  await clock.advance(0);
  t.is(queue.stats().sent, 1);
  transport.script = [() => ({ kind: "retry", error: "HTTP 503", status: 503 })];
  queue.enqueue(record());
  queue.enqueue(record());
  const done = queue.shutdown(2000);
  await clock.advance(2000);
  t.false(await done);
  t.like(queue.stats(), { dropped: 2, queued: 0 });
  t.regex(warnings.of("undelivered")[0]!.message, /2 traces were not delivered/);
  t.false(queue.enqueue(record()));
  t.is(queue.stats().dropped, 3);
});

test("a logger that throws does not break the sender", async (t) => {
  const clock = new FakeClock();
  const transport = new ScriptedTransport(clock);
  const queue = new TraceQueue({
    transport,
    clock,
    lingerMs: 0,
    logger: {
      warn() {
        throw new Error("boom");
      },
    },
  });
  transport.script = [() => ({ kind: "retry", error: "x" })];
  queue.enqueue(record());
  await clock.advance(10_000);
  t.is(queue.stats().sent, 1);
});

// ---------------------------------------------------------------------------------------------
// The HTTP transport against a real HTTP server

test("HttpTransport: bearer key, per-item results, retry on 503 with Retry-After, 413, 4xx", async (t) => {
  const seen: { auth: string | undefined; type: string | undefined; path: string | undefined }[] = [];
  const answers: [number, Record<string, string>, string][] = [];
  const server = createServer((req, res) => {
    let body = "";
    req.on("data", (c: Buffer) => {
      body += c.toString();
    });
    req.on("end", () => {
      seen.push({ auth: req.headers.authorization, type: req.headers["content-type"], path: req.url });
      const [status, headers, text] = answers.shift() ?? [
        200,
        {},
        JSON.stringify({
          results: (JSON.parse(body) as { traces: TraceRecord[] }).traces.map((x) => ({
            traceId: x.traceId,
            status: "created",
            guardBlocked: false,
            evalScore: 1,
          })),
          created: 1,
          duplicates: 0,
          rejected: 0,
        }),
      ];
      res.writeHead(status, { "content-type": "application/json", ...headers }).end(text);
    });
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  t.teardown(() => server.close());
  const port = (server.address() as AddressInfo).port;
  const key = "gov_sk_" + "k".repeat(43);
  const transport = new HttpTransport({ connection: parseConnection(`govdb://${key}@127.0.0.1:${port}/db`) });
  const r = record();
  const body = JSON.stringify({ traces: [r] });
  const signal = new AbortController().signal;

  t.deepEqual(await transport.send(body, 1, signal), { kind: "accepted", results: [{ traceId: r.traceId, status: "created" }] });
  t.deepEqual(seen[0], { auth: `Bearer ${key}`, type: "application/json", path: "/api/v1/governance/traces" });

  answers.push([503, { "retry-after": "3" }, JSON.stringify({ code: "not_ready", detail: "down" })]);
  t.deepEqual(await transport.send(body, 1, signal), { kind: "retry", error: "HTTP 503 not_ready: down", status: 503, retryAfterMs: 3000 });
  answers.push([413, {}, JSON.stringify({ code: "payload_too_large" })]);
  t.like(await transport.send(body, 1, signal), { kind: "too_large" });
  answers.push([403, {}, JSON.stringify({ code: "project_mismatch", detail: "This key belongs to project a" })]);
  t.deepEqual(await transport.send(body, 1, signal), {
    kind: "rejected",
    error: "HTTP 403 project_mismatch: This key belongs to project a",
    status: 403,
  });
  answers.push([
    200,
    {},
    JSON.stringify({
      results: [{ traceId: r.traceId, status: "rejected", errors: [{ field: "body.traces[0].model", message: "required" }] }],
    }),
  ]);
  t.deepEqual(await transport.send(body, 1, signal), {
    kind: "accepted",
    results: [{ traceId: r.traceId, status: "rejected", reason: "body.traces[0].model: required" }],
  });

  answers.push([200, {}, JSON.stringify({ project: "shop", observability: {}, engine: { guards: {} } })]);
  t.deepEqual(await transport.config(), { ok: true, config: { project: "shop", observability: {}, engine: { guards: {} } } });
  t.is(seen.at(-1)!.path, "/api/v1/governance/config");
  answers.push([401, {}, JSON.stringify({ code: "unauthorized" })]);
  t.deepEqual(await transport.config(), { ok: false, error: "HTTP 401 unauthorized", status: 401, retryable: false });

  await new Promise<void>((r) => server.close(() => r()));
  const down = await transport.send(body, 1, signal);
  t.is(down.kind, "retry");
  t.regex((down as { error: string }).error, /^network error: (ECONNREFUSED|ECONNRESET|UND_ERR_SOCKET)/);
  t.false(JSON.stringify(down).includes(key));
});

// ---------------------------------------------------------------------------------------------
// Governance: the config fetched at boot, and what happens when it cannot be

const CONNECTION = `govdb://gov_sk_${"a".repeat(43)}@127.0.0.1:1/db`;

function governanceWith(
  configs: (() => ReturnType<HttpTransport["config"]>)[],
  extra: Partial<ConstructorParameters<typeof Governance>[0]> = {},
) {
  const clock = new FakeClock();
  const transport = Object.assign(new ScriptedTransport(clock), {
    configCalls: 0,
    config() {
      this.configCalls++;
      return (configs.shift() ?? (() => Promise.resolve({ ok: false as const, error: "network error: ECONNREFUSED", retryable: true })))();
    },
  });
  const warnings = new Warnings();
  const g = new Governance({
    connection: CONNECTION,
    env: {},
    transport,
    clock,
    logger: warnings,
    random: () => 0.5,
    lingerMs: 0,
    ...extra,
  });
  return { g, clock, transport, warnings };
}

const remote = { project: "shop", observability: {}, engine: { guards: { prompt_injection: { enabled: false } } } };

test("the config fetched at boot compiles the engine; GOVERNANCE_PROJECT defaults to the key's project", async (t) => {
  const { g } = governanceWith([() => Promise.resolve({ ok: true, config: remote })]);
  await g.start();
  t.is(g.stats().config, "api");
  t.false(g.engine!.config.guards.prompt_injection.enabled);
  t.is(g.project, "shop");
  t.deepEqual(g.remoteConfig, remote);
});

test("the config fetch fails: default engine at once, retried in the background, then the fetched one", async (t) => {
  const { g, clock, transport, warnings } = governanceWith([]);
  await g.start();
  t.is(g.stats().config, "default");
  t.true(g.engine!.config.guards.prompt_injection.enabled, "the default EngineConfig guards meanwhile");
  t.regex(warnings.lines[0]!.message, /guarding with the default config, retrying in the background/);
  t.is(transport.configCalls, 1);
  await clock.advance(750);
  t.is(transport.configCalls, 2, "retried after a backoff");
  (transport as unknown as { config: () => Promise<unknown> }).config = () => {
    transport.configCalls++;
    return Promise.resolve({ ok: true, config: remote });
  };
  await clock.advance(1500);
  t.is(transport.configCalls, 3);
  t.is(g.stats().config, "api");
  t.false(g.engine!.config.guards.prompt_injection.enabled);
  await clock.advance(600_000);
  t.is(transport.configCalls, 3, "never fetched again: changes apply at the next restart");
});

test("the config fetch gives up after configAttempts, and never retries a 401", async (t) => {
  const { g, clock, transport, warnings } = governanceWith([], { configAttempts: 3 });
  await g.start();
  await clock.advance(600_000);
  t.is(transport.configCalls, 3);
  t.regex(warnings.lines.at(-1)!.message, /gave up loading the governance config/);

  const unauthorized = governanceWith([
    () => Promise.resolve({ ok: false, error: "HTTP 401 unauthorized", status: 401, retryable: false }),
  ]);
  await unauthorized.g.start();
  await unauthorized.clock.advance(600_000);
  t.is(unauthorized.transport.configCalls, 1);
  t.is(unauthorized.g.stats().config, "default");
});

test("requireConfig: start() fails fast with GovernanceConfigError", async (t) => {
  const { g, transport } = governanceWith(
    [() => Promise.resolve({ ok: false, error: "HTTP 503 not_ready", status: 503, retryable: true })],
    { requireConfig: true },
  );
  const err = await t.throwsAsync(g.start(), {
    name: "GovernanceConfigError",
    message: /could not load the governance config at boot: HTTP 503/,
  });
  t.is((err as unknown as { status: number }).status, 503);
  t.is(transport.configCalls, 1);
});

test("a GOVERNANCE_PROJECT other than the key's is warned about", async (t) => {
  const { g, warnings } = governanceWith([() => Promise.resolve({ ok: true, config: remote })], { project: "other" });
  await g.start();
  t.is(g.project, "other");
  t.regex(warnings.lines[0]!.message, /GOVERNANCE_PROJECT is other but the key belongs to shop/);
});

test("submit: defaults applied, project tagged, invalid traces warned about and never thrown", async (t) => {
  const { g, transport, clock, warnings } = governanceWith([() => Promise.resolve({ ok: true, config: remote })]);
  await g.start();
  const id = g.submit({ input: "hi", output: "hello", model: "m", latency: 12.5, tokens: { prompt: 1, completion: 2 } });
  t.regex(id!, /^[0-9a-f-]{36}$/);
  const explicit = g.submit(
    {
      traceId: "11111111-2222-4333-8444-555555555555",
      input: "a",
      output: "b",
      model: "m",
      latency: 1,
      tokens: { prompt: 0, completion: 0, total: 0 },
      timestamp: "2026-01-01T00:00:00Z",
      sessionId: "s1",
    },
    { project: "shop" },
  );
  t.is(explicit, "11111111-2222-4333-8444-555555555555");
  // @ts-expect-error: a JavaScript caller may pass anything
  t.is(g.submit({ input: 1 }), undefined);
  t.regex(warnings.lines.at(-1)!.message, /a trace was not submitted: input must be a string.*model must be.*\(1 rejected in all\)/);
  t.is(warnings.lines.at(-1)!.details.code, "BERTH_GOVERNANCE_INVALID_TRACE");
  await clock.advance(0);
  t.is(transport.sent.length, 1);
  t.like(g.stats(), { sent: 2, submitted: 2, rejected: 1 });
});

test("HttpTransport bodies carry the trace as given plus the defaults", async (t) => {
  let body = "";
  const fetchStub: typeof fetch = (_url, init) => {
    body = typeof init?.body === "string" ? init.body : "";
    return Promise.resolve(new Response(JSON.stringify({ results: [] }), { status: 200 }));
  };
  const g = new Governance({ connection: CONNECTION, env: { GOVERNANCE_PROJECT: "shop" }, fetch: fetchStub, lingerMs: 0 });
  const at = new Date("2026-11-21T21:20:00.243Z");
  const id = g.submit({
    input: "p",
    output: "r",
    model: "m",
    latency: 3,
    tokens: { prompt: 4, completion: 5 },
    timestamp: at,
    error: "Error: boom",
  });
  t.true(await g.flush(5000));
  t.deepEqual(JSON.parse(body), {
    traces: [
      {
        traceId: id,
        input: "p",
        output: "r",
        model: "m",
        latency: 3,
        tokens: { prompt: 4, completion: 5, total: 9 },
        timestamp: "2026-11-21T21:20:00.243Z",
        error: "Error: boom",
        project: "shop",
      },
    ],
  });
  await g.shutdown();
});
