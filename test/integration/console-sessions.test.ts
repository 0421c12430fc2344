// The console's sign-in against the real server and database: a workspace key exchanged for an
// HttpOnly session cookie that acts as the key (and nothing more), CSRF on writes, the session's
// end (sign-out, revoked key, expiry, the per-key cap), and what a hostile page or workspace can
// do with it: nothing.
import test from "ava";
import { query } from "../helpers/db.ts";
import { startApi, type ApiResponse, type TestApi, type TestWorkspace } from "../helpers/api.ts";

let api: TestApi;
let other: TestWorkspace;
test.before(async () => {
  api = await startApi();
  other = await api.createWorkspace("other team");
});
test.after.always(async () => {
  await api?.stop();
});

interface Session {
  cookie: string;
  csrf: string;
  workspaceId: string;
  response: ApiResponse;
}

async function signIn(key: string, headers: Record<string, string> = {}): Promise<Session> {
  const r = await api.fetchJson("POST", "/console/sessions", { key: null, body: { key }, headers });
  const set = r.headers.get("set-cookie") ?? "";
  return { cookie: set.split(";")[0]!, csrf: r.body?.csrfToken, workspaceId: r.body?.workspaceId, response: r };
}

/** A request with the session's cookie and no key; the CSRF token only when given. */
function asBrowser(s: Session, method: string, path: string, o: { body?: unknown; csrf?: string } = {}): Promise<ApiResponse> {
  return api.fetchJson(method, path, {
    key: null,
    ...(o.body !== undefined ? { body: o.body } : {}),
    headers: { Cookie: s.cookie, ...(o.csrf !== undefined ? { "X-Berth-CSRF": o.csrf } : {}) },
  });
}

async function liveKeys(workspaceId: string): Promise<number> {
  const rows = await query<{ n: string }>(
    api.db.url,
    "select count(*)::text as n from api_keys where workspace_id = $1 and revoked_at is null",
    [workspaceId],
  );
  return Number(rows[0]!.n);
}

test("a workspace key is exchanged for an HttpOnly, SameSite=Strict cookie that acts as the key", async (t) => {
  const s = await signIn(api.apiKey);
  t.is(s.response.status, 201, s.response.text);
  t.is(s.workspaceId, api.workspaceId);
  t.regex(s.csrf, /^[A-Za-z0-9_-]{43}$/);
  t.is(s.response.headers.get("cache-control"), "no-store");
  const set = s.response.headers.get("set-cookie")!;
  t.regex(set, /^berth_console=cs_[A-Za-z0-9_-]{43}; Max-Age=\d+; Path=\/; HttpOnly; SameSite=Strict$/);
  t.false(s.response.text.includes(s.cookie.split("=")[1]!), "the cookie's secret is not in the body a script reads");
  // Only the secret's digest is stored.
  const rows = await query<{ hash: string }>(api.db.url, "select hash from console_sessions where workspace_id = $1", [api.workspaceId]);
  t.true(rows.length >= 1);
  t.false(rows.some((r) => s.cookie.includes(r.hash)));

  const read = await asBrowser(s, "GET", "/console/session");
  t.is(read.status, 200);
  t.deepEqual(read.body, s.response.body);
  const keys = await asBrowser(s, "GET", `/workspaces/${api.workspaceId}/api-keys`);
  t.is(keys.status, 200, keys.text);
  t.true(keys.body.data.length >= 1);
});

test("a session of workspace A reaches nothing of workspace B, while B's own session does", async (t) => {
  const a = await signIn(api.apiKey);
  const b = await signIn(other.apiKey);
  for (const path of [
    `/workspaces/${other.workspaceId}`,
    `/workspaces/${other.workspaceId}/api-keys`,
    `/workspaces/${other.workspaceId}/apps`,
  ]) {
    const attack = await asBrowser(a, "GET", path);
    t.is(attack.status, 404, path);
    t.is(attack.body.code, "workspace_not_found");
    t.is((await asBrowser(b, "GET", path)).status, 200, `the victim still reads ${path}`);
  }
  const write = await asBrowser(a, "POST", `/workspaces/${other.workspaceId}/api-keys`, { body: { name: "steal" }, csrf: a.csrf });
  t.is(write.status, 404);
  t.is(await liveKeys(other.workspaceId), 1);
});

test("a write through a session needs the session's own CSRF token", async (t) => {
  const s = await signIn(api.apiKey);
  const second = await signIn(api.apiKey);
  const path = `/workspaces/${api.workspaceId}/api-keys`;
  const before = await liveKeys(api.workspaceId);
  // What a page of another site can send: the cookie (were SameSite not there) and no token, or a token it guessed.
  for (const csrf of [undefined, "", "x".repeat(43), second.csrf]) {
    const r = await asBrowser(s, "POST", path, { body: { name: "forged" }, ...(csrf !== undefined ? { csrf } : {}) });
    t.is(r.status, 403, `csrf ${String(csrf)}`);
    t.is(r.body.code, "csrf_failed");
  }
  t.is(await liveKeys(api.workspaceId), before, "no forged write landed");
  // The same write with the session's token goes through: the token is what the refusals turned on.
  const ok = await asBrowser(s, "POST", path, { body: { name: "from the console" }, csrf: s.csrf });
  t.is(ok.status, 201, ok.text);
  t.is(await liveKeys(api.workspaceId), before + 1);
  await api.fetchJson("DELETE", `${path}/${ok.body.id}`);
});

test("a sign-in posted from another origin is refused; from the API's own origin it is accepted", async (t) => {
  const evil = await signIn(api.apiKey, { Origin: "https://evil.example" });
  t.is(evil.response.status, 403);
  t.is(evil.response.body.code, "cross_origin");
  t.is(evil.response.headers.get("set-cookie"), null);
  const own = await signIn(api.apiKey, { Origin: api.url });
  t.is(own.response.status, 201, own.response.text);
});

test("only a current workspace key opens a session", async (t) => {
  for (const key of [
    api.adminKey,
    "ws_sk_" + "A".repeat(43),
    "nonsense",
    other.apiKey.slice(0, -1) + (other.apiKey.endsWith("A") ? "B" : "A"),
  ]) {
    const s = await signIn(key);
    t.is(s.response.status, 401, key.slice(0, 6));
    t.is(s.response.headers.get("set-cookie"), null);
  }
  const bad = await api.fetchJson("POST", "/console/sessions", { key: null, body: { key: "" } });
  t.is(bad.status, 422);
  t.is(bad.body.errors?.[0]?.field, "body.key");
});

test("a session works only where a workspace key would, and a Bearer header decides over the cookie", async (t) => {
  const s = await signIn(api.apiKey);
  // A platform admin route: the cookie is not a platform admin key.
  const admin = await asBrowser(s, "POST", "/workspaces", { body: { name: "mine" }, csrf: s.csrf });
  t.is(admin.status, 401);
  // An invalid key next to a valid cookie: the key is judged, not the cookie.
  const mixed = await api.fetchJson("GET", `/workspaces/${api.workspaceId}/api-keys`, {
    key: "ws_sk_" + "B".repeat(43),
    headers: { Cookie: s.cookie },
  });
  t.is(mixed.status, 401);
  // A session cookie is no Bearer key either.
  const asKey = await api.fetchJson("GET", `/workspaces/${api.workspaceId}/api-keys`, { key: s.cookie.split("=")[1]! });
  t.is(asKey.status, 401);
});

test("a session ends when its key is revoked, when it expires and when it signs out", async (t) => {
  const ws = await api.createWorkspace("revocation");
  const s = await signIn(ws.apiKey);
  const path = `/workspaces/${ws.workspaceId}/api-keys`;
  t.is((await asBrowser(s, "GET", path)).status, 200);
  // Revoked with a second key of the workspace: the session goes with the key.
  const second = await api.fetchJson("POST", path, { key: ws.apiKey, body: { name: "second" } });
  t.is((await api.fetchJson("DELETE", `${path}/${ws.apiKeyId}`, { key: second.body.key })).status, 204);
  t.is((await asBrowser(s, "GET", path)).status, 401);
  t.is((await asBrowser(s, "GET", "/console/session")).status, 401);

  const live = await signIn(second.body.key);
  t.is((await asBrowser(live, "GET", path)).status, 200);
  await query(api.db.url, "update console_sessions set expires_at = now() - interval '1 second' where workspace_id = $1", [ws.workspaceId]);
  t.is((await asBrowser(live, "GET", path)).status, 401, "expired");

  const out = await signIn(second.body.key);
  const noToken = await asBrowser(out, "DELETE", "/console/session");
  t.is(noToken.status, 403, "signing someone out needs the token too");
  t.is((await asBrowser(out, "GET", path)).status, 200);
  const bye = await asBrowser(out, "DELETE", "/console/session", { csrf: out.csrf });
  t.is(bye.status, 204);
  t.regex(bye.headers.get("set-cookie") ?? "", /^berth_console=; Max-Age=0;/);
  t.is((await asBrowser(out, "GET", path)).status, 401);
  t.is((await asBrowser(out, "DELETE", "/console/session")).status, 204, "signing out twice is fine");
});

test("one key holds a bounded number of live sessions: opening one more ends the oldest", async (t) => {
  const ws = await api.createWorkspace("many sessions");
  const path = `/workspaces/${ws.workspaceId}/api-keys`;
  const sessions: Session[] = [];
  const cap = api.config.BERTH_CONSOLE_MAX_SESSIONS_PER_KEY;
  for (let i = 0; i < cap + 2; i++) sessions.push(await signIn(ws.apiKey));
  const live = await Promise.all(sessions.map(async (s) => (await asBrowser(s, "GET", path)).status));
  t.deepEqual(live, [401, 401, ...Array<number>(cap).fill(200)]);
  const rows = await query<{ n: string }>(
    api.db.url,
    "select count(*)::text as n from console_sessions where workspace_id = $1 and revoked_at is null",
    [ws.workspaceId],
  );
  t.is(rows[0]!.n, String(cap));
});

test("without an identity provider the console offers the key's sign-in only", async (t) => {
  const options = await api.fetchJson("GET", "/console/sign-in-options", { key: null });
  t.is(options.status, 200);
  t.deepEqual(options.body, { key: true, oidc: false });
  const login = await api.fetchJson("GET", "/console/oidc/login?next=/console/services", { key: null });
  t.is(login.status, 404);
  t.is(login.body.code, "sign_in_not_configured");
  // a key's session names no member
  const s = await signIn(api.apiKey);
  t.is(s.response.body.email, null);
});
