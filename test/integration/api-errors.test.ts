// Every failure of a request is an RFC 9457 problem with the right status and a stable code:
// validation (every offending field), malformed JSON, oversized body, wrong content type, unknown
// route, wrong method, domain errors, unexpected errors (nothing leaked, logged with the request id).
import test, { type ExecutionContext } from "ava";
import { z } from "zod";
import { ConflictError } from "../../api/errors.ts";
import { defineRoute } from "../../api/http/route.ts";
import { startApi, type ApiResponse, type TestApi } from "../helpers/api.ts";

const LIMIT = 4096;

const ProbeBody = z
  .object({
    name: z.string().min(1).max(20),
    cpuLimitMillicores: z.int().min(50).max(32000),
    type: z.enum(["web", "api"]).default("web"),
    nested: z.object({ flag: z.boolean() }).strict().optional(),
    items: z.array(z.object({ n: z.int() }).strict()).optional(),
  })
  .strict()
  .meta({ id: "ProbeBody" });

const Probe = z.object({ name: z.string(), cpuLimitMillicores: z.int(), type: z.string(), limit: z.int(), wsId: z.string() }).strict();

const routes = [
  defineRoute({
    method: "post",
    path: "/workspaces/:wsId/probe",
    operationId: "probe",
    summary: "test",
    tags: ["test"],
    auth: "workspace",
    params: z.object({ wsId: z.string() }).strict(),
    query: z.object({ limit: z.coerce.number().int().min(1).max(100).default(20) }).strict(),
    body: ProbeBody,
    responses: { 200: Probe },
    handler: ({ params, query, body }) =>
      Promise.resolve({
        status: 200,
        body: { name: body.name, cpuLimitMillicores: body.cpuLimitMillicores, type: body.type, limit: query.limit, wsId: params.wsId },
      }),
  }),
  defineRoute({
    method: "post",
    path: "/public/echo",
    operationId: "echo",
    summary: "test",
    tags: ["test"],
    auth: "none",
    body: z.object({ text: z.string() }).strict().optional(),
    responses: { 200: z.object({ text: z.string().nullable() }).strict() },
    handler: ({ body }) => Promise.resolve({ status: 200, body: { text: body?.text ?? null } }),
  }),
  defineRoute({
    method: "delete",
    path: "/public/nobody",
    operationId: "nobody",
    summary: "test",
    tags: ["test"],
    auth: "none",
    responses: { 204: null },
    handler: () => Promise.resolve({ status: 204 }),
  }),
  defineRoute({
    method: "get",
    path: "/public/boom",
    operationId: "boom",
    summary: "test",
    tags: ["test"],
    auth: "none",
    responses: { 200: z.object({}).strict() },
    handler: () => Promise.reject(new Error("db password hunter2 at 10.0.0.7 exploded")),
  }),
  defineRoute({
    method: "get",
    path: "/public/conflict",
    operationId: "conflict",
    summary: "test",
    tags: ["test"],
    auth: "none",
    responses: { 200: z.object({}).strict(), 409: null },
    handler: () =>
      Promise.reject(new ConflictError("slug_taken", "The slug 'web' is already used in this workspace.", { details: { slug: "web" } })),
  }),
];

// Registered param-first on purpose: the most specific path must still win.
routes.push(
  defineRoute({
    method: "get",
    path: "/public/things/:thingId",
    operationId: "getThingById",
    summary: "test",
    tags: ["test"],
    auth: "none",
    params: z.object({ thingId: z.string() }).strict(),
    responses: { 200: z.object({ by: z.literal("id"), id: z.string() }).strict() },
    handler: ({ params }) => Promise.resolve({ status: 200, body: { by: "id" as const, id: params.thingId } }),
  }),
  defineRoute({
    method: "get",
    path: "/public/things/stats",
    operationId: "getThingStats",
    summary: "test",
    tags: ["test"],
    auth: "none",
    responses: { 200: z.object({ by: z.literal("stats") }).strict() },
    handler: () => Promise.resolve({ status: 200, body: { by: "stats" as const } }),
  }),
);

let api: TestApi;
test.before(async () => {
  api = await startApi({ routes, env: { BERTH_BODY_LIMIT_BYTES: String(LIMIT) } });
});
test.after.always(async () => {
  await api?.stop();
});

const probePath = () => `/workspaces/${api.workspaceId}/probe`;
const good = { name: "web", cpuLimitMillicores: 500 };

function assertProblem(t: ExecutionContext, r: ApiResponse, status: number, code: string) {
  t.is(r.status, status, r.text);
  t.regex(r.headers.get("content-type") ?? "", /^application\/problem\+json/);
  t.is(r.body.status, status);
  t.is(r.body.code, code);
  t.is(r.body.type, `https://berth.dev/problems/${code}`);
  t.is(typeof r.body.title, "string");
  t.is(typeof r.body.detail, "string");
  t.is(r.body.requestId, r.headers.get("x-request-id"));
  t.truthy(r.body.requestId);
}

test("a valid request passes parsed values (defaults, coerced query) to the handler", async (t) => {
  const r = await api.fetchJson("POST", `${probePath()}?limit=7`, { body: good });
  t.is(r.status, 200, r.text);
  t.deepEqual(r.body, { name: "web", cpuLimitMillicores: 500, type: "web", limit: 7, wsId: api.workspaceId });
  t.truthy(r.headers.get("x-request-id"));
});

test("validation reports every offending field: unknown, wrong type, out of range, missing", async (t) => {
  const r = await api.fetchJson("POST", `${probePath()}?limit=500&verbose=1`, {
    body: {
      cpuLimitMillicores: "lots",
      type: "desktop",
      extra: 1,
      other: true,
      nested: { flag: "yes", more: 1 },
      items: [{ n: 1 }, { n: 1.5 }],
    },
  });
  assertProblem(t, r, 422, "validation_failed");
  t.is(r.body.instance, `/api/v1${probePath()}`);
  const fields = Object.fromEntries((r.body.errors as { field: string; message: string }[]).map((e) => [e.field, e.message]));
  t.deepEqual(Object.keys(fields).sort(), [
    "body.cpuLimitMillicores",
    "body.extra",
    "body.items[1].n",
    "body.name",
    "body.nested.flag",
    "body.nested.more",
    "body.other",
    "body.type",
    "query.limit",
    "query.verbose",
  ]);
  t.is(fields["body.name"], "required");
  t.is(fields["body.extra"], "unknown field");
  t.is(fields["body.nested.more"], "unknown field");
  t.regex(fields["body.cpuLimitMillicores"]!, /expected number/);
  t.regex(fields["query.limit"]!, /<=100/);
});

test("out-of-range values are refused at both bounds", async (t) => {
  for (const cpu of [49, 32001]) {
    const r = await api.fetchJson("POST", probePath(), { body: { ...good, cpuLimitMillicores: cpu } });
    assertProblem(t, r, 422, "validation_failed");
    t.deepEqual(
      (r.body.errors as { field: string }[]).map((e) => e.field),
      ["body.cpuLimitMillicores"],
    );
  }
  const ok = await api.fetchJson("POST", probePath(), { body: { ...good, cpuLimitMillicores: 32000 } });
  t.is(ok.status, 200);
});

test("a body that is not an object is a validation error on `body`", async (t) => {
  const r = await api.fetchJson("POST", probePath(), { body: [1, 2] });
  assertProblem(t, r, 422, "validation_failed");
  t.deepEqual(
    (r.body.errors as { field: string }[]).map((e) => e.field),
    ["body"],
  );
});

test("a required body that is missing is a validation error", async (t) => {
  const r = await api.fetchJson("POST", probePath());
  assertProblem(t, r, 422, "validation_failed");
  t.deepEqual(r.body.errors, [{ field: "body", message: "required: send a JSON body" }]);
});

test("an optional body may be omitted; a route without a body refuses one", async (t) => {
  const none = await api.fetchJson("POST", "/public/echo");
  t.is(none.status, 200);
  t.deepEqual(none.body, { text: null });
  const some = await api.fetchJson("POST", "/public/echo", { body: { text: "hi" } });
  t.deepEqual(some.body, { text: "hi" });
  const del = await api.fetchJson("DELETE", "/public/nobody");
  t.is(del.status, 204);
  t.is(del.text, "");
  const withBody = await api.fetchJson("DELETE", "/public/nobody", { body: { x: 1 } });
  assertProblem(t, withBody, 422, "validation_failed");
  t.deepEqual(withBody.body.errors, [{ field: "body", message: "this operation takes no request body" }]);
});

test("text PostgreSQL cannot store (NUL, a lone surrogate) is refused in params, query and body, naming each field", async (t) => {
  const r = await api.fetchJson("POST", `${probePath()}?limit=7`, {
    rawBody: '{"name":"a\\u0000b","cpuLimitMillicores":500,"items":[{"n":1,"\\ud800":1}]}',
    headers: { "Content-Type": "application/json" },
  });
  assertProblem(t, r, 422, "validation_failed");
  t.like(r.body.errors, [
    { field: "body.name", message: "must be well-formed Unicode text without NUL characters" },
    { field: "body.items[0]", message: "a key must be well-formed Unicode text without NUL characters" },
  ]);
  const q = await api.fetchJson("POST", `${probePath()}?limit=%00`, { body: good });
  assertProblem(t, q, 422, "validation_failed");
  t.is(q.body.errors[0].field, "query.limit");
  // found by the fuzzer on real routes: a key's name and a trace filter used to reach PostgreSQL and fail with a 500
  const key = await api.fetchJson("POST", `/workspaces/${api.workspaceId}/api-keys`, {
    rawBody: '{"name":"a\\u0000"}',
    headers: { "Content-Type": "application/json" },
  });
  assertProblem(t, key, 422, "validation_failed");
  t.is(key.body.errors[0].field, "body.name");
});

test("malformed JSON is a 400 invalid_json", async (t) => {
  for (const raw of ['{"name": "web",', "{name: 1}", "nul", '{"a":1}}']) {
    const r = await api.fetchJson("POST", probePath(), { rawBody: raw, headers: { "Content-Type": "application/json" } });
    assertProblem(t, r, 400, "invalid_json");
  }
  const bad = await api.fetchJson("POST", probePath(), {
    rawBody: new Uint8Array([0x7b, 0xff, 0xfe, 0x7d]),
    headers: { "Content-Type": "application/json" },
  });
  assertProblem(t, bad, 400, "invalid_json");
});

test("a body over the limit is a 413 payload_too_large, with and without Content-Length", async (t) => {
  const big = JSON.stringify({ ...good, name: "x".repeat(LIMIT) });
  const r = await api.fetchJson("POST", probePath(), { rawBody: big, headers: { "Content-Type": "application/json" } });
  assertProblem(t, r, 413, "payload_too_large");
  t.is(r.body.details.limitBytes, LIMIT);

  // Chunked: no Content-Length, the limit is enforced while reading.
  const chunks = [big.slice(0, 1000), big.slice(1000)];
  const stream = new ReadableStream<Uint8Array>({
    pull(c) {
      const next = chunks.shift();
      if (next === undefined) c.close();
      else c.enqueue(new TextEncoder().encode(next));
    },
  });
  const res = await fetch(`${api.url}/api/v1${probePath()}`, {
    method: "POST",
    body: stream,
    duplex: "half",
    headers: { "Content-Type": "application/json", Authorization: `Bearer ${api.apiKey}` },
  });
  t.is(res.status, 413);
  t.is(((await res.json()) as { code: string }).code, "payload_too_large");

  const justUnder = JSON.stringify({ ...good, name: "ok", pad: undefined });
  t.is((await api.fetchJson("POST", probePath(), { rawBody: justUnder, headers: { "Content-Type": "application/json" } })).status, 200);
});

test("a body without Content-Type or with another media type is a 415", async (t) => {
  const body = JSON.stringify(good);
  for (const type of ["text/plain", "application/x-www-form-urlencoded", "application/json; charset=latin1", "application/jsonx"]) {
    const r = await api.fetchJson("POST", probePath(), { rawBody: body, headers: { "Content-Type": type } });
    assertProblem(t, r, 415, "unsupported_media_type");
  }
  const noType = await fetch(`${api.url}/api/v1${probePath()}`, {
    method: "POST",
    body: new TextEncoder().encode(body),
    headers: { Authorization: `Bearer ${api.apiKey}` },
  });
  t.is(noType.status, 415);
  t.regex(noType.headers.get("content-type") ?? "", /^application\/problem\+json/);
  const charset = await api.fetchJson("POST", probePath(), {
    rawBody: body,
    headers: { "Content-Type": "application/json; charset=UTF-8" },
  });
  t.is(charset.status, 200);
});

test("an unknown route is a 404 route_not_found, under /api/v1 and at the root", async (t) => {
  for (const path of ["/nothing-here", "/api/v2/workspaces"]) {
    const r = await api.fetchJson("GET", path);
    assertProblem(t, r, 404, "route_not_found");
  }
  const root = await fetch(`${api.url}/`);
  t.is(root.status, 404);
  t.regex(root.headers.get("content-type") ?? "", /^application\/problem\+json/);
  t.is(((await root.json()) as { code: string }).code, "route_not_found");
});

test("a known path with the wrong method is a 405 with Allow", async (t) => {
  const r = await api.fetchJson("PUT", probePath(), { body: good });
  assertProblem(t, r, 405, "method_not_allowed");
  t.is(r.headers.get("allow"), "POST");
  t.deepEqual(r.body.details, { allow: ["POST"] });
  const keys = await api.fetchJson("PATCH", `/workspaces/${api.workspaceId}/api-keys`);
  t.is(keys.status, 405);
  t.is(keys.headers.get("allow"), "GET, HEAD, POST");
  const opts = await api.fetchJson("OPTIONS", `/workspaces/${api.workspaceId}/api-keys`);
  t.is(opts.status, 204);
  t.is(opts.headers.get("allow"), "GET, HEAD, POST, OPTIONS");
});

test("a domain error is rendered with its status, code and details", async (t) => {
  const r = await api.fetchJson("GET", "/public/conflict");
  assertProblem(t, r, 409, "slug_taken");
  t.is(r.body.detail, "The slug 'web' is already used in this workspace.");
  t.deepEqual(r.body.details, { slug: "web" });
  t.is(r.body.title, "Conflict");
});

test("an unexpected error is a 500 internal that leaks nothing and is logged with the request id", async (t) => {
  const r = await api.fetchJson("GET", "/public/boom");
  assertProblem(t, r, 500, "internal");
  t.false(r.text.includes("hunter2"));
  t.false(r.text.includes("10.0.0.7"));
  t.false(r.text.includes("exploded"));
  t.false("errors" in r.body);
  t.false("details" in r.body);
  const line = api.logs.find((l) => l.requestId === r.body.requestId && l.level === "error" && l.err);
  t.truthy(line, "the failure is logged with the request id");
  t.regex((line!.err as { message: string }).message, /exploded/);
});

test("a safe X-Request-Id from the caller is kept; an unsafe one is replaced", async (t) => {
  const mine = await api.fetchJson("GET", "/public/conflict", { headers: { "X-Request-Id": "trace-abc.123" } });
  t.is(mine.headers.get("x-request-id"), "trace-abc.123");
  t.is(mine.body.requestId, "trace-abc.123");
  const unsafe = await api.fetchJson("GET", "/public/conflict", { headers: { "X-Request-Id": 'a b"<script>' } });
  t.regex(unsafe.headers.get("x-request-id") ?? "", /^[0-9a-f-]{36}$/);
});

test("the access log has method, route, status and duration, and no bodies", async (t) => {
  const r = await api.fetchJson("POST", probePath(), { body: { ...good, name: "logcheck-name" } });
  t.is(r.status, 200);
  const line = api.logs.find((l) => l.requestId === r.headers.get("x-request-id") && l.msg === "request");
  t.truthy(line);
  t.is(line!.method, "POST");
  t.is(line!.route, "/api/v1/workspaces/:wsId/probe");
  t.is(line!.status, 200);
  t.is(typeof line!.durationMs, "number");
  t.false(JSON.stringify(api.logs).includes("logcheck-name"));
});

test("a literal path segment wins over a parameter, whatever the registration order", async (t) => {
  t.deepEqual((await api.fetchJson("GET", "/public/things/stats")).body, { by: "stats" });
  t.deepEqual((await api.fetchJson("GET", "/public/things/t-1")).body, { by: "id", id: "t-1" });
  t.deepEqual((await api.fetchJson("GET", "/public/things/a%20b")).body, { by: "id", id: "a b" }, "params are URL-decoded");
});
