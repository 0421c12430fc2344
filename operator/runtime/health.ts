// Probe and metrics endpoints: GET /healthz (alive), GET /readyz (every readiness check
// passes, else 503 naming the failing ones), GET /metrics (the Prometheus registry).
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import type { Metrics } from "./metrics.ts";

export interface ReadinessCheck {
  name: string;
  check: () => boolean | Promise<boolean>;
}

export interface HealthServerOptions {
  /** Default 127.0.0.1. */
  host?: string;
  /** 0 picks a free port. */
  port: number;
  metrics: Metrics;
  readiness: ReadinessCheck[];
}

export class HealthServer {
  private readonly opts: HealthServerOptions;
  private server: Server | undefined;

  constructor(opts: HealthServerOptions) {
    this.opts = opts;
  }

  async start(): Promise<{ port: number }> {
    const server = createServer((req, res) => {
      this.handle(req, res).catch((err: unknown) => this.send(res, 500, String(err)));
    });
    await new Promise<void>((resolve, reject) => {
      server.once("error", reject);
      server.listen(this.opts.port, this.opts.host ?? "127.0.0.1", () => {
        server.off("error", reject);
        resolve();
      });
    });
    this.server = server;
    return { port: (server.address() as AddressInfo).port };
  }

  async stop(): Promise<void> {
    const server = this.server;
    if (!server) return;
    this.server = undefined;
    await new Promise<void>((resolve) => {
      server.close(() => resolve());
      server.closeAllConnections();
    });
  }

  /** Runs every readiness check; a check that throws fails. Returns the names of the failing ones. */
  async failingChecks(): Promise<string[]> {
    const results = await Promise.all(
      this.opts.readiness.map(async ({ name, check }) => {
        try {
          return (await check()) ? undefined : name;
        } catch {
          return name;
        }
      }),
    );
    return results.filter((n): n is string => n !== undefined);
  }

  private async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    if (req.method !== "GET" && req.method !== "HEAD") {
      res.setHeader("Allow", "GET, HEAD");
      this.send(res, 405, "method not allowed\n");
      return;
    }
    const path = new URL(req.url ?? "/", "http://localhost").pathname;
    switch (path) {
      case "/healthz":
        this.send(res, 200, "ok\n");
        return;
      case "/readyz": {
        const failing = await this.failingChecks();
        const lines = this.opts.readiness.map(({ name }) => (failing.includes(name) ? `[-]${name} failed` : `[+]${name} ok`));
        this.send(
          res,
          failing.length ? 503 : 200,
          [...lines, failing.length ? `readyz check failed: ${failing.join(", ")}` : "ok"].join("\n") + "\n",
        );
        return;
      }
      case "/metrics": {
        const { registry } = this.opts.metrics;
        this.send(res, 200, await registry.metrics(), registry.contentType);
        return;
      }
      default:
        this.send(res, 404, "not found\n");
    }
  }

  private send(res: ServerResponse, status: number, body: string, contentType = "text/plain; charset=utf-8"): void {
    res.writeHead(status, { "Content-Type": contentType, "Content-Length": Buffer.byteLength(body) });
    res.end(body);
  }
}
