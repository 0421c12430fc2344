// Tenancy, generated from the route table: every route that the server mounts (composeRoutes of
// api/main.ts, plus the OpenAPI routes, as allRoutes gives them to the server) is enumerated here,
// so a new route cannot skip this test. Each is classified by the auth mode of its definition; a
// mode this test does not know fails it, and so does a path parameter it has no id for.
//
// Two workspaces, A (the caller) and B (the victim), each with apps, traces with distinctive text,
// an extra API key and a guard template. For every route:
// - with A's workspace key and B's ids (B's workspace; or A's workspace with B's app, trace, key,
//   template, and the ids of other path parameters, found or made through the route table's own
//   collection routes: deployments, environment variables...): 404 (or 403), and no data of B in
//   the answer (a PUT under a client-chosen name may create A's own resource: 201, undone at once);
// - read routes with A's own ids answer nothing of B either;
// - keys of a kind the route does not take are refused (401/403), and a revoked key of a kind it
//   takes is 401 at once; platform admin routes that name a workspace (its members) check it;
// - an app's scoped key (gov_sk_) reads and writes its own store only: another app's project is
//   refused, a traceId that another store holds is a new trace of its own store, and its config is
//   its own.
// Afterwards B's data is exactly as before.
import test from "ava";
import { z } from "zod";
import { API_VERSION, WORKSPACE_LABEL } from "../../crds/schemas.ts";
import { WORKSPACE_PARAMS } from "../../api/auth/authenticate.ts";
import { composeRoutes } from "../../api/main.ts";
import { allRoutes } from "../../api/server.ts";
import { bodyOptional } from "../../api/http/router.ts";
import { pathParamNames, type AuthMode, type RouteDef } from "../../api/http/route.ts";
import { startApi, type ApiResponse, type TestApi, type TestWorkspace } from "../helpers/api.ts";
import { identity } from "../helpers/identities.ts";
import { keyOf } from "../helpers/governance.ts";

type KeyKind = "workspace" | "admin" | "app" | "operator";

/** The kinds of key each auth mode takes. A Record over AuthMode: a new mode does not compile until it is classified here. */
const ACCEPTS: Record<AuthMode, readonly KeyKind[]> = {
  none: [],
  workspace: ["workspace"],
  "platform-admin": ["admin"],
  "workspace-or-platform-admin": ["workspace", "admin"],
  "app-key": ["app"],
  operator: ["operator"],
};

interface Tenant extends TestWorkspace {
  label: string;
  /** apps by id: their key and a trace id */
  apps: Record<string, { key: string; traceId: string }>;
  extraKeyId: string;
  templateId: string;
}

let api: TestApi;
let A: Tenant;
let B: Tenant;
let operator: string;
let routes: RouteDef[];
/** B's data before the sweeps */
let before: unknown;

const marker = (label: string) => `${label}-zebra-7713`;
const memberEmail = (label: string) => `${label.toLowerCase()}-member@tenancy.example.test`;

/**
 * An app through the API ("shared" built from a Git repository, the others from an image), its
 * store provisioned as the operator does, one trace. Both workspaces have an app whose id is
 * "shared"; a host belongs to one service in the whole platform, so the second is applied as
 * kubectl would apply it (the id "shared", a slug of its own).
 */
async function createApp(w: TestWorkspace, label: string, slug: string): Promise<Tenant["apps"][string]> {
  const source =
    slug === "shared"
      ? { gitRepoUrl: `https://git.example.invalid/${label.toLowerCase()}/shop.git` }
      : { image: "registry.invalid/shop:1" };
  const body = { name: `${label} ${slug} service`, slug, ...source };
  const taken = slug === "shared" && label !== "Alfa";
  if (taken) {
    await api.services.kube.create(
      {
        apiVersion: API_VERSION,
        kind: "App",
        metadata: { name: slug, namespace: w.namespace, labels: { [WORKSPACE_LABEL]: w.workspaceId } },
        spec: { ...body, slug: `${slug}-${label.toLowerCase()}` },
      },
      "kubectl",
    );
  } else {
    const r = await api.fetchJson("POST", `/workspaces/${w.workspaceId}/apps`, { key: w.apiKey, body });
    if (r.status !== 201) throw new Error(`create ${slug}: ${r.text}`);
  }
  const app = await api.services.kube.get({ apiVersion: API_VERSION, kind: "App", namespace: w.namespace, name: slug });
  const p = await api.fetchJson("POST", "/internal/governance/provision", {
    key: operator,
    body: { namespace: w.namespace, appName: slug, appUid: app!.metadata.uid, generation: 1 },
  });
  if (p.status !== 200) throw new Error(`provision ${slug}: ${p.text}`);
  const key = keyOf(p.body.connectionString);
  const traceId = crypto.randomUUID();
  const t = await api.fetchJson("POST", "/governance/traces", {
    key,
    body: traceBody(traceId, `${marker(label)} ${slug} asks about invoices`),
  });
  if (t.status !== 201) throw new Error(`trace ${slug}: ${t.text}`);
  return { key, traceId };
}

function traceBody(traceId: string, input: string, extra: Record<string, unknown> = {}) {
  return {
    traceId,
    input,
    output: `${input}: answered`,
    model: "gpt-4o",
    latency: 10,
    tokens: { prompt: 1, completion: 1, total: 2 },
    timestamp: new Date().toISOString(),
    ...extra,
  };
}

async function tenant(w: TestWorkspace, label: string, slugs: string[]): Promise<Tenant> {
  const apps: Tenant["apps"] = {};
  for (const slug of slugs) apps[slug] = await createApp(w, label, slug);
  const key = await api.fetchJson("POST", `/workspaces/${w.workspaceId}/api-keys`, { key: w.apiKey, body: { name: `${label} extra key` } });
  const tpl = await api.fetchJson("POST", "/governance/guard-templates", {
    key: w.apiKey,
    body: { name: `${label} template`, guardType: "custom", config: { keywords: [marker(label)] } },
  });
  const cfg = await api.fetchJson("PUT", `/workspaces/${w.workspaceId}/governance/apps/${slugs[0]}/observability-config`, {
    key: w.apiKey,
    body: { guards: { custom_templates: [{ template_id: tpl.body.id }] } },
  });
  // a member (console sign-in with the identity provider), added with the platform admin key
  const member = await api.fetchJson("PUT", `/workspaces/${w.workspaceId}/members/${encodeURIComponent(memberEmail(label))}`, {
    key: api.adminKey,
  });
  if (key.status !== 201 || tpl.status !== 201 || cfg.status !== 200 || member.status !== 201)
    throw new Error(`${key.text} ${tpl.text} ${cfg.text} ${member.text}`);
  return { ...w, label, apps, extraKeyId: key.body.id, templateId: tpl.body.id };
}

test.before(async () => {
  api = await startApi({ workspaceName: "Alfa workspace" });
  operator = (await identity("operator")).token;
  A = await tenant(api, "Alfa", ["shared", "alfatwo"]);
  B = await tenant(await api.createWorkspace("Bravo workspace"), "Bravo", ["shared", "bravoonly"]);
  routes = allRoutes(composeRoutes(api.services));
  await discoverIds(A, 1);
  await discoverIds(B, 2);
  before = await snapshot(B);
});
test.after.always(async () => {
  await api?.stop();
});

// ---- building requests from route definitions ----------------------------------------------------

/** The id a path parameter takes for a tenant; undefined when this test has none (the route then fails it). */
function idFor(name: string, w: Tenant, appId: string): string | undefined {
  if ((WORKSPACE_PARAMS as readonly string[]).includes(name)) return w.workspaceId;
  const app = w.apps[appId];
  switch (name) {
    case "appId":
      return appId;
    case "traceId":
      return app?.traceId;
    case "keyId":
      return w.extraKeyId;
    case "id":
      return w.templateId;
    case "namespace":
      return w.namespace; // the edge check names the App by its namespace
    case "email":
      return memberEmail(w.label); // a workspace member (platform admin routes)
    default:
      return discovered.get(`${w.workspaceId}/${appId}/${name}`);
  }
}

/** Ids of other path parameters (a deployment's...), found through the route table's own collection routes. */
const discovered = new Map<string, string>();
/** Why an id could not be made, by parameter name (for the failure message). */
const discoveryNotes = new Map<string, string>();
const missing = (name: string, w: Tenant) =>
  `no id of workspace ${w.label} for path parameter :${name}${discoveryNotes.has(name) ? ` (${discoveryNotes.get(name)})` : ""}: give idFor one, or make its collection's POST (or the item's PUT) work with an EXAMPLES body`;

/**
 * For every path parameter this test has no id for (a deployment's, an environment variable's...):
 * the tenant makes one in each of its apps that takes it, through the route table's own routes
 * (POST on the collection, the same path up to the parameter; or PUT on the item, under a name of
 * its own), then lists the collection through its GET route and takes the first (newest) item's id
 * (its property named like the parameter, else `id`). Ids that are names within an app
 * (`<app>-<n>`) coincide between same-named apps of two workspaces; B makes one more than A, so that
 * B's newest is one that A has not.
 */
async function discoverIds(w: Tenant, count: number): Promise<void> {
  for (const route of routes) {
    for (const [i, name] of pathParamNames(route.path).entries()) {
      if (
        idFor(name, w, "shared") !== undefined ||
        [...discovered.keys()].some((k) => k.startsWith(`${w.workspaceId}/`) && k.endsWith(`/${name}`))
      )
        continue;
      const collection = route.path.slice(0, route.path.indexOf(`/:${name}`));
      const at = (r: RouteDef, path: string) => r.path === path && pathParamNames(r.path).length === pathParamNames(path).length;
      const list = routes.find((r) => r.method === "get" && at(r, collection));
      const post = routes.find((r) => r.method === "post" && at(r, collection));
      const put = routes.find((r) => r.method === "put" && at(r, `${collection}/:${name}`));
      if (!list || i !== pathParamNames(collection).length) continue;
      for (const appId of Object.keys(w.apps)) {
        const path = pathOf(list, (n) => idFor(n, w, appId));
        if (typeof path !== "string") continue;
        const maker = post ?? put;
        const body = maker ? bodyFor(maker) : { error: `no POST ${collection} or PUT ${collection}/:${name} to make one` };
        if ("error" in body) discoveryNotes.set(name, body.error);
        else {
          for (let n = 0; n < (post ? count : 1); n++) {
            const target = post ? path : `${path}/${encodeURIComponent(`${w.label}_tenancy`)}`;
            const made = await api.fetchJson(post ? "POST" : "PUT", target, { key: w.apiKey, ...body });
            if (made.status >= 300 && !discoveryNotes.has(name))
              discoveryNotes.set(name, `${post ? "POST" : "PUT"} ${target} answered ${made.status} ${made.body?.code ?? ""}`);
          }
        }
        const r = await api.fetchJson("GET", path, { key: w.apiKey });
        const items = (Array.isArray(r.body) ? r.body : r.body?.data) as Record<string, unknown>[] | undefined;
        const id = items?.[0]?.[name] ?? items?.[0]?.id;
        if (typeof id === "string") discovered.set(`${w.workspaceId}/${appId}/${name}`, id);
      }
    }
  }
}

function pathOf(route: RouteDef, value: (name: string) => string | undefined): string | { missing: string } {
  let path = route.path;
  for (const name of pathParamNames(route.path)) {
    const v = value(name);
    if (v === undefined) return { missing: name };
    path = path.replace(`:${name}`, encodeURIComponent(v));
  }
  return path;
}

/** A body the route's schema accepts: a known example (a function for one that must be new each time), none when it takes none, or one generated from the schema's JSON Schema. */
const EXAMPLES: Record<string, unknown> = {
  // a domain belongs to one App in the whole cluster: each add names a new one
  addDomain: () => ({ domain: `t${crypto.randomUUID().slice(0, 8)}.tenancy.example.com` }),
  createService: { name: "Intruder", slug: "intruder" },
  updateService: { name: "Renamed by A" },
  createApiKey: { name: "intruder" },
  createWorkspace: { name: "Intruder" },
  updateObservabilityConfig: { guards: { prompt_injection: { enabled: false } } },
  createGuardTemplate: { name: "Intruder", guardType: "toxicity" },
  replaceGuardTemplate: { name: "Taken over", description: null, guardType: "toxicity", config: { sensitivity: "high" } },
  ingestTraces: traceBody(crypto.randomUUID(), "an intruder's question"),
  createDeployment: { commitSha: "0123456789abcdef0123456789abcdef01234567", commitMessage: "tenancy" },
};

function bodyFor(route: RouteDef): { body?: unknown } | { error: string } {
  if (!route.body) return {};
  const example = Object.hasOwn(EXAMPLES, route.operationId);
  if (!example && bodyOptional(route.body)) return {};
  const known = EXAMPLES[route.operationId];
  const candidate = example
    ? typeof known === "function"
      ? (known as () => unknown)()
      : known
    : generate(z.toJSONSchema(route.body, { io: "input", unrepresentable: "any" }));
  const ok = route.body.safeParse(candidate);
  return ok.success
    ? { body: candidate }
    : { error: `${route.operationId}: no valid example body (add one to EXAMPLES): ${ok.error.message}` };
}

/** A minimal instance of a JSON Schema: required properties only, the first enum value, the least number allowed. */
function generate(s: Record<string, unknown>, defs = (s.$defs ?? {}) as Record<string, Record<string, unknown>>): unknown {
  const g = (x: unknown) => generate((x ?? {}) as Record<string, unknown>, defs);
  if (typeof s.$ref === "string") return g(defs[s.$ref.replace("#/$defs/", "")]);
  if (s.const !== undefined) return s.const;
  if (Array.isArray(s.enum)) return s.enum[0];
  for (const k of ["anyOf", "oneOf", "allOf"]) if (Array.isArray(s[k])) return g(s[k][0]);
  switch (s.type) {
    case "object": {
      const props = (s.properties ?? {}) as Record<string, unknown>;
      return Object.fromEntries(((s.required ?? []) as string[]).map((k) => [k, g(props[k])]));
    }
    case "array":
      return Array.from({ length: Number(s.minItems ?? 0) }, () => g(s.items));
    case "string":
      return s.format === "uri" ? "https://example.invalid/x" : "x".repeat(Math.max(1, Number(s.minLength ?? 1)));
    case "integer":
    case "number":
      return Number(s.minimum ?? s.exclusiveMinimum ?? 0) + (s.exclusiveMinimum !== undefined ? 1 : 0);
    case "boolean":
      return false;
    default:
      return null;
  }
}

/** B's data: what no answer to A may contain (unless A sent it in the path). */
function victimMarkers(): string[] {
  return [
    marker(B.label),
    "Bravo",
    memberEmail(B.label),
    B.workspaceId,
    B.templateId,
    B.extraKeyId,
    ...Object.values(B.apps).flatMap((a) => [a.traceId, a.key]),
    ...[...discovered].filter(([k]) => k.startsWith(`${B.workspaceId}/`)).map(([, id]) => id),
    B.apiKey,
    B.apiKey.slice(0, 12),
  ];
}

function leaks(r: ApiResponse, path: string, markers: readonly string[]): string[] {
  const body = r.body && typeof r.body === "object" && "instance" in r.body ? { ...r.body, instance: undefined } : r.body;
  const text = body === undefined ? r.text : JSON.stringify(body);
  return markers.filter((m) => !path.includes(m) && whole(m).test(text));
}

/**
 * A marker as a whole id: not part of a longer one. Ids are short and per namespace (B's release
 * `shared-2` is a prefix of A's share `shared-2f03c…`), so a bare substring test would cry wolf.
 */
const whole = (m: string) => new RegExp(`(?<![A-Za-z0-9_-])${m.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")}(?![A-Za-z0-9_-])`);

const keyOfKind = (kind: KeyKind, w: Tenant): string =>
  kind === "workspace" ? w.apiKey : kind === "admin" ? api.adminKey : kind === "app" ? w.apps.shared!.key : operator;

interface Problem {
  route: string;
  problem: string;
}

function classify(route: RouteDef): readonly KeyKind[] | undefined {
  return Object.hasOwn(ACCEPTS, route.auth) ? ACCEPTS[route.auth] : undefined;
}

// ---- the sweeps ------------------------------------------------------------------------------------

test.serial("the route table is enumerated and every route is classified by its auth mode", (t) => {
  t.true(routes.length >= 30, `${routes.length} routes`);
  const unclassified = routes.filter((r) => classify(r) === undefined).map((r) => `${r.operationId} (auth ${String(r.auth)})`);
  t.deepEqual(unclassified, [], "a route whose auth mode this test does not know");
  const seen = new Set(routes.map((r) => r.auth));
  for (const mode of ["workspace", "platform-admin", "workspace-or-platform-admin", "app-key", "operator", "none"] as const)
    t.true(seen.has(mode), mode);
});

test.serial("A's key on B's ids: 404 (or 403) on every route that takes a workspace key, and nothing of B in the answer", async (t) => {
  const problems: Problem[] = [];
  let calls = 0;
  for (const route of routes) {
    const kinds = classify(route);
    if (!kinds?.includes("workspace")) continue;
    const names = pathParamNames(route.path);
    const own = names.filter((n) => !(WORKSPACE_PARAMS as readonly string[]).includes(n));
    const hasWs = names.length !== own.length;
    // the victim's ids: B's workspace and B's resources; then A's workspace with B's resources
    const variants: ((n: string) => string | undefined)[] = [];
    if (hasWs) variants.push((n) => idFor(n, B, own.some((x) => x !== "appId") ? "shared" : "bravoonly"));
    if (own.length > 0) {
      const mixed = (appId: string) => (n: string) =>
        (WORKSPACE_PARAMS as readonly string[]).includes(n) ? A.workspaceId : n === "appId" ? appId : idFor(n, B, "shared");
      variants.push(mixed("bravoonly")); // an app that only B has
      if (own.some((n) => n !== "appId")) variants.push(mixed("shared")); // A's app of the same name, B's trace, deployment...
    }
    if (variants.length === 0) continue; // no ids in the path: a listing or a create in no workspace (checked below)
    const body = bodyFor(route);
    if ("error" in body) {
      problems.push({ route: route.operationId, problem: body.error });
      continue;
    }
    for (const v of variants) {
      const path = pathOf(route, v);
      if (typeof path !== "string") {
        problems.push({ route: route.operationId, problem: missing(path.missing, B) });
        break;
      }
      const r = await api.fetchJson(route.method.toUpperCase(), path, { key: A.apiKey, ...body });
      calls++;
      // a PUT under a name the client chooses may create the caller's own resource of that name (201),
      // which is no tenancy breach; it must never replace (200) or answer with B's data
      const createdOwn = route.method === "put" && r.status === 201 && v("wsId") !== B.workspaceId && v("workspaceId") !== B.workspaceId;
      if (createdOwn) {
        // undone at once, so that the sweep's DELETE of that name finds nothing of A's either
        const undo = routes.find((x) => x.method === "delete" && x.path === route.path);
        if (!undo || (await api.fetchJson("DELETE", path, { key: A.apiKey })).status !== 204)
          problems.push({ route: `PUT ${path}`, problem: "created A's own resource and no DELETE of the same path removes it" });
      } else if (r.status !== 404 && r.status !== 403)
        problems.push({ route: `${route.method.toUpperCase()} ${path}`, problem: `status ${r.status}: ${r.text.slice(0, 200)}` });
      else if (!(r.headers.get("content-type") ?? "").startsWith("application/problem+json"))
        problems.push({ route: path, problem: "not a problem document" });
      const leaked = leaks(r, path, victimMarkers());
      if (leaked.length > 0)
        problems.push({ route: `${route.method.toUpperCase()} ${path}`, problem: `B's data in the answer: ${leaked.join(", ")}` });
    }
  }
  t.deepEqual(problems, []);
  t.true(calls >= 25, `${calls} calls`);
});

test.serial("read routes with A's own ids, and listings, answer nothing of B, whatever key kind they take", async (t) => {
  const problems: Problem[] = [];
  for (const route of routes) {
    const kinds = classify(route) ?? [];
    if (route.method !== "get") continue;
    for (const kind of kinds.length === 0 ? [undefined] : kinds) {
      const path = pathOf(route, (n) => idFor(n, A, "shared"));
      if (typeof path !== "string") {
        problems.push({ route: route.operationId, problem: missing(path.missing, A) });
        continue;
      }
      const r = await api.fetchJson("GET", path, { key: kind ? keyOfKind(kind, A) : null });
      if (route.auth === "platform-admin") continue; // the platform's own listing (GET /workspaces) names every workspace by design
      const leaked = leaks(r, path, victimMarkers());
      if (leaked.length > 0)
        problems.push({ route: `${kind ?? "public"} GET ${path}`, problem: `status ${r.status}, B's data: ${leaked.join(", ")}` });
    }
  }
  t.deepEqual(problems, []);
});

test.serial("public routes that name ids answer B's ids with no success and none of B's data", async (t) => {
  const problems: Problem[] = [];
  for (const route of routes.filter((r) => r.auth === "none" && pathParamNames(r.path).length > 0)) {
    const path = pathOf(route, (n) => idFor(n, B, "shared"));
    if (typeof path !== "string") {
      problems.push({ route: route.operationId, problem: missing(path.missing, B) });
      continue;
    }
    for (const key of [null, A.apiKey]) {
      const r = await api.fetchJson(route.method.toUpperCase(), path, { key, ...(route.body ? { body: {} } : {}) });
      if (r.status < 400)
        problems.push({ route: `${route.method.toUpperCase()} ${path}`, problem: `status ${r.status} without B's credentials` });
      const leaked = leaks(r, path, victimMarkers());
      if (leaked.length > 0) problems.push({ route: path, problem: `B's data: ${leaked.join(", ")}` });
    }
  }
  t.deepEqual(problems, []);
});

test.serial("platform admin routes that name a workspace answer 404 workspace_not_found for one that does not exist", async (t) => {
  // the admin key is scoped to no workspace (the router checks no path's): such a route checks the workspace itself
  const problems: Problem[] = [];
  let calls = 0;
  for (const route of routes.filter(
    (r) => r.auth === "platform-admin" && pathParamNames(r.path).some((n) => (WORKSPACE_PARAMS as readonly string[]).includes(n)),
  )) {
    const path = pathOf(route, (n) => ((WORKSPACE_PARAMS as readonly string[]).includes(n) ? "wsnotthere22" : idFor(n, A, "shared")));
    if (typeof path !== "string") {
      problems.push({ route: route.operationId, problem: missing(path.missing, A) });
      continue;
    }
    const body = bodyFor(route);
    const r = await api.fetchJson(route.method.toUpperCase(), path, { key: api.adminKey, ...("body" in body ? { body: body.body } : {}) });
    calls++;
    if (r.status !== 404 || r.body?.code !== "workspace_not_found")
      problems.push({ route: `${route.method.toUpperCase()} ${path}`, problem: `status ${r.status} ${r.body?.code ?? ""}` });
  }
  t.deepEqual(problems, []);
  t.true(calls >= 3, `${calls} calls`);
});

test.serial("keys of a kind a route does not take are refused (401/403) on every route", async (t) => {
  const problems: Problem[] = [];
  for (const route of routes) {
    const kinds = classify(route) ?? [];
    if (route.auth === "none") continue;
    const path = pathOf(route, (n) => idFor(n, A, "shared"));
    if (typeof path !== "string") {
      problems.push({ route: route.operationId, problem: missing(path.missing, A) });
      continue;
    }
    for (const kind of (["workspace", "admin", "app", "operator"] as const).filter((k) => !kinds.includes(k))) {
      const r = await api.fetchJson(route.method.toUpperCase(), path, { key: keyOfKind(kind, A), ...(route.body ? { body: {} } : {}) });
      if (r.status !== 401 && r.status !== 403)
        problems.push({ route: `${kind} key on ${route.method.toUpperCase()} ${path}`, problem: `status ${r.status}` });
    }
  }
  t.deepEqual(problems, []);
});

test.serial("an app's scoped key reads and writes its own store only", async (t) => {
  const own = A.apps.shared!;
  // every app-key route, with the app's key: nothing of another app (of its workspace or of B)
  const others = [marker(B.label), A.apps.alfatwo!.traceId, B.apps.shared!.traceId, "alfatwo asks"];
  for (const route of routes.filter((r) => r.auth === "app-key")) {
    const body = bodyFor(route);
    if ("error" in body) {
      t.fail(body.error);
      continue;
    }
    const r = await api.fetchJson(route.method.toUpperCase(), route.path, { key: own.key, ...body });
    t.true(r.status < 300, `${route.operationId}: ${r.text}`);
    t.deepEqual(leaks(r, route.path, others), [], route.operationId);
  }
  // another app's project, of the same workspace or of B: refused, nothing written
  for (const project of ["alfatwo", "bravoonly"]) {
    const r = await api.fetchJson("POST", "/governance/traces", {
      key: own.key,
      body: traceBody(crypto.randomUUID(), "cross-app write", { project }),
    });
    t.is(r.status, 403, r.text);
    t.is(r.body.code, "project_mismatch");
  }
  // a traceId that another store holds is a new trace of this store, not that store's duplicate
  const same = await api.fetchJson("POST", "/governance/traces", {
    key: own.key,
    body: traceBody(B.apps.shared!.traceId, "same id, other store"),
  });
  t.is(same.status, 201, same.text);
  const theirs = await api.fetchJson("GET", `/workspaces/${B.workspaceId}/governance/apps/shared/traces/${B.apps.shared!.traceId}`, {
    key: B.apiKey,
  });
  t.true(theirs.body.prompt.startsWith(marker(B.label)), "B's trace is untouched");
  // the config the toolkit loads is the app's own
  const cfg = await api.fetchJson("GET", "/governance/config", { key: own.key });
  t.is(cfg.body.project, "shared");
  t.deepEqual(Object.keys(cfg.body.engine.templates ?? {}), [A.templateId]);
  // the store the key reaches is its own: the trace just written is in A's "shared", not in alfatwo's
  const inOwn = await api.fetchJson("GET", `/workspaces/${A.workspaceId}/governance/apps/shared/traces/${B.apps.shared!.traceId}`);
  t.is(inOwn.status, 200);
  t.is((await api.fetchJson("GET", `/workspaces/${A.workspaceId}/governance/apps/alfatwo/traces/${B.apps.shared!.traceId}`)).status, 404);
});

test.serial("a revoked key stops working at once, on every route of its kind", async (t) => {
  // one revoked key of each revocable kind: a workspace key (through the API), a platform admin key
  // (as the CLI does), an app key (a fresh store revokes the old one)
  const ws = await api.fetchJson("POST", `/workspaces/${A.workspaceId}/api-keys`, { body: { name: "soon revoked" } });
  const admin = await api.services.adminKeys.create(api.orm.em.fork(), "soon revoked");
  const revokedApp = A.apps.alfatwo!.key;
  t.is((await api.fetchJson("GET", `/workspaces/${A.workspaceId}/api-keys`, { key: ws.body.key })).status, 200, "works before");
  t.is((await api.fetchJson("GET", "/governance/config", { key: revokedApp })).status, 200, "works before");
  t.is((await api.fetchJson("DELETE", `/workspaces/${A.workspaceId}/api-keys/${ws.body.id}`)).status, 204);
  await api.services.adminKeys.revoke(api.orm.em.fork(), admin.key.id);
  t.is((await api.fetchJson("POST", `/workspaces/${A.workspaceId}/governance/apps/alfatwo/provision`)).status, 200);
  const revoked: Partial<Record<KeyKind, string>> = { workspace: ws.body.key, admin: admin.secret, app: revokedApp };

  const problems: Problem[] = [];
  let calls = 0;
  for (const route of routes) {
    for (const kind of classify(route) ?? []) {
      const key = revoked[kind];
      if (!key) continue; // the operator's token is Kubernetes' to revoke
      const path = pathOf(route, (n) => idFor(n, A, "shared"));
      if (typeof path !== "string") {
        problems.push({ route: route.operationId, problem: missing(path.missing, A) });
        continue;
      }
      const body = bodyFor(route);
      const r = await api.fetchJson(route.method.toUpperCase(), path, { key, ...("body" in body ? { body: body.body } : {}) });
      calls++;
      if (r.status !== 401)
        problems.push({ route: `revoked ${kind} key on ${route.method.toUpperCase()} ${path}`, problem: `status ${r.status}` });
    }
  }
  t.deepEqual(problems, []);
  t.true(calls >= 30, `${calls} calls`);
});

test.serial("after every sweep, B's data is exactly as it was", async (t) => {
  t.deepEqual(await snapshot(B), before);
});

async function snapshot(w: Tenant): Promise<unknown> {
  const get = async (path: string) => (await api.fetchJson("GET", path, { key: w.apiKey })).body;
  const W = `/workspaces/${w.workspaceId}`;
  const apps = await get(`${W}/apps?limit=100`);
  const keys = await get(`${W}/api-keys`);
  const templates = await get("/governance/guard-templates");
  const stores: Record<string, unknown> = {};
  for (const slug of Object.keys(w.apps)) {
    const G = `${W}/governance/apps/${slug}`;
    const app = await get(`${W}/apps/${slug}`);
    // every collection of an app the route table lists (deployments, environment variables...)
    const collections: Record<string, unknown> = {};
    for (const r of routes.filter(
      (x) =>
        x.method === "get" &&
        x.auth === "workspace" &&
        !x.query &&
        pathParamNames(x.path).length === 2 &&
        pathParamNames(x.path)[1] === "appId",
    )) {
      const body = await get(pathOf(r, (n) => (n === "appId" ? slug : w.workspaceId)) as string);
      if (Array.isArray(body?.data)) collections[r.operationId] = body.data;
    }
    stores[slug] = {
      collections,
      app: { name: app.name, status: app.status, image: app.image, deletedAt: app.deletedAt, updatedAt: app.updatedAt },
      traces: (await get(`${G}/traces?limit=100`)).data.map((x: { traceId: string }) => x.traceId),
      config: await get(`${G}/observability-config`),
      audit: await get(`${G}/audit/verify`),
    };
  }
  const members = (await api.fetchJson("GET", `${W}/members`, { key: api.adminKey })).body;
  return {
    members,
    apps: apps.data.map((a: { id: string; name: string }) => [a.id, a.name]),
    keys: keys.data.map((k: { id: string; revokedAt: string | null }) => [k.id, k.revokedAt]),
    templates,
    stores,
  };
}
