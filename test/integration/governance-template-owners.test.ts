// Guard templates owned by workspaces: a workspace key creates templates of its own workspace and
// replaces or deletes only those; platform templates (admin key) are read-only to workspaces
// (403 guard_template_read_only); another workspace's templates are invisible (404, never listed,
// never usable in an observability config); the owner column comes from a committed migration.
import test from "ava";
import { startApi, type TestApi, type TestWorkspace } from "../helpers/api.ts";
import { identity } from "../helpers/identities.ts";
import { provisionApp } from "../helpers/governance.ts";
import { query } from "../helpers/db.ts";

let api: TestApi;
let a: TestWorkspace;
let b: TestWorkspace;
let platformId: string;
let aId: string;
let bId: string;
const T = "/governance/guard-templates";
const tpl = (name: string) => ({ name, guardType: "custom", config: { keywords: [name.toLowerCase()] } });
const full = (name: string) => ({ name, description: null, guardType: "custom", config: { keywords: [name.toLowerCase()] } });
const ids = (r: { body: { id: string }[] }) => r.body.map((x) => x.id).sort();

test.before(async () => {
  api = await startApi();
  a = api;
  b = await api.createWorkspace("other team");
  const p = await api.fetchJson("POST", T, { key: api.adminKey, body: tpl("Platform codes") });
  const ra = await api.fetchJson("POST", T, { key: a.apiKey, body: tpl("A codes") });
  const rb = await api.fetchJson("POST", T, { key: b.apiKey, body: tpl("B codes") });
  if (p.status !== 201 || ra.status !== 201 || rb.status !== 201) throw new Error(`${p.text} ${ra.text} ${rb.text}`);
  [platformId, aId, bId] = [p.body.id, ra.body.id, rb.body.id];
});
test.after.always(async () => {
  await api?.stop();
});

test("a workspace key creates a template of its own workspace; the owner is in the body and the table", async (t) => {
  const r = await api.fetchJson("GET", `${T}/${aId}`, { key: a.apiKey });
  t.is(r.status, 200, r.text);
  t.like(r.body, { id: aId, workspaceId: a.workspaceId, name: "A codes", guardType: "custom" });
  t.is((await api.fetchJson("GET", `${T}/${platformId}`, { key: a.apiKey })).body.workspaceId, null);
  const rows = await query<{ id: string; workspace_id: string | null }>(
    api.db.url,
    `select id, workspace_id from governance_guard_templates where id = any($1)`,
    [[platformId, aId, bId]],
  );
  t.deepEqual(Object.fromEntries(rows.map((r) => [r.id, r.workspace_id])), {
    [platformId]: null,
    [aId]: a.workspaceId,
    [bId]: b.workspaceId,
  });
});

test("the list shows the platform's templates and the caller's own, never another workspace's", async (t) => {
  t.deepEqual(ids(await api.fetchJson("GET", T, { key: a.apiKey })), [platformId, aId].sort());
  t.deepEqual(ids(await api.fetchJson("GET", T, { key: b.apiKey })), [platformId, bId].sort());
  t.deepEqual(ids(await api.fetchJson("GET", T, { key: api.adminKey })), [platformId], "a platform admin key sees the platform's alone");
});

test("another workspace's template is 404 on GET, PUT and DELETE, and stays unchanged", async (t) => {
  for (const [method, body] of [
    ["GET", undefined],
    ["PUT", full("Taken over")],
    ["DELETE", undefined],
  ] as const) {
    const r = await api.fetchJson(method, `${T}/${bId}`, { key: a.apiKey, ...(body ? { body } : {}) });
    t.is(r.status, 404, `${method}: ${r.text}`);
    t.is(r.headers.get("content-type"), "application/problem+json");
    t.is(r.body.code, "guard_template_not_found");
    t.false(r.text.includes("B codes"), "nothing of B's template leaks");
    // a platform admin key does not reach into workspaces either
    t.is((await api.fetchJson(method, `${T}/${bId}`, { key: api.adminKey, ...(body ? { body } : {}) })).status, 404, `${method} as admin`);
  }
  t.like((await api.fetchJson("GET", `${T}/${bId}`, { key: b.apiKey })).body, { name: "B codes", workspaceId: b.workspaceId });
});

test("platform templates are read-only to workspace keys: PUT and DELETE are 403 guard_template_read_only", async (t) => {
  for (const [method, body] of [
    ["PUT", full("Hijacked")],
    ["DELETE", undefined],
  ] as const) {
    const r = await api.fetchJson(method, `${T}/${platformId}`, { key: a.apiKey, ...(body ? { body } : {}) });
    t.is(r.status, 403, `${method}: ${r.text}`);
    t.is(r.headers.get("content-type"), "application/problem+json");
    t.is(r.body.code, "guard_template_read_only");
  }
  t.is((await api.fetchJson("GET", `${T}/${platformId}`, { key: b.apiKey })).body.name, "Platform codes");
});

test("an app's scoped key cannot use the template endpoints", async (t) => {
  const app = await provisionApp(api, (await identity("operator")).token, "scoped");
  for (const [method, path] of [
    ["GET", T],
    ["POST", T],
    ["GET", `${T}/${aId}`],
  ] as const) {
    const r = await api.fetchJson(method, path, { key: app.key, ...(method === "POST" ? { body: tpl("x") } : {}) });
    t.is(r.status, 403, `${method} ${path}`);
    t.is(r.body.code, "insufficient_scope");
  }
});

test.serial("a workspace replaces and deletes its own templates; the owner cannot be changed by the body", async (t) => {
  const created = await api.fetchJson("POST", T, { key: a.apiKey, body: tpl("Temp") });
  const id = created.body.id as string;
  const owner = await api.fetchJson("PUT", `${T}/${id}`, { key: a.apiKey, body: { ...full("Temp"), workspaceId: b.workspaceId } });
  t.is(owner.status, 422);
  t.deepEqual(owner.body.errors, [{ field: "body.workspaceId", message: "unknown field" }]);
  const replaced = await api.fetchJson("PUT", `${T}/${id}`, {
    key: a.apiKey,
    body: { ...full("Temp v2"), guardType: "toxicity", config: { sensitivity: "high" } },
  });
  t.is(replaced.status, 200, replaced.text);
  t.like(replaced.body, { id, workspaceId: a.workspaceId, name: "Temp v2", guardType: "toxicity" });
  t.is((await api.fetchJson("DELETE", `${T}/${id}`, { key: a.apiKey })).status, 204);
  t.is((await api.fetchJson("GET", `${T}/${id}`, { key: a.apiKey })).status, 404);
});

test.serial("an observability config references platform templates and the workspace's own, never another workspace's", async (t) => {
  await provisionApp(api, (await identity("operator")).token, "cfg");
  const path = `/workspaces/${a.workspaceId}/governance/apps/cfg/observability-config`;
  const foreign = await api.fetchJson("PUT", path, {
    key: a.apiKey,
    body: { guards: { custom_templates: [{ template_id: platformId }, { template_id: bId }] } },
  });
  t.is(foreign.status, 422, foreign.text);
  t.deepEqual(foreign.body.errors, [{ field: "body.guards.custom_templates[1].template_id", message: `no guard template ${bId}` }]);
  t.false(foreign.text.includes("B codes"));
  const ok = await api.fetchJson("PUT", path, {
    key: a.apiKey,
    body: { guards: { custom_templates: [{ template_id: platformId }, { template_id: aId }] } },
  });
  t.is(ok.status, 200, ok.text);
  t.deepEqual(
    ok.body.guards.custom_templates.map((e: { template_name: string }) => e.template_name),
    ["Platform codes", "A codes"],
  );
});

test("the migration's owner column: nullable (null: a platform template), a foreign key that removes a workspace's templates with it", async (t) => {
  const [col] = await query<{ is_nullable: string; data_type: string }>(
    api.db.url,
    `select is_nullable, data_type from information_schema.columns where table_name = 'governance_guard_templates' and column_name = 'workspace_id'`,
  );
  t.deepEqual(col, { is_nullable: "YES", data_type: "character varying" });
  const [fk] = await query<{ def: string }>(
    api.db.url,
    `select pg_get_constraintdef(oid) as def from pg_constraint where conrelid = 'governance_guard_templates'::regclass and contype = 'f'`,
  );
  t.regex(fk!.def, /REFERENCES workspaces\(id\) ON DELETE CASCADE/);
});
