// A stand-in for the Berth API in toolkit unit tests (the integration tests use the real one):
// answers GET /api/v1/governance/config with an empty config and accepts every trace batch,
// recording the traces in `received`.
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import type { TraceRecord } from "../../toolkit/src/index.ts";

export async function fakeGovernanceApi(t: { teardown(fn: () => void): void }): Promise<{ received: TraceRecord[]; port: number }> {
  const received: TraceRecord[] = [];
  const server = createServer((req, res) => {
    let body = "";
    req.on("data", (c: Buffer) => {
      body += c.toString();
    });
    req.on("end", () => {
      if (req.url === "/api/v1/governance/config") {
        res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify({ project: "svc", observability: {}, engine: {} }));
        return;
      }
      const traces = (JSON.parse(body) as { traces: TraceRecord[] }).traces;
      received.push(...traces);
      res
        .writeHead(200, { "content-type": "application/json" })
        .end(JSON.stringify({ results: traces.map((x) => ({ traceId: x.traceId, status: "created" })) }));
    });
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  t.teardown(() => server.close());
  return { received, port: (server.address() as AddressInfo).port };
}
