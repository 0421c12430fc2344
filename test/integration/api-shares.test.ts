// Public shares and private services against the real API server, PostgreSQL and the
// cluster (Shares are custom resources, read back through the API's watch cache under the chart's
// RBAC), with a real OpenID Connect provider on loopback for requireAuth. The ingress is played by
// calling the forward-auth endpoint as Traefik's ForwardAuth middleware does (X-Forwarded-*, the
// browser's cookies; a 2xx lets the request through, anything else is the answer); the real
// Traefik is test/e2e/shares.test.ts.
import test from "ava";
import { createHash } from "node:crypto";
import { API_VERSION } from "../../crds/schemas.ts";
import { API_FIELD_MANAGER, KubeClient, type KubeObject } from "../../kube/client.ts";
import { startApi, type TestApi } from "../helpers/api.ts";
import { kube } from "../helpers/kube.ts";
import { startOidcProvider, type TestOidcProvider } from "../helpers/oidc.ts";
import { Browser, type Hop } from "../helpers/browser.ts";
import { pino } from "pino";
import { EdgeDenied, ForwardAuth } from "../../api/shares/forward-auth.ts";
import { PgTicketLedger } from "../../api/shares/tickets.ts";
import { ReadYourWritesCache } from "../../kube/read-your-writes.ts";
import { freePort } from "../../hack/bench/proc.ts";

const DOMAIN = "apps.shares.test";
const SHARE_KEY = "a-test-share-cookie-key-of-32-chars-or-more";
const client = new KubeClient(kube().kc);
let api: TestApi;
let idp: TestOidcProvider;

test.before(async () => {
  const port = await freePort();
  const redirect = `http://127.0.0.1:${port}/api/v1/auth/oidc/callback`;
  idp = await startOidcProvider({ redirectUri: redirect });
  api = await startApi({
    env: {
      BERTH_API_PORT: String(port),
      BERTH_BASE_DOMAIN: DOMAIN,
      BERTH_SHARE_COOKIE_KEY: SHARE_KEY,
      BERTH_OIDC_ISSUER_URL: idp.issuer,
      BERTH_OIDC_CLIENT_ID: idp.clientId,
      BERTH_OIDC_CLIENT_SECRET: idp.clientSecret,
      BERTH_OIDC_REDIRECT_URL: redirect,
    },
  });
  for (const [slug, type] of [
    ["shop", "web"],
    ["blog", "web"],
    ["cruncher", "worker"],
  ] as const) {
    const r = await api.fetchJson("POST", `/workspaces/${api.workspaceId}/apps`, {
      body: { name: slug, slug, type, image: "registry.invalid/x:1" },
    });
    if (r.status !== 201) throw new Error(r.text);
  }
});
test.after.always(async () => {
  await api?.stop();
  await idp?.stop();
});

const shares = (app = "shop") => `/workspaces/${api.workspaceId}/apps/${app}/public-shares`;
const hostOf = (app: string) => `${app}.${DOMAIN}`;

/** The ingress in front of the Apps: the forward-auth call first, the App's answer only on a 2xx. */
function browser(proto: "http" | "https" = "http"): Browser {
  return new Browser({
    hosts: (h) => h.endsWith(`.${DOMAIN}`),
    send: async (url, init) => {
      const app = url.hostname.slice(0, -DOMAIN.length - 1);
      const auth = await fetch(`${api.url}/api/v1/forward-auth/${api.namespace}/${app}`, {
        redirect: "manual",
        headers: {
          ...init.headers,
          "X-Forwarded-Method": init.method,
          "X-Forwarded-Proto": proto,
          "X-Forwarded-Host": url.host,
          "X-Forwarded-Uri": `${url.pathname}${url.search}`,
        },
      });
      if (auth.status < 200 || auth.status >= 300) return auth;
      const headers = new Headers({ "Content-Type": "text/plain" });
      for (const c of auth.headers.getSetCookie()) headers.append("Set-Cookie", c);
      return new Response(`${app} answered; share=${auth.headers.get("x-berth-share")}; user=${auth.headers.get("x-berth-user") ?? ""}`, {
        status: 200,
        headers,
      });
    },
  });
}

const last = (hops: Hop[]) => hops.at(-1)!;
const problemCode = (h: Hop) => (JSON.parse(h.text) as { code: string }).code;

async function createShare(body?: Record<string, unknown>, app = "shop"): Promise<{ id: string; token: string; url: string }> {
  const r = await api.fetchJson("POST", shares(app), body === undefined ? {} : { body });
  if (r.status !== 201) throw new Error(r.text);
  return r.body;
}

test.serial("create shows the link and token once; the Share keeps only the token's SHA-256 and is owned by its App", async (t) => {
  const r = await api.fetchJson("POST", shares(), { body: {} });
  t.is(r.status, 201, r.text);
  t.is(r.headers.get("cache-control"), "no-store");
  t.regex(r.body.token, /^shr_sk_[A-Za-z0-9_-]{43}$/);
  t.is(r.body.url, `https://shop.${DOMAIN}/?berth_share=${r.body.token}`);
  t.like(r.body, { appId: "shop", requireAuth: false, expiresAt: null, active: true });
  const cr = await client.get<KubeObject & { spec: Record<string, unknown> }>({
    apiVersion: API_VERSION,
    kind: "Share",
    namespace: api.namespace,
    name: r.body.id,
  });
  t.truthy(cr);
  t.is(cr!.spec.tokenHash, createHash("sha256").update(r.body.token).digest("hex"));
  t.false(JSON.stringify(cr).includes(r.body.token.slice(7)), "the token is nowhere in the Share");
  t.like(cr!.metadata.ownerReferences?.[0], { kind: "App", name: "shop" });
  const list = await api.fetchJson("GET", shares());
  t.is(list.status, 200);
  t.deepEqual(
    list.body.data.map((s: { id: string }) => s.id),
    [r.body.id],
  );
  t.false(list.text.includes(r.body.token), "never listed again");
  t.deepEqual(Object.keys(list.body.data[0]).sort(), ["active", "appId", "createdAt", "expiresAt", "id", "requireAuth"]);
  await api.fetchJson("DELETE", `${shares()}/${r.body.id}`);
});

test.serial(
  "bad input is refused with problems: a past expiresAt, unknown fields, a worker, another workspace, an unknown share",
  async (t) => {
    const past = await api.fetchJson("POST", shares(), { body: { expiresAt: new Date(Date.now() - 1000).toISOString() } });
    t.is(past.status, 422);
    t.is(past.body.errors[0].field, "body.expiresAt");
    t.is((await api.fetchJson("POST", shares(), { body: { expiresAt: "tomorrow" } })).status, 422);
    t.is((await api.fetchJson("POST", shares(), { body: { colour: "red" } })).status, 422);
    const worker = await api.fetchJson("POST", shares("cruncher"), { body: {} });
    t.is(worker.status, 409);
    t.is(worker.body.code, "not_served");
    t.is((await api.fetchJson("POST", shares("nope"), { body: {} })).status, 404);
    const other = await api.createWorkspace("other");
    t.is((await api.fetchJson("GET", `/workspaces/${api.workspaceId}/apps/shop/public-shares`, { key: other.apiKey })).status, 404);
    const unknown = await api.fetchJson("DELETE", `${shares()}/shop-0000000000`);
    t.is(unknown.status, 404);
    t.is(unknown.body.code, "share_not_found");
    t.regex(unknown.headers.get("content-type") ?? "", /application\/problem\+json/);
  },
);

test.serial(
  "a private service refuses a visitor without a share and a forged token; a valid token becomes a host-only cookie",
  async (t) => {
    const b = browser();
    const none = last(await b.navigate(`http://shop.${DOMAIN}/`));
    t.is(none.status, 403);
    t.is(problemCode(none), "share_no_grant");
    const forged = last(await b.navigate(`http://shop.${DOMAIN}/?berth_share=shr_sk_${"A".repeat(43)}`));
    t.is(forged.status, 403);
    t.is(problemCode(forged), "share_invalid_token");
    t.is(last(await b.navigate(`http://shop.${DOMAIN}/?berth_share=not-even-a-token`)).status, 403);

    const s = await createShare();
    const hops = await b.navigate(`${s.url.replace("https:", "http:")}&x=1`.replace("/?", "/page?"));
    t.is(hops[0]!.status, 302, "the token is taken and the viewer sent back without it");
    t.is(hops[0]!.headers.get("location"), `http://shop.${DOMAIN}/page?x=1`);
    const setCookie = hops[0]!.headers.getSetCookie()[0]!;
    t.regex(setCookie, /^berth_share=[^;]+; Path=\/; Max-Age=\d+; HttpOnly; SameSite=Lax$/);
    t.is(last(hops).status, 200);
    t.regex(last(hops).text, new RegExp(`shop answered; share=${s.id}`));
    // later requests: the cookie alone
    const again = await b.request(`http://shop.${DOMAIN}/other`);
    t.is(again.status, 200);
    t.is(b.cookie(`blog.${DOMAIN}`, "berth_share"), undefined, "the cookie belongs to the App's host only");

    // over https the cookie is __Host- and Secure, and it alone opens the App there
    const secure = browser("https");
    const h = await secure.request(s.url);
    t.is(h.status, 302);
    const hostCookie = h.headers.getSetCookie()[0]!;
    t.regex(
      hostCookie,
      /^__Host-berth_share=[^;]+; Path=\/; Max-Age=\d+; HttpOnly; SameSite=Lax; Secure$/,
      "no Domain, path /, Secure: what the prefix demands",
    );
    const value = hostCookie.split(";")[0]!.slice("__Host-berth_share=".length);
    const viaHttps = (cookie: string) =>
      fetch(`${api.url}/api/v1/forward-auth/${api.namespace}/shop`, {
        redirect: "manual",
        headers: {
          "X-Forwarded-Method": "GET",
          "X-Forwarded-Proto": "https",
          "X-Forwarded-Host": hostOf("shop"),
          "X-Forwarded-Uri": "/",
          Cookie: cookie,
        },
      });
    t.is((await viaHttps(`__Host-berth_share=${value}`)).status, 200);
    // the same grant under the plain name (what a sibling host under the base domain could toss in) counts for nothing over https
    t.is((await viaHttps(`berth_share=${value}`)).status, 403);
    await api.fetchJson("DELETE", `${shares()}/${s.id}`);
  },
);

test.serial("tampered and misplaced cookies are refused", async (t) => {
  const s = await createShare();
  const b = browser();
  t.is(last(await b.navigate(s.url.replace("https:", "http:"))).status, 200);
  const value = b.cookie(hostOf("shop"), "berth_share")!;
  const [body, mac] = value.split(".") as [string, string];
  const payload = JSON.parse(Buffer.from(body, "base64url").toString()) as Record<string, unknown>;

  const evil = browser();
  evil.setCookie(
    hostOf("shop"),
    "berth_share",
    `${Buffer.from(JSON.stringify({ ...payload, exp: (payload.exp as number) + 86400 * 365 })).toString("base64url")}.${mac}`,
  );
  const tampered = last(await evil.navigate(`http://shop.${DOMAIN}/`));
  t.is(tampered.status, 403);
  t.is(problemCode(tampered), "share_invalid_grant");
  evil.setCookie(hostOf("shop"), "berth_share", `${body}.${mac.slice(0, -4)}AAAA`);
  t.is(problemCode(last(await evil.navigate(`http://shop.${DOMAIN}/`))), "share_invalid_grant");
  // shop's genuine cookie presented to blog
  evil.setCookie(hostOf("blog"), "berth_share", value);
  const moved = last(await evil.navigate(`http://blog.${DOMAIN}/`));
  t.is(moved.status, 403);
  t.is(problemCode(moved), "share_wrong_app");
  // shop's token on blog
  t.is(problemCode(last(await browser().navigate(s.url.replace("https:", "http:").replace("shop.", "blog.")))), "share_invalid_token");
  await api.fetchJson("DELETE", `${shares()}/${s.id}`);
});

test.serial("revoking a share refuses the very next request of a viewer in the middle of a session, and its link", async (t) => {
  const s = await createShare();
  const b = browser();
  t.is(last(await b.navigate(s.url.replace("https:", "http:"))).status, 200);
  t.is((await b.request(`http://shop.${DOMAIN}/a`)).status, 200);
  const del = await api.fetchJson("DELETE", `${shares()}/${s.id}`);
  t.is(del.status, 204);
  const next = await b.request(`http://shop.${DOMAIN}/b`);
  t.is(next.status, 403);
  t.is(problemCode(next), "share_share_revoked");
  t.is(problemCode(last(await browser().navigate(s.url.replace("https:", "http:")))), "share_invalid_token");
  t.false(
    (await api.fetchJson("GET", shares())).body.data.some((x: { id: string }) => x.id === s.id),
    "no longer listed",
  );
  t.is((await api.fetchJson("DELETE", `${shares()}/${s.id}`)).status, 404);
});

test.serial("an expiring share works until expiresAt, then its cookie and its link are refused and it is no longer listed", async (t) => {
  const s = await createShare({ expiresAt: new Date(Date.now() + 3000).toISOString() });
  const b = browser();
  const first = await b.navigate(s.url.replace("https:", "http:"));
  t.is(last(first).status, 200);
  const maxAge = Number(/Max-Age=(\d+)/.exec(first[0]!.headers.getSetCookie()[0]!)?.[1]);
  t.true(maxAge <= 3, `the cookie ends with the share (Max-Age ${maxAge})`);
  t.true((await api.fetchJson("GET", shares())).body.data.some((x: { id: string }) => x.id === s.id));
  const kept = b.cookie(hostOf("shop"), "berth_share")!;
  await new Promise((r) => setTimeout(r, 3200));
  t.is(b.cookie(hostOf("shop"), "berth_share"), undefined, "the browser dropped the cookie itself");
  const stubborn = browser();
  stubborn.setCookie(hostOf("shop"), "berth_share", kept);
  const withCookie = await stubborn.request(`http://shop.${DOMAIN}/`);
  t.is(withCookie.status, 403, "a client that keeps the cookie is refused all the same");
  t.regex(problemCode(withCookie), /^share_(grant|share)_expired$/);
  const withLink = last(await browser().navigate(s.url.replace("https:", "http:")));
  t.is(withLink.status, 403);
  t.is(problemCode(withLink), "share_share_expired");
  t.false((await api.fetchJson("GET", shares())).body.data.some((x: { id: string }) => x.id === s.id));
});

test.serial(
  "requireAuth: without signing in the viewer is sent to sign in and never reaches the service; after signing in with the identity provider they do",
  async (t) => {
    const s = await createShare({ requireAuth: true });
    t.true((await api.fetchJson("GET", shares())).body.data.find((x: { id: string }) => x.id === s.id).requireAuth);
    const b = browser();
    const link = s.url.replace("https:", "http:");
    const hops = await b.navigate(link);
    t.is(hops[0]!.status, 302);
    const login = new URL(hops[0]!.headers.get("location")!);
    t.is(`${login.origin}${login.pathname}`, `${api.url}/api/v1/auth/oidc/login`);
    t.is(login.searchParams.get("rd"), `http://shop.${DOMAIN}/`, "the token never travels on");
    const authorize = new URL(hops[1]!.headers.get("location")!);
    t.is(authorize.origin, idp.issuer);
    t.is(authorize.searchParams.get("code_challenge_method"), "S256");
    t.truthy(authorize.searchParams.get("state"));
    t.truthy(authorize.searchParams.get("nonce"));
    t.is(last(hops).status, 200, "the identity provider's sign-in page");
    t.regex(last(hops).text, /<form method="post"/);
    // Not signed in: the share's cookie alone does not open the service.
    const notYet = await b.request(`http://shop.${DOMAIN}/`);
    t.is(notYet.status, 302, "sent away to sign in, not served");
    t.regex(notYet.headers.get("location") ?? "", /\/api\/v1\/auth\/oidc\/login\?rd=/);

    // Sign in on the identity provider's page.
    const form = last(hops);
    const action = new URL(/action="([^"]+)"/.exec(form.text)![1]!, form.url);
    const after = await b.navigate(action, {
      method: "POST",
      body: "login=alice",
      headers: { "Content-Type": "application/x-www-form-urlencoded" },
    });
    const back = after.find((h) => h.url.startsWith(`http://shop.${DOMAIN}/?berth_login=`));
    t.truthy(back, after.map((h) => `${h.status} ${h.url}`).join("\n"));
    t.is(back!.status, 302);
    t.is(back!.headers.get("location"), `http://shop.${DOMAIN}/`);
    t.is(last(after).status, 200);
    t.regex(last(after).text, /shop answered; share=.*; user=alice@example.com/);
    t.deepEqual(idp.signIns, ["alice"]);
    t.is((await b.request(`http://shop.${DOMAIN}/later`)).status, 200, "the signed-in cookie works on later requests");

    // The sign-in ticket works once, and only on its host.
    const ticket = new URL(back!.url).searchParams.get("berth_login")!;
    const replay = await b.request(`http://shop.${DOMAIN}/?berth_login=${ticket}`);
    t.is(replay.status, 403);
    // ... also on another replica: one with the same key and database, its own memory.
    const replica = new ForwardAuth({
      cache: new ReadYourWritesCache(api.services.kube, API_FIELD_MANAGER).track("Share", api.services.shareCache),
      key: Buffer.from(SHARE_KEY, "utf8"),
      sessionSeconds: 3600,
      signIn: undefined,
      tickets: new PgTicketLedger(api.orm),
      log: pino({ level: "silent" }),
      now: () => new Date(),
    });
    const cookie = b.cookieHeader(new URL(`http://shop.${DOMAIN}/`));
    const elsewhere = await Promise.resolve()
      .then(() =>
        replica.check({
          namespace: api.namespace,
          app: "shop",
          method: "GET",
          proto: "http",
          host: `shop.${DOMAIN}`,
          uri: `/?berth_login=${ticket}`,
          cookie,
          nginx: false,
        }),
      )
      .catch((e: unknown) => e);
    t.true(elsewhere instanceof EdgeDenied && elsewhere.reason === "invalid_grant", "the ticket was already taken on the first replica");
    const forgedTicket = await b.request(`http://shop.${DOMAIN}/?berth_login=${ticket.slice(0, -3)}abc`);
    t.is(forgedTicket.status, 403);
    // Another browser with only the share link still has to sign in.
    t.false(last(await browser().navigate(link)).text.includes("shop answered"));
    await api.fetchJson("DELETE", `${shares()}/${s.id}`);
  },
);

test.serial("an email the identity provider did not verify is never the viewer's name: the App is told issuer#subject", async (t) => {
  const s = await createShare({ requireAuth: true });
  const b = browser();
  const hops = await b.navigate(s.url.replace("https:", "http:"));
  const form = last(hops);
  const action = new URL(/action="([^"]+)"/.exec(form.text)![1]!, form.url);
  const after = await b.navigate(action, {
    method: "POST",
    body: "login=unverified-mallory",
    headers: { "Content-Type": "application/x-www-form-urlencoded" },
  });
  t.is(last(after).status, 200);
  t.notRegex(last(after).text, /user=unverified-mallory@example\.com/, "the unverified email is not passed on");
  t.true(last(after).text.includes(`user=${idp.issuer}#unverified-mallory`), last(after).text);
  await api.fetchJson("DELETE", `${shares()}/${s.id}`);
});

test.serial("a callback that was not started here, or with a wrong state, is refused", async (t) => {
  const r = await fetch(`${api.url}/api/v1/auth/oidc/callback?code=x&state=y`, { redirect: "manual" });
  t.is(r.status, 401);
  const bad = await fetch(`${api.url}/api/v1/auth/oidc/login?rd=${encodeURIComponent("https://evil.example/")}`, { redirect: "manual" });
  t.is(bad.status, 400);
  t.is(((await bad.json()) as { code: string }).code, "invalid_return_url");
});

test.serial("every decision is logged, and no line holds a token, a cookie or a ticket", async (t) => {
  const s = await createShare();
  const b = browser();
  await b.navigate(s.url.replace("https:", "http:"));
  await b.request(`http://shop.${DOMAIN}/`);
  const decisions = api.logs.filter((l) => l.component === "forward-auth");
  t.true(decisions.some((l) => l.decision === "allow" && l.share === s.id));
  t.true(decisions.some((l) => l.decision === "deny" && l.reason === "no_grant"));
  t.true(decisions.every((l) => typeof l.decision === "string" && typeof l.app === "string"));
  const all = JSON.stringify(api.logs);
  t.false(all.includes(s.token.slice(7)), "no share token");
  t.false(all.includes(b.cookie(hostOf("shop"), "berth_share")!.split(".")[1]!), "no cookie");
  t.false(/berth_login=[A-Za-z0-9_-]{10}/.test(all), "no sign-in ticket");
  await api.fetchJson("DELETE", `${shares()}/${s.id}`);
});

test.serial(
  "the check answers alike before Koa (a plain GET) and through it (the same path with a trailing slash, which only Koa's router takes)",
  async (t) => {
    const s = await createShare();
    const b = browser();
    await b.navigate(s.url.replace("https:", "http:"));
    const cookie = `berth_share=${b.cookie(hostOf("shop"), "berth_share")!}`;
    const check = async (suffix: string, headers: Record<string, string>) => {
      const r = await fetch(`${api.url}/api/v1/forward-auth/${api.namespace}/shop${suffix}`, {
        redirect: "manual",
        headers: {
          "X-Forwarded-Method": "GET",
          "X-Forwarded-Proto": "http",
          "X-Forwarded-Host": hostOf("shop"),
          "X-Forwarded-Uri": "/a?b=1",
          ...headers,
        },
      });
      const text = await r.text();
      return {
        status: r.status,
        share: r.headers.get("x-berth-share"),
        location: r.headers.get("location"),
        problemType: r.status >= 400 ? r.headers.get("content-type") : null,
        setCookie: r.headers.getSetCookie().map((c) => c.replace(/=[^;]+/, "=<value>")),
        code: text.startsWith("{") ? (JSON.parse(text) as { code: string }).code : undefined,
      };
    };
    const cases: Record<string, string>[] = [
      {},
      { Cookie: cookie },
      { Cookie: `${cookie}x` },
      { "X-Forwarded-Uri": `/?berth_share=${s.token}` },
      { "X-Forwarded-Uri": "/?berth_share=shr_sk_nope" },
      { "X-Original-URL": `http://${hostOf("shop")}/?berth_share=${s.token}` },
      { "X-Forwarded-Method": "POST", "X-Forwarded-Uri": `/?berth_share=${s.token}` },
    ];
    for (const headers of cases) {
      const bare = await check("", headers),
        koa = await check("/", headers);
      t.deepEqual(bare, koa, JSON.stringify(headers).replace(s.token, "<token>"));
    }
    // The plain GET really was answered before Koa: Koa gives a 200 without a body its own text/plain "OK".
    const plain = await fetch(`${api.url}/api/v1/forward-auth/${api.namespace}/shop`, {
      headers: { "X-Forwarded-Host": hostOf("shop"), Cookie: cookie },
    });
    t.is(plain.status, 200);
    t.is(plain.headers.get("content-type"), null, "no body and no Content-Type: the bare path answered");
    t.is(await plain.text(), "");
    const routes = api.logs
      .filter((l) => l.msg === "request" && typeof l.path === "string" && l.path.includes("/forward-auth/"))
      .map((l) => [l.path, l.route]);
    t.true(
      routes.some(([p]) => !String(p).endsWith("/")) && routes.every(([, r]) => r === "/api/v1/forward-auth/:namespace/:appId"),
      "both logged as the route",
    );
    await api.fetchJson("DELETE", `${shares()}/${s.id}`);
  },
);
