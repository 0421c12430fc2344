// The sample's HTTP routes, without a framework:
//   GET  /              a short text: the version (HELLO_VERSION) and the host answering
//   GET  /healthz       200 "ok"
//   GET  /burn?ms=N     burns CPU for N ms (default 100, at most 10 s) in slices, answering between them
//   GET  /env/NAME      the value of the variable NAME when it starts with SAMPLE_ (text), else 404:
//                       how a test sees that a rollout brought a variable set through Berth's API
//   POST /chat          {"message": "...", "sessionId"?: "..."} -> {"answer": "..."}; 422 when a guard
//                       blocked the call. The trace carries the sessionId, so a caller can find it.
import type { IncomingMessage, RequestListener, ServerResponse } from "node:http";
import { hostname } from "node:os";

export type ChatResult = { kind: "answer"; answer: string } | { kind: "blocked"; phase: string; guards: string[]; traceId: string };
export interface ChatRequest {
  message: string;
  sessionId?: string;
}
export type Chat = (request: ChatRequest) => Promise<ChatResult>;

export interface HelloOptions {
  version: string;
  /** the governed model, or why there is none (GOVDB_CONNECTION missing): /chat then answers 503 */
  chat: Chat | { unavailable: string };
  /** The variables GET /env/<name> shows (config.ts: only SAMPLE_*); none when absent. */
  shown?: Readonly<Record<string, string>>;
  log?: (level: "info" | "warn" | "error", msg: string, fields?: Record<string, unknown>) => void;
}

export const MAX_BURN_MS = 10_000;
export const DEFAULT_BURN_MS = 100;
export const MAX_MESSAGE_CHARS = 4000;
export const MAX_SESSION_ID_CHARS = 200;
const MAX_BODY_BYTES = 64 * 1024;
/** the longest a burn keeps the event loop, so that /healthz is still answered during a burn */
const BURN_SLICE_MS = 20;

/** The `ms` of /burn: DEFAULT_BURN_MS when absent, at most MAX_BURN_MS; undefined when not a non-negative integer. */
export function burnMillis(raw: string | null): number | undefined {
  if (raw === null || raw === "") return DEFAULT_BURN_MS;
  if (!/^\d{1,9}$/.test(raw)) return undefined;
  return Math.min(Number(raw), MAX_BURN_MS);
}

/** Keeps a CPU busy for `ms` milliseconds, yielding to the event loop every BURN_SLICE_MS; returns the time taken. */
export async function burn(ms: number): Promise<number> {
  const start = performance.now();
  let x = 1;
  for (;;) {
    const now = performance.now();
    if (now - start >= ms) break;
    const sliceEnd = Math.min(start + ms, now + BURN_SLICE_MS);
    while (performance.now() < sliceEnd) for (let i = 0; i < 1000; i++) x = (x * 48271) % 2147483647;
    await new Promise<void>((resolve) => setImmediate(resolve));
  }
  if (x === 0) throw new Error("unreachable"); // keeps the loop from being optimised away
  return performance.now() - start;
}

/** GET /env/<name>'s answer: the value of a shown variable (only SAMPLE_* ones), or undefined (404). */
export function shownVariable(shown: Readonly<Record<string, string>>, name: string): string | undefined {
  return name.startsWith("SAMPLE_") && Object.hasOwn(shown, name) ? shown[name] : undefined;
}

/** The request of a /chat body, or the problem with it. */
export function chatRequest(body: unknown): ChatRequest | { problem: string } {
  if (typeof body !== "object" || body === null || Array.isArray(body)) return { problem: 'expected a JSON object {"message": "..."}' };
  const { message, sessionId } = body as Record<string, unknown>;
  if (typeof message !== "string" || message.trim() === "") return { problem: "message must be a non-empty string" };
  if (message.length > MAX_MESSAGE_CHARS) return { problem: `message is longer than ${MAX_MESSAGE_CHARS} characters` };
  if (sessionId === undefined) return { message };
  if (typeof sessionId !== "string" || sessionId === "" || sessionId.length > MAX_SESSION_ID_CHARS)
    return { problem: `sessionId must be a string of 1 to ${MAX_SESSION_ID_CHARS} characters` };
  return { message, sessionId };
}

function send(res: ServerResponse, status: number, body: unknown): void {
  const text = typeof body === "string" ? body : JSON.stringify(body) + "\n";
  res.writeHead(status, {
    "Content-Type": typeof body === "string" ? "text/plain; charset=utf-8" : "application/json",
    "Content-Length": Buffer.byteLength(text),
  });
  res.end(text);
}

async function readBody(req: IncomingMessage): Promise<string | undefined> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req) {
    size += (chunk as Buffer).length;
    if (size > MAX_BODY_BYTES) return undefined;
    chunks.push(chunk as Buffer);
  }
  return Buffer.concat(chunks).toString("utf8");
}

export function helloHandler(o: HelloOptions): RequestListener {
  const host = hostname();
  const log = o.log ?? (() => {});
  const routes: Record<string, Record<string, (req: IncomingMessage, res: ServerResponse, url: URL) => Promise<void> | void>> = {
    "/": { GET: (_req, res) => send(res, 200, `Hello from Berth's sample service, version ${o.version}, answered by ${host}\n`) },
    "/healthz": { GET: (_req, res) => send(res, 200, "ok\n") },
    // What Berth's edge tells the service about the viewer (docs/shares.md): set only by Berth.
    "/whoami": {
      GET: (req, res) =>
        send(res, 200, {
          user: req.headers["x-berth-user"] ?? null,
          share: req.headers["x-berth-share"] ?? null,
          via: req.headers["x-sample-probe"] ?? null,
        }),
    },
    "/burn": {
      GET: async (_req, res, url) => {
        const ms = burnMillis(url.searchParams.get("ms"));
        if (ms === undefined) {
          send(res, 400, { error: "ms must be a non-negative integer (milliseconds, at most 10000)" });
          return;
        }
        const took = await burn(ms);
        send(res, 200, { burnedMs: Math.round(took), host });
      },
    },
    "/chat": {
      POST: async (req, res) => {
        if ("unavailable" in o.chat) {
          send(res, 503, { error: `chat is not configured: ${o.chat.unavailable}` });
          return;
        }
        const raw = await readBody(req);
        if (raw === undefined) {
          send(res, 413, { error: `the body is larger than ${MAX_BODY_BYTES} bytes` });
          return;
        }
        let body: unknown;
        try {
          body = JSON.parse(raw);
        } catch {
          send(res, 400, { error: "the body is not JSON" });
          return;
        }
        const request = chatRequest(body);
        if ("problem" in request) {
          send(res, 400, { error: request.problem });
          return;
        }
        const result = await o.chat(request);
        if (result.kind === "blocked") {
          send(res, 422, { error: "blocked by a guard", phase: result.phase, guards: result.guards, traceId: result.traceId });
          return;
        }
        send(res, 200, { answer: result.answer });
      },
    },
  };
  const shown = o.shown ?? {};
  return (req, res) => {
    const url = new URL(req.url ?? "/", "http://localhost");
    const env = /^\/env\/([^/]+)$/.exec(url.pathname);
    if (env && (req.method === "GET" || req.method === undefined)) {
      const value = shownVariable(shown, env[1]!); // names are [A-Za-z0-9_]: nothing to decode
      if (value === undefined) send(res, 404, { error: "no such variable (only SAMPLE_* variables are shown)" });
      else send(res, 200, value);
      return;
    }
    const route = routes[url.pathname];
    const handler = route?.[req.method ?? "GET"];
    if (!route) {
      send(res, 404, { error: "not found" });
      return;
    }
    if (!handler) {
      res.setHeader("Allow", Object.keys(route).join(", "));
      send(res, 405, { error: "method not allowed" });
      return;
    }
    Promise.resolve(handler(req, res, url)).catch((err: unknown) => {
      log("error", "request failed", { path: url.pathname, error: err instanceof Error ? `${err.name}: ${err.message}` : String(err) });
      if (!res.headersSent) send(res, 500, { error: "internal error" });
      else res.destroy();
    });
  };
}
