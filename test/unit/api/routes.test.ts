// Route definitions (pure): the build-time checks, response matching, content types and the
// OpenAPI generation from zod schemas.
import test from "ava";
import { z } from "zod";
import { isJsonContentType } from "../../../api/http/body.ts";
import { buildOpenApiDocument } from "../../../api/http/openapi.ts";
import { defineRoute, openApiPath, pathParamNames, type RouteDef } from "../../../api/http/route.ts";
import { checkRoutes, nonStrictObjects, responseMismatches, unstorableText } from "../../../api/http/router.ts";
import { openApiDocument } from "../../../api/main.ts";

const ok = () => Promise.resolve({ status: 200, body: {} });
const base = { summary: "s", tags: ["t"], auth: "none" as const, responses: { 200: z.object({}).strict() }, handler: ok };

test("body and query schemas must refuse unknown keys, at every depth", (t) => {
  t.deepEqual(nonStrictObjects(z.object({ a: z.string() }).strict()), []);
  t.deepEqual(nonStrictObjects(z.object({ a: z.string() })), ["/"]);
  t.deepEqual(nonStrictObjects(z.object({ a: z.object({ b: z.string() }) }).strict()), ["/properties/a"]);
  t.deepEqual(nonStrictObjects(z.object({ m: z.record(z.string(), z.int()) }).strict()), [], "records are maps, not objects");
  const err = t.throws(() =>
    checkRoutes([defineRoute({ ...base, method: "post", path: "/x", operationId: "x", body: z.object({ a: z.string() }) })]),
  );
  t.regex(err.message, /body schema must refuse unknown keys/);
  t.throws(() => checkRoutes([defineRoute({ ...base, method: "get", path: "/x", operationId: "x", query: z.object({ q: z.string() }) })]), {
    message: /query schema/,
  });
});

test("operationIds and method+path are unique; params match the path", (t) => {
  const a = defineRoute({ ...base, method: "get", path: "/a/:id", operationId: "a" });
  t.notThrows(() => checkRoutes([a]));
  t.throws(() => checkRoutes([a, { ...a, path: "/b" }]), { message: /duplicate operationId/ });
  t.throws(() => checkRoutes([a, { ...a, operationId: "b", path: "/a/:other" }]), { message: /duplicate method and path/ });
  t.throws(() => checkRoutes([{ ...a, params: z.object({ nope: z.string() }).strict() }]), {
    message: /params schema declares \[nope\] but the path has \[id\]/,
  });
  t.throws(() => checkRoutes([{ ...a, path: "a" }]), { message: /must start with/ });
  t.throws(
    () => checkRoutes([{ ...a, auth: "workspace-or-platform-admin", path: "/workspaces/:wsId/x" }]),
    { message: /cannot name a workspace in its path/ },
    "a platform admin key is scoped to no workspace, so such a route could not check the path's",
  );
});

test("responseMismatches: documented status, body presence and shape", (t) => {
  const route: RouteDef = {
    ...base,
    method: "get",
    path: "/r",
    operationId: "r",
    responses: { 200: z.object({ at: z.iso.datetime(), n: z.int() }).strict(), 204: null },
  };
  t.deepEqual(
    responseMismatches(route, { status: 200, body: { at: new Date(0), n: 1 } }),
    [],
    "dates are checked as they go over the wire",
  );
  t.deepEqual(responseMismatches(route, { status: 204 }), []);
  t.regex(responseMismatches(route, { status: 201, body: {} })[0]!, /status 201 is not documented/);
  t.regex(responseMismatches(route, { status: 204, body: {} })[0]!, /without a body/);
  t.regex(responseMismatches(route, { status: 200 })[0]!, /with a body but the handler returned none/);
  t.deepEqual(
    responseMismatches(route, { status: 200, body: { at: "x", n: 1, leaked: "hash" } }).map((s) => s.split(":")[0]),
    ["body.at", "body.leaked"],
  );
});

test("only application/json (UTF-8) is accepted", (t) => {
  for (const v of [
    "application/json",
    "Application/JSON",
    "application/json; charset=utf-8",
    'application/json;charset="UTF-8"',
    "application/json; charset=utf8",
  ])
    t.true(isJsonContentType(v), v);
  for (const v of ["", "text/json", "application/json-patch+json", "application/json; charset=iso-8859-1", "text/plain"])
    t.false(isJsonContentType(v), v);
});

test("path helpers", (t) => {
  t.is(openApiPath("/workspaces/:wsId/apps/:appId"), "/workspaces/{wsId}/apps/{appId}");
  t.deepEqual(pathParamNames("/workspaces/:wsId/apps/:appId"), ["wsId", "appId"]);
});

test("the generated document names schemas by id and splits request/response variants only when they differ", (t) => {
  const Item = z
    .object({ size: z.int().default(1), label: z.string() })
    .strict()
    .meta({ id: "Item" });
  const Tag = z.object({ name: z.string() }).strict().meta({ id: "Tag" });
  const routes: RouteDef[] = [
    defineRoute({
      method: "post",
      path: "/items/:itemId",
      operationId: "putItem",
      summary: "s",
      tags: ["items"],
      auth: "workspace",
      params: z.object({ itemId: z.string().describe("the item") }).strict(),
      query: z.object({ dryRun: z.stringbool().optional() }).strict(),
      body: z.object({ item: Item, tags: z.array(Tag) }).strict(),
      responses: { 201: z.object({ item: Item, tags: z.array(Tag) }).strict(), 409: null },
      handler: ok,
    }),
    defineRoute({ ...base, method: "delete", path: "/items/:itemId", operationId: "deleteItem", responses: { 204: null } }),
  ];
  const doc = buildOpenApiDocument(routes);
  const s = doc.components.schemas;
  t.truthy(s.Item);
  t.truthy(s.ItemInput, "defaults make the request variant differ (size optional)");
  t.deepEqual(s.ItemInput!.required, ["label"]);
  t.deepEqual(s.Item!.required, ["size", "label"]);
  t.truthy(s.Tag);
  t.is(s.TagInput, undefined, "identical variants are folded");
  const op = doc.paths["/items/{itemId}"]!.post!;
  t.deepEqual(op.security, [{ workspaceKey: [] }]);
  t.deepEqual(op.parameters, [
    { name: "itemId", in: "path", required: true, description: "the item", schema: { type: "string" } },
    { name: "dryRun", in: "query", required: false, schema: { type: "string" } },
  ]);
  const responses = op.responses as Record<string, { content?: Record<string, unknown> }>;
  t.deepEqual(
    Object.keys(responses),
    ["201", "400", "401", "403", "404", "409", "413", "415", "422", "429", "431", "500"],
    '429: every route spends a rate-limit budget unless it says rateLimit: "none"',
  );
  t.deepEqual(responses["409"]!.content, { "application/problem+json": { schema: { $ref: "#/components/schemas/Problem" } } });
  t.true(JSON.stringify(op.requestBody).includes("#/components/schemas/ItemInput"));
  t.true(JSON.stringify(responses["201"]).includes('#/components/schemas/Item"'));
  const del = doc.paths["/items/{itemId}"]!.delete!;
  t.deepEqual(del.security, []);
  t.is((del.responses as Record<string, { content?: unknown }>)["204"]!.content, undefined);
  t.deepEqual((del.parameters as unknown[])[0], { name: "itemId", in: "path", required: true, schema: { type: "string" } });
});

test("two different schemas may not share an id", (t) => {
  const A = z.object({ a: z.string() }).strict().meta({ id: "Same" });
  const B = z.object({ b: z.string() }).strict().meta({ id: "Same" });
  const routes: RouteDef[] = [
    defineRoute({ ...base, method: "get", path: "/a", operationId: "a", responses: { 200: A } }),
    defineRoute({ ...base, method: "get", path: "/b", operationId: "b", responses: { 200: B } }),
  ];
  t.throws(() => buildOpenApiDocument(routes), { message: /two different schemas carry the id Same/ });
});

test("the whole API's document can be generated without a database or a cluster", (t) => {
  const doc = openApiDocument();
  t.is(doc.openapi, "3.1.0");
  for (const path of [
    "/workspaces",
    "/workspaces/{wsId}",
    "/workspaces/{wsId}/api-keys",
    "/workspaces/{wsId}/api-keys/{keyId}",
    "/openapi.json",
    "/docs",
  ])
    t.truthy(doc.paths[path], path);
  t.deepEqual(Object.keys(doc.paths["/workspaces/{wsId}/api-keys"]!).sort(), ["get", "post"]);
});

test("text PostgreSQL cannot store is found at every depth, keys included", (t) => {
  t.deepEqual(
    unstorableText({ a: "fine", b: ["ok", "x\u0000"], c: { "\ud800": 1, d: "\udc00z" } }, "body").map((e) => e.field),
    ["body.b[1]", "body.c", "body.c.d"],
  );
  t.deepEqual(unstorableText({ emoji: "\ud83d\ude00", text: "Grüße" }, "body"), [], "well-formed pairs and any other character are fine");
  t.is(
    unstorableText(
      Array.from({ length: 50 }, () => "\u0000"),
      "body",
    ).length,
    20,
    "at most 20 are reported",
  );
});
