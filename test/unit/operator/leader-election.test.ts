// LeaderElector against a stand-in API server that stops answering: a renewal that hangs must not
// keep the process leading past the renew deadline (the Lease would expire under it and another
// replica lead at the same time).
import test, { type ExecutionContext } from "ava";
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { pino } from "pino";
import { LeanKubeConfig } from "../../../kube/kubeconfig.ts";
import { LeaderElector } from "../../../operator/runtime/leader.ts";

/** A stand-in API server for one Lease; `hang` makes it stop answering. */
async function standIn(t: ExecutionContext) {
  const state: { lease: Record<string, unknown> | undefined; hang: boolean } = { lease: undefined, hang: false };
  const server = createServer((req: IncomingMessage, res: ServerResponse) => {
    if (state.hang) return; // never answers
    let body = "";
    req.on("data", (c: Buffer) => {
      body += c.toString();
    });
    req.on("end", () => {
      res.setHeader("Content-Type", "application/json");
      if (req.method === "GET" && !state.lease) {
        res.statusCode = 404;
        res.end(JSON.stringify({ kind: "Status", code: 404, reason: "NotFound" }));
        return;
      }
      if (req.method === "POST" || req.method === "PUT")
        state.lease = { ...(JSON.parse(body) as Record<string, unknown>), metadata: { name: "l", namespace: "ns", resourceVersion: "1" } };
      res.end(JSON.stringify(state.lease));
    });
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  t.teardown(() => {
    server.closeAllConnections();
    server.close();
  });
  return { state, server, kc: new LeanKubeConfig({ server: `http://127.0.0.1:${(server.address() as AddressInfo).port}` }, {}) };
}

test("a leader whose renewals hang steps down by the renew deadline, before the Lease expires", async (t) => {
  t.timeout(20_000);
  const { state, server, kc } = await standIn(t);
  const elector = new LeaderElector(
    kc,
    { namespace: "ns", name: "l", identity: "me", leaseDurationSeconds: 6, renewDeadlineSeconds: 2, retryPeriodSeconds: 0.2 },
    pino({ level: "silent" }),
  );
  let startedAt = 0;
  let stoppedAt = 0;
  const stopped = new Promise<void>((resolve) => {
    void elector.run({
      onStartedLeading: () => {
        startedAt = Date.now();
        setTimeout(() => {
          state.hang = true;
        }, 300);
      },
      onStoppedLeading: () => {
        stoppedAt = Date.now();
        resolve();
      },
    });
  });
  await stopped;
  t.false(elector.isLeader);
  // the property itself is about time: leadership ends before the Lease this process last renewed
  // (at most ~0.3 s after it started leading) can expire, 6 s later; the renew deadline is 2 s
  t.true(stoppedAt - startedAt < 6000, `stepped down ${stoppedAt - startedAt} ms after becoming leader`);
  state.hang = false;
  server.closeAllConnections();
  await elector.stop();
});

test("stop() while the API server hangs returns by the renew deadline: the Lease's release does not hold up shutdown", async (t) => {
  t.timeout(15_000); // the release used to wait for the transport's 60 s default
  const { state, kc } = await standIn(t);
  const elector = new LeaderElector(
    kc,
    { namespace: "ns", name: "l", identity: "me", leaseDurationSeconds: 6, renewDeadlineSeconds: 2, retryPeriodSeconds: 5 },
    pino({ level: "silent" }),
  );
  await new Promise<void>((resolve) => {
    void elector.run({ onStartedLeading: () => resolve(), onStoppedLeading: () => {} });
  });
  state.hang = true;
  await elector.stop();
  t.false(elector.isLeader);
  t.is(
    (state.lease?.spec as { holderIdentity?: string } | undefined)?.holderIdentity,
    "me",
    "the release could not reach the server; the Lease will expire",
  );
});
