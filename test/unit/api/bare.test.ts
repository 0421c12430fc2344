// The bare path (api/http/bare.ts) on a real HTTP server on loopback: what it takes whole and
// answers, what it leaves to Koa, and that its answers are a route's answers (problems, response
// checks, the access-log line).
import test from "ava";
import { createServer, request, type Server } from "node:http";
import { once } from "node:events";
import type { AddressInfo } from "node:net";
import { Writable } from "node:stream";
import { z } from "zod";
import { bareDispatcher } from "../../../api/http/bare.ts";
import { defineBareRoute } from "../../../api/http/route.ts";
import { checkRoutes } from "../../../api/http/router.ts";
import { DomainError } from "../../../api/errors.ts";
import { createLogger } from "../../../kube/logger.ts";

const lines: Record<string, unknown>[] = [];
const logger = createLogger({
  level: "info",
  destination: new Writable({
    write(chunk: Buffer, _e, cb) {
      lines.push(JSON.parse(chunk.toString()) as Record<string, unknown>);
      cb();
    },
  }),
});

const route = defineBareRoute({
  path: "/edge/:ns/:name",
  operationId: "edge",
  tags: ["t"],
  summary: "s",
  rateLimit: "none",
  params: z.object({ ns: z.string().regex(/^[a-z]+$/), name: z.string().min(1) }).strict(),
  responses: { 200: null, 302: null, 403: null },
  bare: ({ params, header, host }) => {
    if (params.name === "deny") throw new DomainError(403, "denied", "No.");
    if (params.name === "boom") throw new Error("a bug");
    if (params.name === "undocumented") return { status: 201 };
    if (params.name === "later") return Promise.resolve({ status: 302, headers: { Location: "/there" } });
    return { status: 200, headers: { "X-Seen": `${params.ns}/${params.name}/${header("X-Who")}/${host}` } };
  },
});

let server: Server;
let base: string;
let draining = false;
test.before(async () => {
  const bare = bareDispatcher([route], { logger, validateResponses: true, draining: () => draining })!;
  server = createServer((req, res) => {
    if (bare(req, res)) return;
    res.statusCode = 599; // "left to Koa"
    res.end();
  });
  server.listen(0, "127.0.0.1");
  await once(server, "listening");
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
test.after.always(() => {
  server?.close();
});

function send(
  method: string,
  path: string,
  headers: Record<string, string> = {},
  body?: string,
): Promise<{ status: number; headers: Record<string, string | string[] | undefined>; text: string }> {
  return new Promise((resolve, reject) => {
    const req = request(`${base}${path}`, { method, headers }, (res) => {
      let text = "";
      res
        .setEncoding("utf8")
        .on("data", (c: string) => {
          text += c;
        })
        .on("end", () => resolve({ status: res.statusCode ?? 0, headers: res.headers, text }));
    });
    req.on("error", reject);
    req.end(body);
  });
}

test.serial(
  "a plain GET is answered by the handler, with decoded params, the headers it reads, a request id and an access-log line",
  async (t) => {
    lines.length = 0;
    const r = await send("GET", "/api/v1/edge/abc/x%20y", { "X-Who": "me", "X-Request-Id": "req-1" });
    t.is(r.status, 200);
    t.is(r.headers["x-seen"], `abc/x y/me/${base.slice("http://".length)}`);
    t.is(r.headers["x-request-id"], "req-1");
    t.is(r.headers["x-content-type-options"], "nosniff");
    t.is(r.headers["content-length"], "0");
    t.is(r.text, "");
    const access = lines.find((l) => l.msg === "request");
    t.like(access, { requestId: "req-1", method: "GET", path: "/api/v1/edge/abc/x%20y", route: "/api/v1/edge/:ns/:name", status: 200 });
    t.is(typeof access?.durationMs, "number");
    const unsafe = await send("GET", "/api/v1/edge/abc/x", { "X-Request-Id": "has spaces" });
    t.regex(String(unsafe.headers["x-request-id"]), /^[0-9a-f-]{36}$/, "an id that is not a safe token is replaced");
  },
);

test.serial("a promised answer is sent when it settles", async (t) => {
  const r = await send("GET", "/api/v1/edge/abc/later");
  t.is(r.status, 302);
  t.is(r.headers.location, "/there");
});

test.serial(
  "what the handler throws becomes a problem: a domain error as itself, anything else a 500 logged with the request id",
  async (t) => {
    lines.length = 0;
    const denied = await send("GET", "/api/v1/edge/abc/deny");
    t.is(denied.status, 403);
    t.is(denied.headers["content-type"], "application/problem+json");
    t.like(JSON.parse(denied.text), {
      status: 403,
      code: "denied",
      detail: "No.",
      instance: "/api/v1/edge/abc/deny",
      requestId: denied.headers["x-request-id"],
    });
    const boom = await send("GET", "/api/v1/edge/abc/boom");
    t.is(boom.status, 500);
    t.like(JSON.parse(boom.text), { code: "internal" });
    t.false(boom.text.includes("a bug"), "the cause stays in the log");
    t.true(lines.some((l) => l.level === "error" && l.requestId === boom.headers["x-request-id"] && JSON.stringify(l).includes("a bug")));
  },
);

test.serial("a response that does not match its documented ones is refused (BERTH_VALIDATE_RESPONSES)", async (t) => {
  const r = await send("GET", "/api/v1/edge/abc/undocumented");
  t.is(r.status, 500);
  t.like(JSON.parse(r.text), { code: "response_schema_mismatch" });
});

test.serial(
  "anything it would not answer whole goes on to Koa: other methods, a query, a body, invalid or undecodable params, other paths",
  async (t) => {
    for (const [method, path, body] of [
      ["POST", "/api/v1/edge/abc/x", undefined],
      ["HEAD", "/api/v1/edge/abc/x", undefined],
      ["GET", "/api/v1/edge/abc/x?q=1", undefined],
      ["GET", "/api/v1/edge/abc/x", "{}"],
      ["GET", "/api/v1/edge/ABC/x", undefined],
      ["GET", "/api/v1/edge/abc/%E0%A4%A", undefined],
      ["GET", "/api/v1/edge/abc/%00", undefined],
      ["GET", "/api/v1/edge/abc/x/", undefined],
      ["GET", "/api/v1/edge/abc", undefined],
      ["GET", "/api/v1/edgeXabc/x", undefined],
    ] as const) {
      const r = await send(method, path, body ? { "Content-Type": "application/json", "Content-Length": String(body.length) } : {}, body);
      t.is(r.status, 599, `${method} ${path}${body ? " with a body" : ""}`);
    }
  },
);

test.serial("while the server drains, answers close the connection", async (t) => {
  draining = true;
  try {
    const r = await send("GET", "/api/v1/edge/abc/x");
    t.is(r.status, 200);
    t.is(r.headers.connection, "close");
  } finally {
    draining = false;
  }
});

test("a bare route is a GET with auth none, no rate limit, no query and no body", (t) => {
  t.notThrows(() => checkRoutes([route]));
  t.throws(() => checkRoutes([{ ...route, rateLimit: "api" }]), { message: /a bare route must be/ });
  t.throws(() => checkRoutes([{ ...route, auth: "workspace" }]), { message: /a bare route must be/ });
  t.throws(() => checkRoutes([{ ...route, query: z.object({}).strict() }]), { message: /a bare route must be/ });
});
