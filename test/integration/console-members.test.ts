// Workspace members and the console's sign-in with the organisation's identity provider, against
// the real server and database and a real OpenID Connect provider on loopback (helpers/oidc.ts):
// a platform admin adds a member by email, the member signs in through the provider's own pages
// (authorization code flow, PKCE, state, nonce; the registered callback opens a console session)
// and works in their workspace through the session, and nowhere else. Each protection is shown
// with the attack it stops, and with the same request going through where the protection does not
// apply (the member before removal, the victim's own session, the token on a write...).
import test from "ava";
import { startApi, type ApiResponse, type TestApi, type TestWorkspace } from "../helpers/api.ts";
import { startOidcProvider, type TestOidcProvider } from "../helpers/oidc.ts";
import { Browser, type Hop } from "../helpers/browser.ts";
import { query } from "../helpers/db.ts";
import { freePort } from "../../hack/bench/proc.ts";

const ALICE = "alice@example.test";
let api: TestApi;
let idp: TestOidcProvider;
let B: TestWorkspace;
let callbackUrl: string;

test.before(async () => {
  const port = await freePort();
  callbackUrl = `http://127.0.0.1:${port}/api/v1/auth/oidc/callback`;
  // "alice" and "alice-impostor" (another account) both claim alice@example.test, verified;
  // "unverified-alice" claims it unverified
  idp = await startOidcProvider({
    redirectUri: callbackUrl,
    emailOf: (login) => `${login.replace(/^unverified-/, "").replace(/-impostor$/, "")}@example.test`,
  });
  api = await startApi({
    workspaceName: "Alfa workspace",
    env: {
      BERTH_API_PORT: String(port),
      BERTH_OIDC_ISSUER_URL: idp.issuer,
      BERTH_OIDC_CLIENT_ID: idp.clientId,
      BERTH_OIDC_CLIENT_SECRET: idp.clientSecret,
      BERTH_OIDC_REDIRECT_URL: callbackUrl,
    },
  });
  B = await api.createWorkspace("Bravo workspace");
});
test.after.always(async () => {
  await api?.stop();
  await idp?.stop();
});

const A = () => api.workspaceId;
const members = (ws: string, email?: string) => `/workspaces/${ws}/members${email ? `/${encodeURIComponent(email)}` : ""}`;
const last = (hops: Hop[]) => hops[hops.length - 1]!;

interface SignIn {
  browser: Browser;
  /** The callback's answer (the hop to BERTH_OIDC_REDIRECT_URL). */
  callback: Hop | undefined;
  hops: Hop[];
  /** The console session cookie ("berth_console=cs_..."), when one was set. */
  cookie: string | undefined;
}

/** A browser that opens the console's sign-in with the organisation and signs in as `login` on the provider's page. */
async function signInAs(login: string, o: { next?: string; workspace?: string } = {}): Promise<SignIn> {
  const browser = new Browser();
  const q = new URLSearchParams({ next: o.next ?? "/console/services" });
  if (o.workspace) q.set("workspace", o.workspace);
  const start = await browser.navigate(`${api.url}/api/v1/console/oidc/login?${q.toString()}`);
  const form = last(start);
  if (form.status !== 200 || !/<form method="post"/.test(form.text))
    throw new Error(`no sign-in page: ${start.map((h) => `${h.status} ${h.url}`).join(" -> ")} ${form.text.slice(0, 300)}`);
  const action = new URL(/action="([^"]+)"/.exec(form.text)![1]!, form.url);
  const hops = await browser.navigate(action, {
    method: "POST",
    body: `login=${encodeURIComponent(login)}`,
    headers: { "Content-Type": "application/x-www-form-urlencoded" },
  });
  const callback = hops.find((h) => h.url.startsWith(callbackUrl));
  const value = browser.cookie("127.0.0.1", "berth_console");
  return { browser, callback, hops, cookie: value ? `berth_console=${value}` : undefined };
}

/** A request with the session's cookie and no key; the CSRF token only when given. */
function asBrowser(cookie: string, method: string, path: string, o: { body?: unknown; csrf?: string } = {}): Promise<ApiResponse> {
  return api.fetchJson(method, path, {
    key: null,
    ...(o.body !== undefined ? { body: o.body } : {}),
    headers: { Cookie: cookie, ...(o.csrf !== undefined ? { "X-Berth-CSRF": o.csrf } : {}) },
  });
}

function problemOf(hop: Hop | undefined): { status: number; code?: string; detail?: string; details?: Record<string, unknown> } {
  if (!hop) return { status: 0 };
  const body = hop.text.startsWith("{")
    ? (JSON.parse(hop.text) as { code?: string; detail?: string; details?: Record<string, unknown> })
    : {};
  return { status: hop.status, ...body };
}

test.serial("the console offers the organisation's sign-in", async (t) => {
  const r = await api.fetchJson("GET", "/console/sign-in-options", { key: null });
  t.is(r.status, 200);
  t.deepEqual(r.body, { key: true, oidc: true });
});

test.serial("a platform admin adds a member by email (idempotent, compared without case); invalid emails are refused", async (t) => {
  const added = await api.fetchJson("PUT", members(A(), "Alice@Example.TEST"), { key: api.adminKey });
  t.is(added.status, 201, added.text);
  t.like(added.body, { workspaceId: A(), email: ALICE, issuer: null, subject: null, lastSignInAt: null });
  t.is(added.headers.get("location"), `/api/v1${members(A(), ALICE)}`);
  const again = await api.fetchJson("PUT", members(A(), ALICE), { key: api.adminKey });
  t.is(again.status, 200);
  t.deepEqual(again.body, added.body);
  const list = await api.fetchJson("GET", members(A()), { key: api.adminKey });
  t.deepEqual(list.body, { data: [added.body] });
  t.deepEqual((await api.fetchJson("GET", members(B.workspaceId), { key: api.adminKey })).body, { data: [] });

  for (const bad of ["not-an-email", "alice@", "a b@example.test"]) {
    const r = await api.fetchJson("PUT", members(A(), bad), { key: api.adminKey });
    t.is(r.status, 422, bad);
    t.is(r.body.errors?.[0]?.field, "params.email");
  }
  const nowhere = await api.fetchJson("PUT", members("wsnotthere22", ALICE), { key: api.adminKey });
  t.is(nowhere.status, 404);
  t.is(nowhere.body.code, "workspace_not_found");
  const notMember = await api.fetchJson("DELETE", members(A(), "nobody@example.test"), { key: api.adminKey });
  t.is(notMember.status, 404);
  t.is(notMember.body.code, "member_not_found");
});

test.serial("a workspace key (or a console session) cannot manage members; the admin key can", async (t) => {
  const key = await api.fetchJson("PUT", members(A(), "intruder@example.test"), { key: api.apiKey });
  t.is(key.status, 403);
  t.is(key.body.code, "insufficient_scope");
  t.is((await api.fetchJson("GET", members(A()), { key: api.apiKey })).status, 403);
  t.is((await api.fetchJson("DELETE", members(A(), ALICE), { key: api.apiKey })).status, 403);
  // a key's console session is not an admin key either
  const s = await api.fetchJson("POST", "/console/sessions", { key: null, body: { key: api.apiKey } });
  const cookie = s.headers.get("set-cookie")!.split(";")[0]!;
  const viaSession = await asBrowser(cookie, "PUT", members(A(), "intruder@example.test"), { csrf: s.body.csrfToken });
  t.is(viaSession.status, 401);
  const rows = await query<{ email: string }>(api.db.url, "select email from workspace_members where workspace_id = $1", [A()]);
  t.deepEqual(
    rows.map((r) => r.email),
    [ALICE],
    "nothing was added",
  );
  // the same request with the admin key goes through
  const admin = await api.fetchJson("PUT", members(A(), "intruder@example.test"), { key: api.adminKey });
  t.is(admin.status, 201);
  t.is((await api.fetchJson("DELETE", members(A(), "intruder@example.test"), { key: api.adminKey })).status, 204);
});

test.serial("the admin key cannot open a console session", async (t) => {
  const r = await api.fetchJson("POST", "/console/sessions", { key: null, body: { key: api.adminKey } });
  t.is(r.status, 401);
  t.is(r.headers.get("set-cookie"), null);
});

test.serial(
  "alice signs in through the identity provider and works in workspace A through the console session, CSRF token on writes",
  async (t) => {
    const s = await signInAs("alice", { next: "/console/services?status=active" });
    t.truthy(s.callback, s.hops.map((h) => `${h.status} ${h.url}`).join("\n"));
    t.is(s.callback!.status, 302, s.callback!.text);
    t.is(s.callback!.headers.get("location"), `${api.url}/console/services?status=active`, "back to the page asked for");
    t.is(s.callback!.headers.get("cache-control"), "no-store");
    const set = s.callback!.headers.getSetCookie();
    t.true(
      set.some((c) => /^berth_console=cs_[A-Za-z0-9_-]{43}; Max-Age=\d+; Path=\/; HttpOnly; SameSite=Strict$/.test(c)),
      set.join("\n"),
    );
    t.true(
      set.some((c) => c.startsWith("berth_console_oidc=;") && c.includes("Max-Age=0")),
      "the sign-in state is cleared",
    );
    t.deepEqual(idp.signIns.slice(-1), ["alice"]);

    const session = await asBrowser(s.cookie!, "GET", "/console/session");
    t.is(session.status, 200, session.text);
    t.is(session.body.workspaceId, A());
    t.is(session.body.email, ALICE);
    // the member is now bound to the account that signed in
    const [member] = (await api.fetchJson("GET", members(A()), { key: api.adminKey })).body.data;
    t.like(member, { email: ALICE, issuer: idp.issuer, subject: "alice" });
    t.truthy(member.lastSignInAt);

    t.is((await asBrowser(s.cookie!, "GET", `/workspaces/${A()}/apps`)).status, 200);
    const body = { name: "Alice service", slug: "alice-svc", image: "registry.invalid/alice:1" };
    const forged = await asBrowser(s.cookie!, "POST", `/workspaces/${A()}/apps`, { body });
    t.is(forged.status, 403, "a write without the session's token");
    t.is(forged.body.code, "csrf_failed");
    const created = await asBrowser(s.cookie!, "POST", `/workspaces/${A()}/apps`, { body, csrf: session.body.csrfToken });
    t.is(created.status, 201, created.text);
    const apps = await asBrowser(s.cookie!, "GET", `/workspaces/${A()}/apps`);
    t.true(apps.body.data.some((a: { id: string }) => a.id === "alice-svc"));
    // the session acts as the workspace: its keys too
    const keys = await asBrowser(s.cookie!, "GET", `/workspaces/${A()}/api-keys`);
    t.is(keys.status, 200);
    t.true(keys.body.data.length >= 1);
    // it has no key of its own: a key it makes, it may revoke (no key is "the current key")
    const csrf = session.body.csrfToken;
    const made = await asBrowser(s.cookie!, "POST", `/workspaces/${A()}/api-keys`, { body: { name: "made by alice" }, csrf });
    t.is(made.status, 201, made.text);
    t.is((await asBrowser(s.cookie!, "DELETE", `/workspaces/${A()}/api-keys/${made.body.id}`, { csrf })).status, 204);
  },
);

test.serial("alice's session reaches nothing of workspace B, while B's own key session does", async (t) => {
  const alice = await signInAs("alice");
  t.truthy(alice.cookie);
  const b = await api.fetchJson("POST", "/console/sessions", { key: null, body: { key: B.apiKey } });
  t.is(b.status, 201);
  const bCookie = b.headers.get("set-cookie")!.split(";")[0]!;
  for (const path of [`/workspaces/${B.workspaceId}`, `/workspaces/${B.workspaceId}/apps`, `/workspaces/${B.workspaceId}/api-keys`]) {
    const attack = await asBrowser(alice.cookie!, "GET", path);
    t.is(attack.status, 404, path);
    t.is(attack.body.code, "workspace_not_found");
    t.is((await asBrowser(bCookie, "GET", path)).status, 200, `B's own session still reads ${path}`);
  }
  const csrf = (await asBrowser(alice.cookie!, "GET", "/console/session")).body.csrfToken;
  const write = await asBrowser(alice.cookie!, "POST", `/workspaces/${B.workspaceId}/api-keys`, { body: { name: "steal" }, csrf });
  t.is(write.status, 404);
  t.is(write.body.code, "workspace_not_found");
  // asking to sign in to B: alice is no member of B
  const intoB = await signInAs("alice", { workspace: B.workspaceId });
  t.is(problemOf(intoB.callback).status, 403);
  t.is(problemOf(intoB.callback).code, "not_a_member");
  t.is(intoB.cookie, undefined);
});

test.serial("an email the identity provider did not verify is refused, though it is a member's", async (t) => {
  const s = await signInAs("unverified-alice");
  const p = problemOf(s.callback);
  t.is(p.status, 403, s.callback?.text);
  t.is(p.code, "email_not_verified");
  t.is(s.cookie, undefined, "no session");
  t.false(s.callback!.headers.getSetCookie().some((c) => c.startsWith("berth_console=")));
});

test.serial("a verified email that is no member is refused with a problem that says so", async (t) => {
  const s = await signInAs("mallory");
  const p = problemOf(s.callback);
  t.is(p.status, 403);
  t.is(p.code, "not_a_member");
  t.regex(p.detail ?? "", /mallory@example\.test is not a member of any workspace/);
  t.is(s.cookie, undefined);
});

test.serial("the member is the account that signed in first: another account with the same email is refused", async (t) => {
  const s = await signInAs("alice-impostor");
  const p = problemOf(s.callback);
  t.is(p.status, 403);
  t.is(p.code, "member_identity_mismatch");
  t.is(s.cookie, undefined);
  t.truthy((await signInAs("alice")).cookie, "the first account still signs in");
});

test.serial("next must be a console page of this site: no open redirect", async (t) => {
  for (const next of ["https://evil.example/", "//evil.example/console/", "/\\evil.example/", "/api/v1/workspaces", "/console/../x"]) {
    const r = await fetch(`${api.url}/api/v1/console/oidc/login?next=${encodeURIComponent(next)}`, { redirect: "manual" });
    t.is(r.status, 400, next);
    t.is(((await r.json()) as { code: string }).code, "invalid_return_url");
    t.is(r.headers.get("location"), null);
    t.is(r.headers.get("set-cookie"), null);
  }
  // a console page is where the sign-in lands (shown end to end above); here: the redirect to the provider
  const ok = await fetch(`${api.url}/api/v1/console/oidc/login?next=${encodeURIComponent("/console/guard-templates")}`, {
    redirect: "manual",
  });
  t.is(ok.status, 302);
  const to = new URL(ok.headers.get("location")!);
  t.is(to.origin, idp.issuer);
  t.is(to.searchParams.get("redirect_uri"), callbackUrl);
  t.is(to.searchParams.get("code_challenge_method"), "S256");
  t.truthy(to.searchParams.get("state"));
  t.truthy(to.searchParams.get("nonce"));
  // a page of another origin cannot start it (the key sign-in's same-origin rule)
  const cross = await fetch(`${api.url}/api/v1/console/oidc/login`, { redirect: "manual", headers: { Origin: "https://evil.example" } });
  t.is(cross.status, 403);
  t.is(((await cross.json()) as { code: string }).code, "cross_origin");
});

test.serial(
  "a callback carried to another browser (login CSRF) opens no session there; in the browser that started it, it does",
  async (t) => {
    // mallory is a member of B: the attacker has a working account
    t.is((await api.fetchJson("PUT", members(B.workspaceId, "mallory@example.test"), { key: api.adminKey })).status, 201);
    const attacker = new Browser();
    const start = await attacker.navigate(`${api.url}/api/v1/console/oidc/login?next=/console/services`);
    const form = last(start);
    const action = new URL(/action="([^"]+)"/.exec(form.text)![1]!, form.url);
    // the attacker signs in at the provider and stops before the callback
    let hop = await attacker.request(action, {
      method: "POST",
      body: "login=mallory",
      headers: { "Content-Type": "application/x-www-form-urlencoded" },
    });
    let location = hop.headers.get("location");
    for (let i = 0; i < 10 && location && !new URL(location, hop.url).href.startsWith(callbackUrl); i++) {
      hop = await attacker.request(new URL(location, hop.url));
      location = hop.headers.get("location");
    }
    const callback = new URL(location!, hop.url).href;
    t.true(callback.startsWith(`${callbackUrl}?`), callback);

    // the victim's browser is sent there: it holds no state cookie for this flow
    const victim = new Browser();
    const planted = await victim.request(callback);
    t.is(planted.status, 401);
    t.is(victim.cookie("127.0.0.1", "berth_console"), undefined, "the victim is not signed in as the attacker");
    // the same callback in the browser that started the flow works: the state cookie is what refused it
    const own = await attacker.request(callback);
    t.is(own.status, 302, own.text);
    t.truthy(attacker.cookie("127.0.0.1", "berth_console"));
    t.is((await api.fetchJson("DELETE", members(B.workspaceId, "mallory@example.test"), { key: api.adminKey })).status, 204);
  },
);

test.serial("a member of several workspaces names one at sign-in; without it they are asked to", async (t) => {
  t.is((await api.fetchJson("PUT", members(B.workspaceId, ALICE), { key: api.adminKey })).status, 201);
  const unnamed = await signInAs("alice");
  const p = problemOf(unnamed.callback);
  t.is(p.status, 409);
  t.is(p.code, "workspace_choice_required");
  t.deepEqual(p.details, { workspaces: [A(), B.workspaceId].sort() });
  t.is(unnamed.cookie, undefined);

  const intoB = await signInAs("alice", { workspace: B.workspaceId });
  t.is(intoB.callback?.status, 302, intoB.callback?.text);
  const session = await asBrowser(intoB.cookie!, "GET", "/console/session");
  t.is(session.body.workspaceId, B.workspaceId);
  t.is((await asBrowser(intoB.cookie!, "GET", `/workspaces/${B.workspaceId}/apps`)).status, 200);
  t.is((await asBrowser(intoB.cookie!, "GET", `/workspaces/${A()}/apps`)).status, 404, "a session is one workspace's");
  t.is((await api.fetchJson("DELETE", members(B.workspaceId, ALICE), { key: api.adminKey })).status, 204);
  t.is((await asBrowser(intoB.cookie!, "GET", `/workspaces/${B.workspaceId}/apps`)).status, 401);
});

test.serial("removing the member ends her session on the next request", async (t) => {
  const s = await signInAs("alice");
  const path = `/workspaces/${A()}/apps`;
  t.is((await asBrowser(s.cookie!, "GET", path)).status, 200, "a member reads the workspace");
  const removed = await api.fetchJson("DELETE", members(A(), ALICE), { key: api.adminKey });
  t.is(removed.status, 204);
  const after = await asBrowser(s.cookie!, "GET", path);
  t.is(after.status, 401);
  t.is((await asBrowser(s.cookie!, "GET", "/console/session")).status, 401);
  const rows = await query<{ n: string }>(api.db.url, "select count(*)::text as n from console_sessions where member_id is not null");
  t.is(rows[0]!.n, "0", "the member's sessions went with the member");
  // and she cannot sign in again
  const again = await signInAs("alice");
  t.is(problemOf(again.callback).code, "not_a_member");
  // added again, she is bound anew at her next sign-in
  t.is((await api.fetchJson("PUT", members(A(), ALICE), { key: api.adminKey })).status, 201);
  t.is((await signInAs("alice")).callback?.status, 302);
});

test.serial("a workspace holds at most BERTH_MAX_MEMBERS_PER_WORKSPACE members", async (t) => {
  const ws = await api.createWorkspace("crowded");
  const cap = api.config.BERTH_MAX_MEMBERS_PER_WORKSPACE;
  await query(
    api.db.url,
    `insert into workspace_members (id, workspace_id, email, created_at)
     select gen_random_uuid(), $1, 'm' || g || '@example.test', now() from generate_series(1, $2::int) g`,
    [ws.workspaceId, cap],
  );
  const over = await api.fetchJson("PUT", members(ws.workspaceId, "one-more@example.test"), { key: api.adminKey });
  t.is(over.status, 409);
  t.is(over.body.code, "member_limit_reached");
  t.is((await api.fetchJson("PUT", members(ws.workspaceId, "m1@example.test"), { key: api.adminKey })).status, 200, "a member already");
});
