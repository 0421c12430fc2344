// The opt-in process hooks (configure({ handleProcessExit: true })): a service that exits on its own
// (beforeExit) or is stopped with SIGTERM delivers what it queued first; without the option the
// toolkit never holds the process up. Real child processes against a real HTTP server.
import test from "ava";
import { spawn } from "node:child_process";
import type { ChildProcess } from "node:child_process";
import { fileURLToPath } from "node:url";
import { fakeGovernanceApi } from "../../helpers/fake-governance-api.ts";

const toolkit = fileURLToPath(new URL("../../../toolkit/src/index.ts", import.meta.url));

/** The stand-in API, recording the inputs of the traces it is sent. */
async function fakeApi(t: { teardown(fn: () => void): void }) {
  const api = await fakeGovernanceApi(t);
  return {
    get received() {
      return api.received.map((x) => x.input);
    },
    port: api.port,
  };
}

/** A child service: submits three traces (a long linger keeps them queued), then `then`. */
function child(port: number, hook: boolean, then: "exit" | "wait") {
  const code = `
    import { Governance } from ${JSON.stringify(toolkit)};
    const g = new Governance({ connection: "govdb://gov_sk_${"c".repeat(43)}@127.0.0.1:${port}/db", env: {}, lingerMs: 60000, handleProcessExit: ${hook} });
    await g.start();
    for (const i of [1, 2, 3]) g.submit({ input: "call " + i, output: "ok", model: "m", latency: 1, tokens: { prompt: 1, completion: 1 } });
    process.send("queued");
    ${then === "wait" ? "setInterval(() => {}, 1000);" : ""}
  `;
  return spawn(process.execPath, ["--input-type=module", "-e", code], { stdio: ["ignore", "ignore", "inherit", "ipc"] });
}

function exited(p: ChildProcess): Promise<{ code: number | null; signal: NodeJS.Signals | null }> {
  return new Promise((r) => p.on("exit", (code, signal) => r({ code, signal })));
}

test("beforeExit: a service that ends on its own delivers its queued traces first", async (t) => {
  const api = await fakeApi(t);
  const p = child(api.port, true, "exit");
  const end = await exited(p);
  t.deepEqual(end, { code: 0, signal: null });
  t.deepEqual(api.received.sort(), ["call 1", "call 2", "call 3"]);
});

test("SIGTERM: the queue is flushed, then the process ends as SIGTERM would have ended it", async (t) => {
  const api = await fakeApi(t);
  const p = child(api.port, true, "wait");
  await new Promise<void>((r) => p.once("message", () => r()));
  t.deepEqual(api.received, [], "nothing sent yet (the batch is lingering)");
  p.kill("SIGTERM");
  const end = await exited(p);
  t.is(end.signal, "SIGTERM");
  t.deepEqual(api.received.sort(), ["call 1", "call 2", "call 3"]);
});

test("without the option the toolkit neither flushes nor holds the process up", async (t) => {
  const api = await fakeApi(t);
  const started = Date.now();
  const end = await exited(child(api.port, false, "exit"));
  t.deepEqual(end, { code: 0, signal: null });
  t.true(Date.now() - started < 30_000, "its timers do not keep the process alive");
  t.deepEqual(api.received, [], "the linger timer never fired: call flush() or shutdown() yourself");
});

test("await shutdown() at the end of a script resolves, with the API unreachable, by its deadline", async (t) => {
  // a port nothing listens on
  const { createServer } = await import("node:net");
  const server = createServer().listen(0, "127.0.0.1");
  await new Promise((r) => server.once("listening", r));
  const port = (server.address() as { port: number }).port;
  await new Promise((r) => server.close(r));
  const code = `
    import { Governance } from ${JSON.stringify(toolkit)};
    const g = new Governance({ connection: "govdb://gov_sk_${"d".repeat(43)}@127.0.0.1:${port}/db", env: {} });
    await g.start();
    g.submit({ input: "call", output: "ok", model: "m", latency: 1, tokens: { prompt: 1, completion: 1 } });
    const started = Date.now();
    const delivered = await g.shutdown(300);
    console.log(JSON.stringify({ delivered, waited: Date.now() - started }));
  `;
  const p = spawn(process.execPath, ["--input-type=module", "-e", code], { stdio: ["ignore", "pipe", "inherit"] });
  let out = "";
  p.stdout.on("data", (c: Buffer) => (out += c.toString()));
  const end = await exited(p);
  t.deepEqual(end, { code: 0, signal: null }, "not 13: the awaited deadline keeps the process alive until it passes");
  const result = JSON.parse(out.trim().split("\n").at(-1)!) as { delivered: boolean; waited: number };
  t.false(result.delivered, "nothing could be delivered");
  t.true(result.waited >= 250, `it waited for its deadline (${result.waited} ms)`);
});
