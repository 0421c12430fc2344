// The registry's token service: the grants per caller (pure), and tokens as the registry checks
// them (the JWT verified against the JWKS the registry is given, by jose).
import test from "ava";
import { generateKeyPairSync, randomBytes } from "node:crypto";
import type { AddressInfo } from "node:net";
import { createLocalJWKSet, jwtVerify } from "jose";
import { grant, parseScopes, type Access } from "../../../api/registry/grants.ts";
import { RateLimiter } from "../../../api/http/limits.ts";
import { callerOf, jwksOf, startTokenService } from "../../../api/registry/token-service.ts";
import { createLogger } from "../../../kube/logger.ts";
import {
  namespaceOfPullUsername,
  passwordMatches,
  pullDockerConfig,
  pullUsername,
  registryPassword,
} from "../../../kube/registry-credentials.ts";

const key = randomBytes(32);
const pull = (name: string): Access => ({ type: "repository", name, actions: ["pull"] });

test("scopes: type, a name that may hold a colon, actions; several per parameter; a bound", (t) => {
  t.deepEqual(parseScopes(["repository:apps/berth-a/web:pull,push", "repository:berth/pause:pull registry:catalog:*"]), [
    { type: "repository", name: "apps/berth-a/web", actions: ["pull", "push"] },
    { type: "repository", name: "berth/pause", actions: ["pull"] },
    { type: "registry", name: "catalog", actions: ["*"] },
  ]);
  t.deepEqual(parseScopes(["repository:host:5000/x:pull"]), [{ type: "repository", name: "host:5000/x", actions: ["pull"] }]);
  t.deepEqual(parseScopes(["nonsense", ":a:b", "repository:nope"]), []);
  t.is(parseScopes([Array.from({ length: 17 }, (_, i) => `repository:r${i}:pull`).join(" ")]), undefined);
});

test("a namespace's credential pulls its own workspace images and the platform's, nothing of another namespace", (t) => {
  const a = { kind: "namespace", namespace: "berth-a" } as const;
  const asked = [pull("apps/berth-a/web"), pull("apps/berth-b/web"), pull("berth/pause"), pull("berth/samples-hello")];
  t.deepEqual(
    grant(a, asked, "apps").map((x) => x.name),
    ["apps/berth-a/web", "berth/pause", "berth/samples-hello"],
  );
  // anonymous: the platform's images only
  t.deepEqual(
    grant({ kind: "anonymous" }, asked, "apps").map((x) => x.name),
    ["berth/pause", "berth/samples-hello"],
  );
  // never more than pull; no other type; not the prefix itself or a namespace's bare path
  const wider = [
    { type: "repository", name: "apps/berth-a/web", actions: ["pull", "push", "delete", "*"] },
    { type: "repository", name: "berth/pause", actions: ["push"] },
    { type: "registry", name: "catalog", actions: ["*"] },
    { type: "repository(plugin)", name: "apps/berth-a/web", actions: ["pull"] },
    pull("apps"),
    pull("apps/berth-a"),
    pull("Apps/Berth-A/Web"),
    pull("apps/../berth-b/web"),
  ];
  t.deepEqual(grant(a, wider, "apps"), [{ type: "repository", name: "apps/berth-a/web", actions: ["pull"] }]);
  // a prefix of more than one segment, and one that only looks alike
  t.deepEqual(
    grant({ kind: "anonymous" }, [pull("org/apps/berth-a/web"), pull("org/apps-old/x")], "org/apps").map((x) => x.name),
    ["org/apps-old/x"],
  );
  t.throws(() => grant(a, asked, ""));
});

test("credentials: one namespace's password is not another's, and checks are exact", (t) => {
  const user = pullUsername("berth-a");
  t.is(user, "pull@berth-a");
  t.is(namespaceOfPullUsername(user), "berth-a");
  t.is(namespaceOfPullUsername("pull@Not_A_Namespace"), undefined);
  t.is(namespaceOfPullUsername("push@berth-a"), undefined);
  const pw = registryPassword(key, user);
  t.true(passwordMatches(key, user, pw));
  t.false(passwordMatches(key, pullUsername("berth-b"), pw));
  t.false(passwordMatches(randomBytes(32), user, pw));
  t.false(passwordMatches(key, user, pw.slice(0, -1)));
  t.throws(() => registryPassword(randomBytes(16), user));
  t.throws(() => pullUsername("../x"));
  const basic = (u: string, p: string) => `Basic ${Buffer.from(`${u}:${p}`).toString("base64")}`;
  t.deepEqual(callerOf(undefined, key), { kind: "anonymous" });
  t.deepEqual(callerOf(basic(user, pw), key), { kind: "namespace", namespace: "berth-a" });
  t.is(callerOf(basic(pullUsername("berth-b"), pw), key), undefined);
  t.is(callerOf(basic(user, "guess"), key), undefined);
  t.is(callerOf("Bearer x", key), undefined);
  const config = JSON.parse(pullDockerConfig(key, "127.0.0.1:5000", "berth-a")) as {
    auths: Record<string, { username: string; password: string; auth: string }>;
  };
  const entry = config.auths["127.0.0.1:5000"]!;
  t.is(entry.username, user);
  t.is(Buffer.from(entry.auth, "base64").toString(), `${user}:${pw}`);
});

test("the token service: tokens the registry accepts, carrying only what was granted; bad credentials refused", async (t) => {
  const { privateKey, publicKey } = generateKeyPairSync("ed25519");
  const lines: string[] = [];
  const log = createLogger({ level: "info", destination: { write: (l: string) => void lines.push(l) } });
  const server = await startTokenService(
    { key, signingKey: privateKey, service: "berth-registry", issuer: "berth-registry-auth", prefix: "apps", log },
    "127.0.0.1",
    0,
  );
  t.teardown(() => server.close());
  const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const jwks = createLocalJWKSet(await jwksOf(publicKey));
  const user = pullUsername("berth-a");
  const pw = registryPassword(key, user);
  const ask = (scopes: string[], auth?: string) =>
    fetch(`${base}/token?service=berth-registry&${scopes.map((s) => `scope=${encodeURIComponent(s)}`).join("&")}`, {
      headers: auth ? { authorization: auth } : {},
    });
  const basic = (u: string, p: string) => `Basic ${Buffer.from(`${u}:${p}`).toString("base64")}`;

  const res = await ask(["repository:apps/berth-a/web:pull", "repository:apps/berth-b/web:pull"], basic(user, pw));
  t.is(res.status, 200);
  t.is(res.headers.get("cache-control"), "no-store");
  const body = (await res.json()) as { token: string; access_token: string; expires_in: number };
  t.is(body.access_token, body.token);
  t.is(body.expires_in, 300);
  const { payload, protectedHeader } = await jwtVerify(body.token, jwks, { issuer: "berth-registry-auth", audience: "berth-registry" });
  t.is(protectedHeader.alg, "EdDSA");
  t.is(payload.sub, user);
  t.deepEqual(payload.access, [{ type: "repository", name: "apps/berth-a/web", actions: ["pull"] }]);
  t.is(payload.exp! - payload.iat!, 300);

  // the same request anonymously: a token without the workspace image
  const anon = (await (await ask(["repository:apps/berth-a/web:pull", "repository:berth/pause:pull"])).json()) as { token: string };
  t.deepEqual((await jwtVerify(anon.token, jwks)).payload.access, [{ type: "repository", name: "berth/pause", actions: ["pull"] }]);

  // another namespace's password, or a guess: 401, with a Basic challenge
  const refused = await ask(["repository:apps/berth-a/web:pull"], basic(pullUsername("berth-b"), pw));
  t.is(refused.status, 401);
  t.regex(refused.headers.get("www-authenticate") ?? "", /^Basic /);
  t.is((await ask(["repository:apps/berth-a/web:pull"], basic(user, "x"))).status, 401);
  // another service, another method, another path, too many scopes
  t.is((await fetch(`${base}/token?service=other`)).status, 400);
  t.is((await fetch(`${base}/token?service=berth-registry`, { method: "POST" })).status, 405);
  t.is((await fetch(`${base}/v2/`)).status, 404);
  t.is((await ask(Array.from({ length: 17 }, (_, i) => `repository:r${i}:pull`))).status, 400);
  // a registry that trusts another key (another installation's) does not take it
  const other = generateKeyPairSync("ed25519");
  const otherKeys = createLocalJWKSet(await jwksOf(other.publicKey));
  await t.throwsAsync(() => jwtVerify(body.token, otherKeys));
  // no password in the log, the namespace and the grants are
  const logged = lines.join("");
  t.false(logged.includes(pw));
  t.regex(logged, /"caller":"berth-a"/);
  t.regex(logged, /registry token refused/);
});

test("one namespace's flood of token requests spends its own budget only: another namespace and the nodes are still served", async (t) => {
  const { privateKey } = generateKeyPairSync("ed25519");
  const log = createLogger({ level: "silent" });
  const start = async (limiter?: RateLimiter) => {
    const server = await startTokenService(
      { key, signingKey: privateKey, service: "berth-registry", issuer: "berth-registry-auth", prefix: "apps", log, limiter },
      "127.0.0.1",
      0,
    );
    t.teardown(() => server.close());
    return `http://127.0.0.1:${(server.address() as AddressInfo).port}/token?service=berth-registry&scope=repository:berth/pause:pull`;
  };
  const as = (ns: string) => ({
    authorization: `Basic ${Buffer.from(`${pullUsername(ns)}:${registryPassword(key, pullUsername(ns))}`).toString("base64")}`,
  });
  const flood = async (url: string, headers: Record<string, string>, n: number) => {
    const out: number[] = [];
    for (let i = 0; i < n; i++) out.push((await fetch(url, { headers })).status);
    return out;
  };

  // the protection off: every one of A's requests is served, however many
  const open = await start();
  t.deepEqual(await flood(open, as("berth-a"), 6), [200, 200, 200, 200, 200, 200]);

  // a budget of 3 at once per caller
  const url = await start(new RateLimiter({ perSecond: 0.01, burst: 3 }));
  t.deepEqual(await flood(url, as("berth-a"), 5), [200, 200, 200, 429, 429]);
  const limited = await fetch(url, { headers: as("berth-a") });
  t.is(limited.status, 429);
  t.true(Number(limited.headers.get("retry-after")) >= 1);
  // B's credential and an anonymous node are other callers, still served
  t.is((await fetch(url, { headers: as("berth-b") })).status, 200);
  t.is((await fetch(url)).status, 200);
  // guessing passwords spends the address's budget: after it, no more answers to check against
  const guess = { authorization: `Basic ${Buffer.from(`${pullUsername("berth-b")}:guess`).toString("base64")}` };
  t.deepEqual(await flood(url, guess, 3), [401, 401, 429]);
});
