// The OpenAPI document is generated from the same RouteDefs that validate requests, lists every
// route, and responses are checked against it (BERTH_VALIDATE_RESPONSES): a handler that returns
// another shape or an undocumented status fails loudly with 500 response_schema_mismatch.
import test from "ava";
import { Script, createContext, runInContext } from "node:vm";
import { z } from "zod";
import { defineRoute, openApiPath, pathParamNames, type RouteDef } from "../../api/http/route.ts";
import { DOCS_SCRIPT } from "../../api/http/docs.ts";
import { composeRoutes } from "../../api/main.ts";
import { allRoutes } from "../../api/server.ts";
import { startApi, type TestApi } from "../helpers/api.ts";

const Thing = z
  .object({ id: z.string(), size: z.int().min(0), createdAt: z.iso.datetime() })
  .strict()
  .meta({ id: "TestThing" });

const testRoutes: RouteDef[] = [
  defineRoute({
    method: "get",
    path: "/things/:thingId",
    operationId: "getThing",
    summary: "A thing",
    tags: ["test"],
    auth: "workspace",
    params: z.object({ thingId: z.string().describe("The thing") }).strict(),
    query: z.object({ expand: z.enum(["all", "none"]).optional() }).strict(),
    responses: { 200: Thing },
    handler: ({ params }) =>
      Promise.resolve({ status: 200, body: { id: params.thingId, size: 3, createdAt: new Date("2026-01-02T03:04:05Z") } }),
  }),
  defineRoute({
    method: "get",
    path: "/wrong-shape",
    operationId: "wrongShape",
    summary: "Returns what it does not document",
    tags: ["test"],
    auth: "none",
    responses: { 200: Thing },
    handler: () => Promise.resolve({ status: 200, body: { id: "x", size: -1, createdAt: "yesterday", secretHash: "abc" } }),
  }),
  defineRoute({
    method: "post",
    path: "/wrong-status",
    operationId: "wrongStatus",
    summary: "Returns an undocumented status",
    tags: ["test"],
    auth: "none",
    responses: { 201: Thing },
    handler: () => Promise.resolve({ status: 200, body: { id: "x", size: 1, createdAt: new Date().toISOString() } }),
  }),
  defineRoute({
    method: "delete",
    path: "/wrong-empty",
    operationId: "wrongEmpty",
    summary: "Returns a body on a 204",
    tags: ["test"],
    auth: "none",
    responses: { 204: null },
    handler: () => Promise.resolve({ status: 204, body: { oops: true } }),
  }),
];

let api: TestApi;
// eslint-disable-next-line @typescript-eslint/no-explicit-any
let doc: any;
test.before(async () => {
  api = await startApi({ routes: testRoutes });
  const r = await api.fetchJson("GET", "/openapi.json", { key: null });
  if (r.status !== 200) throw new Error(`openapi.json: ${r.status} ${r.text}`);
  doc = r.body;
});
test.after.always(async () => {
  await api?.stop();
});

type Op = {
  operationId: string;
  security: Record<string, string[]>[];
  parameters: { name: string; in: string; required: boolean }[];
  responses: Record<string, { content?: Record<string, { schema: unknown }> }>;
  requestBody?: { content: Record<string, { schema: unknown }> };
};
const operations = (): [string, string, Op][] =>
  Object.entries(doc.paths as Record<string, Record<string, Op>>).flatMap(([p, ms]) =>
    Object.entries(ms).map(([m, op]) => [p, m, op] as [string, string, Op]),
  );

test("the document is OpenAPI 3.1 with info, servers, tags and bearer security schemes", (t) => {
  t.is(doc.openapi, "3.1.0");
  t.is(doc.info.title, "Berth API");
  t.truthy(doc.info.version);
  t.deepEqual(
    (doc.servers as { url: string }[]).map((s) => s.url),
    ["/api/v1"],
  );
  for (const name of ["workspaceKey", "platformAdminKey", "appKey"]) {
    t.is(doc.components.securitySchemes[name].type, "http");
    t.is(doc.components.securitySchemes[name].scheme, "bearer");
  }
  t.true((doc.tags as { name: string }[]).some((tag) => tag.name === "api-keys"));
});

test("every mounted route is in the document once, with a unique operationId", (t) => {
  const expected = allRoutes([...composeRoutes(api.services), ...testRoutes]);
  const ops = operations();
  t.is(ops.length, expected.length);
  for (const r of expected) {
    const op = doc.paths[openApiPath(r.path)]?.[r.method] as Op | undefined;
    t.truthy(op, `${r.method} ${r.path}`);
    t.is(op?.operationId, r.operationId);
  }
  const ids = ops.map(([, , op]) => op.operationId);
  t.is(new Set(ids).size, ids.length);
});

test("security, parameters and error responses follow each route's definition", (t) => {
  for (const [path, method, op] of operations()) {
    const where = `${method} ${path}`;
    for (const name of pathParamNames(path.replace(/\{(\w+)\}/g, ":$1"))) {
      const p = op.parameters.find((x) => x.name === name && x.in === "path");
      t.truthy(p, `${where}: path parameter ${name}`);
      t.true(p?.required);
    }
    for (const [status, res] of Object.entries(op.responses)) {
      if (Number(status) < 400) continue;
      t.deepEqual(res.content, { "application/problem+json": { schema: { $ref: "#/components/schemas/Problem" } } }, `${where} ${status}`);
    }
    t.truthy(op.responses["500"], `${where} documents 500`);
    t.truthy(op.responses["422"], `${where} documents 422`);
  }
  const keys = doc.paths["/workspaces/{wsId}/api-keys"];
  t.deepEqual(keys.get.security, [{ workspaceKey: [] }]);
  t.deepEqual(doc.paths["/workspaces"].post.security, [{ platformAdminKey: [] }]);
  t.deepEqual(doc.paths["/openapi.json"].get.security, []);
  t.deepEqual(doc.paths["/governance/guard-templates"].post.security, [{ workspaceKey: [] }, { platformAdminKey: [] }], "either key");
  t.truthy(keys.post.responses["401"] && keys.post.responses["413"] && keys.post.responses["415"] && keys.post.responses["400"]);
  t.is(doc.paths["/openapi.json"].get.responses["401"], undefined, "public routes have no 401");
  t.deepEqual(keys.post.requestBody.content["application/json"].schema, { $ref: "#/components/schemas/CreateApiKeyRequest" });
  const thing = doc.paths["/things/{thingId}"].get as Op;
  t.deepEqual(
    thing.parameters.map((p) => [p.name, p.in, p.required]),
    [
      ["thingId", "path", true],
      ["expand", "query", false],
    ],
  );
});

test("named schemas are components; every $ref resolves; request schemas refuse unknown keys", (t) => {
  const schemas = doc.components.schemas;
  for (const name of ["Problem", "FieldError", "ApiKey", "CreatedApiKey", "CreateApiKeyRequest", "Workspace", "TestThing"])
    t.truthy(schemas[name], name);
  const refs = [...JSON.stringify(doc).matchAll(/"\$ref":"([^"]+)"/g)].map((m) => m[1]!);
  t.true(refs.length > 10);
  for (const ref of refs) {
    t.true(ref.startsWith("#/components/schemas/"), ref);
    t.truthy(schemas[ref.slice("#/components/schemas/".length)], ref);
  }
  t.is(schemas.CreateApiKeyRequest.additionalProperties, false);
  t.deepEqual(schemas.CreateApiKeyRequest.required, ["name"]);
  t.deepEqual(schemas.Problem.required, ["type", "title", "status", "detail", "instance", "code", "requestId"]);
});

test("a response that matches its documented schema is served", async (t) => {
  const r = await api.fetchJson("GET", "/things/t1?expand=all");
  t.is(r.status, 200, r.text);
  t.deepEqual(r.body, { id: "t1", size: 3, createdAt: "2026-01-02T03:04:05.000Z" });
});

test("a response of another shape is a 500 response_schema_mismatch, logged", async (t) => {
  const r = await api.fetchJson("GET", "/wrong-shape");
  t.is(r.status, 500);
  t.is(r.body.code, "response_schema_mismatch");
  const reasons: string[] = r.body.details.reasons;
  t.true(reasons.some((x) => x.startsWith("body.size")));
  t.true(reasons.some((x) => x.startsWith("body.createdAt")));
  t.true(reasons.some((x) => x.startsWith("body.secretHash")));
  const line = api.logs.find((l) => l.requestId === r.body.requestId && l.msg === "response does not match its documented schema");
  t.truthy(line);
  t.is(line!.level, "error");
});

test("an undocumented status, or a body where none is documented, is a mismatch too", async (t) => {
  const status = await api.fetchJson("POST", "/wrong-status");
  t.is(status.status, 500);
  t.is(status.body.code, "response_schema_mismatch");
  t.regex(status.body.details.reasons[0], /status 200 is not documented/);
  const empty = await api.fetchJson("DELETE", "/wrong-empty");
  t.is(empty.status, 500);
  t.is(empty.body.code, "response_schema_mismatch");
});

test("the docs page is self-contained HTML that renders the document", async (t) => {
  const res = await fetch(`${api.url}/api/v1/docs`);
  t.is(res.status, 200);
  t.regex(res.headers.get("content-type") ?? "", /^text\/html/);
  const csp = res.headers.get("content-security-policy") ?? "";
  t.regex(csp, /default-src 'none'/);
  t.regex(csp, /script-src 'sha256-/);
  const html = await res.text();
  t.false(/<script[^>]+src=/i.test(html), "no external script");
  t.false(/<link[^>]+href=/i.test(html), "no external stylesheet");
  t.false(/https?:\/\//.test(html), "no absolute URL at all");
  t.true(html.includes("/openapi.json"));
  t.notThrows(() => new Script(DOCS_SCRIPT), "the inline script parses");
  t.true(html.includes(DOCS_SCRIPT));
});

/** Just enough DOM for the docs script: elements with children, attributes and textContent. */
class FakeElement {
  children: FakeElement[] = [];
  attrs: Record<string, string> = {};
  textContent = "";
  tag: string;
  constructor(tag: string) {
    this.tag = tag;
  }
  appendChild(c: FakeElement) {
    this.children.push(c);
    return c;
  }
  setAttribute(k: string, v: string) {
    this.attrs[k] = v;
  }
  allText(): string {
    return [this.textContent, ...this.children.map((c) => c.allText())].join(" ");
  }
  find(pred: (e: FakeElement) => boolean): FakeElement[] {
    return [...(pred(this) ? [this] : []), ...this.children.flatMap((c) => c.find(pred))];
  }
}

test("the docs page's script renders every operation of the document it fetches", async (t) => {
  const app = new FakeElement("div");
  const fetched: string[] = [];
  const context = createContext({
    document: {
      title: "",
      getElementById: (id: string) => (id === "app" ? app : null),
      createElement: (tag: string) => new FakeElement(tag),
    },
    location: { pathname: "/api/v1/docs" },
    fetch: (url: string) => {
      fetched.push(url);
      return fetch(api.url + url);
    },
    JSON,
    Object,
    Number,
    Error,
  });
  runInContext(DOCS_SCRIPT, context);
  for (let i = 0; i < 100 && app.children.length < 2; i++) await new Promise((r) => setTimeout(r, 20));
  t.deepEqual(fetched, ["/api/v1/openapi.json"]);
  const text = app.allText();
  for (const [, , op] of operations()) t.true(text.includes(`operationId: ${op.operationId}`), op.operationId);
  t.true(app.find((e) => e.tag === "details" && e.attrs.id === "schema-Problem").length === 1);
  t.is(app.find((e) => e.attrs.class === "m delete").length, operations().filter(([, m]) => m === "delete").length);
});
