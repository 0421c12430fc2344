// LeaderElector against a stand-in API server that stops answering: a renewal that hangs must not
// keep the process leading past the renew deadline (the Lease would expire under it and another
// replica lead at the same time).
import test from "ava";
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { pino } from "pino";
import { LeanKubeConfig } from "../../crds/kube/kubeconfig.ts";
import { LeaderElector } from "../../operator/runtime/leader.ts";

test("a leader whose renewals hang steps down by the renew deadline, before the Lease expires", async (t) => {
  t.timeout(20_000);
  let lease: Record<string, unknown> | undefined;
  let hang = false;
  const server = createServer((req: IncomingMessage, res: ServerResponse) => {
    if (hang) return; // never answers
    let body = "";
    req.on("data", (c: Buffer) => { body += c.toString(); });
    req.on("end", () => {
      res.setHeader("Content-Type", "application/json");
      if (req.method === "GET" && !lease) { res.statusCode = 404; res.end(JSON.stringify({ kind: "Status", code: 404, reason: "NotFound" })); return; }
      if (req.method === "POST" || req.method === "PUT") lease = { ...JSON.parse(body) as Record<string, unknown>, metadata: { name: "l", namespace: "ns", resourceVersion: "1" } };
      res.end(JSON.stringify(lease));
    });
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  t.teardown(() => { server.closeAllConnections(); server.close(); });
  const kc = new LeanKubeConfig({ server: `http://127.0.0.1:${(server.address() as AddressInfo).port}` }, {});
  const elector = new LeaderElector(kc, { namespace: "ns", name: "l", identity: "me", leaseDurationSeconds: 6, renewDeadlineSeconds: 2, retryPeriodSeconds: 0.2 }, pino({ level: "silent" }));
  let startedAt = 0;
  let stoppedAt = 0;
  const stopped = new Promise<void>((resolve) => {
    void elector.run({
      onStartedLeading: () => { startedAt = Date.now(); setTimeout(() => { hang = true; }, 300); },
      onStoppedLeading: () => { stoppedAt = Date.now(); resolve(); },
    });
  });
  await stopped;
  t.false(elector.isLeader);
  // the property itself is about time: leadership ends before the Lease this process last renewed
  // (at most ~0.3 s after it started leading) can expire, 6 s later; the renew deadline is 2 s
  t.true(stoppedAt - startedAt < 6000, `stepped down ${stoppedAt - startedAt} ms after becoming leader`);
  hang = false;
  server.closeAllConnections();
  await elector.stop();
});
