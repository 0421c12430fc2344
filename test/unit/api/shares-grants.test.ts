// The pure parts of share links (api/shares/grants.ts): tokens and their hashes, signed values
// (forged, tampered, swapped between purposes), the cookie, and the decision with time passed in.
import test from "ava";
import { viewerOf } from "../../../api/shares/oidc.ts";
import { createHash } from "node:crypto";
import {
  cookieValue,
  decide,
  grantCookie,
  grantExpiry,
  isShareToken,
  mintShareToken,
  parseGrant,
  parseTicket,
  shareLive,
  shareTokenHash,
  sign,
  tokenMatches,
  verify,
  withoutParams,
  type Grant,
  type ShareView,
} from "../../../api/shares/grants.ts";
import { scrubTokens } from "../../../kube/logger.ts";

const key = Buffer.from("k".repeat(32));
const otherKey = Buffer.from("o".repeat(32));
const NOW = Date.parse("2030-01-01T00:00:00Z");

test("a share token is 32 random bytes with its prefix; its hash is SHA-256 hex; logs scrub it by its shape", (t) => {
  const a = mintShareToken(),
    b = mintShareToken();
  t.regex(a, /^shr_sk_[A-Za-z0-9_-]{43}$/);
  t.not(a, b);
  t.true(isShareToken(a));
  t.false(isShareToken(`${a}x`));
  t.false(isShareToken("ws_sk_" + a.slice(7)));
  t.is(shareTokenHash(a), createHash("sha256").update(a).digest("hex"));
  t.true(tokenMatches(a, shareTokenHash(a)));
  t.false(tokenMatches(b, shareTokenHash(a)));
  t.false(tokenMatches(a, "not-a-hash"));
  t.false(scrubTokens(`GET /?berth_share=${a}`).includes(a.slice(7)));
});

test("signed values verify only with the same key and purpose; any change to body or MAC is refused", (t) => {
  const v = sign(key, "grant", { a: 1 });
  t.deepEqual(verify(key, "grant", v), { a: 1 });
  t.is(verify(otherKey, "grant", v), undefined, "another key: forged");
  t.is(verify(key, "login", v), undefined, "a grant is not a sign-in ticket");
  const [body, mac] = v.split(".") as [string, string];
  const forgedBody = Buffer.from(JSON.stringify({ a: 2 })).toString("base64url");
  t.is(verify(key, "grant", `${forgedBody}.${mac}`), undefined, "tampered body");
  const flipped = mac.slice(0, -2) + (mac.at(-2) === "A" ? "B" : "A") + mac.at(-1);
  t.is(verify(key, "grant", `${body}.${flipped}`), undefined, "tampered MAC");
  t.is(verify(key, "grant", `${body}.${mac.slice(0, 10)}`), undefined, "short MAC");
  for (const bad of [undefined, "", ".", "abc", `${body}.${mac}.x`, "x".repeat(5000)]) t.is(verify(key, "grant", bad), undefined);
});

test("grants and tickets parse only when every field is there and well typed", (t) => {
  const g: Grant = { ns: "ns", app: "a", share: "a-1", uid: "u", host: "a.example", exp: 10 };
  t.deepEqual(parseGrant(g), g);
  t.deepEqual(parseGrant({ ...g, user: { sub: "s", email: "e@x" } }), { ...g, user: { sub: "s", email: "e@x" } });
  t.is(parseGrant({ ...g, exp: "10" }), undefined);
  t.is(parseGrant({ ...g, user: { email: "no-sub" } }), undefined);
  t.is(parseGrant(null), undefined);
  t.truthy(parseTicket({ host: "h", user: { sub: "s" }, exp: 1, jti: "j" }));
  t.is(parseTicket({ host: "h", exp: 1, jti: "j" }), undefined);
});

const share: ShareView = { name: "a-1", uid: "u1", app: "a", requireAuth: false };
const at = { ns: "ns", app: "a", host: "a.example" };
const grant: Grant = { ns: "ns", app: "a", share: "a-1", uid: "u1", host: "a.example", exp: NOW / 1000 + 60 };

test("decide: a valid grant of a live share passes", (t) => {
  t.like(decide(at, grant, share, NOW), { allow: true, share });
});

const denials: [string, Grant | undefined, ShareView | undefined, number, string][] = [
  ["no cookie", undefined, share, NOW, "no_grant"],
  ["another App", { ...grant, app: "b" }, share, NOW, "wrong_app"],
  ["another namespace", { ...grant, ns: "other" }, share, NOW, "wrong_app"],
  ["another host", { ...grant, host: "b.example" }, share, NOW, "wrong_app"],
  ["the cookie's lifetime is over", grant, share, NOW + 60_000, "grant_expired"],
  ["the share was revoked (gone from the cache)", grant, undefined, NOW, "share_revoked"],
  ["the share was re-created under the same name", grant, { ...share, uid: "u2" }, NOW, "share_revoked"],
  ["the share expired a millisecond ago", grant, { ...share, expiresAt: NOW - 1 }, NOW, "share_expired"],
  ["the share expires right now", grant, { ...share, expiresAt: NOW }, NOW, "share_expired"],
  ["a share of another App", grant, { ...share, app: "b" }, NOW, "share_revoked"],
  ["requireAuth without a signed-in viewer", grant, { ...share, requireAuth: true }, NOW, "login_required"],
];
for (const [what, g, s, now, reason] of denials) {
  test(`decide: refused when ${what}`, (t) => {
    t.like(decide(at, g, s, now), { allow: false, reason });
  });
}

test("decide: requireAuth passes with a signed-in viewer, and the viewer is reported", (t) => {
  const d = decide(at, { ...grant, user: { sub: "alice" } }, { ...share, requireAuth: true }, NOW);
  t.like(d, { allow: true, user: { sub: "alice" } });
});

test("shareLive: a share that expires in the future is live until then", (t) => {
  t.true(shareLive({ ...share, expiresAt: NOW + 1 }, "a", NOW).ok);
  t.false(shareLive({ ...share, expiresAt: NOW + 1 }, "a", NOW + 1).ok);
});

test("the cookie lives for the session, never past the share's expiry", (t) => {
  t.is(grantExpiry(share, NOW, 3600), NOW / 1000 + 3600);
  t.is(grantExpiry({ ...share, expiresAt: NOW + 60_000 }, NOW, 3600), NOW / 1000 + 60);
});

test("the cookie is host-only, HttpOnly, SameSite=Lax, and Secure over https", (t) => {
  const c = grantCookie("berth_share", "v", { maxAgeSeconds: 60, secure: true });
  t.is(c, "berth_share=v; Path=/; Max-Age=60; HttpOnly; SameSite=Lax; Secure");
  t.false(grantCookie("berth_share", "v", { maxAgeSeconds: 60, secure: false }).includes("Secure"));
  t.false(c.includes("Domain"));
  t.is(cookieValue("a=1; berth_share=xyz; b=2", "berth_share"), "xyz");
  t.is(cookieValue("a=1", "berth_share"), undefined);
  t.is(cookieValue(undefined, "berth_share"), undefined);
});

test("the viewer is sent back without the token or ticket, everything else kept", (t) => {
  t.is(withoutParams(new URL("https://a.example/p?x=1&berth_share=t&y=2"), ["berth_share", "berth_login"]), "https://a.example/p?x=1&y=2");
  t.is(withoutParams(new URL("https://a.example/?berth_login=t"), ["berth_share", "berth_login"]), "https://a.example/");
});

test("the signed-in viewer: the email only when the provider verified it, else issuer#subject", (t) => {
  const iss = "https://login.example.com";
  t.deepEqual(viewerOf({ iss, sub: "u1", email: "a@corp.example", email_verified: true }), { sub: `${iss}#u1`, email: "a@corp.example" });
  for (const email_verified of [false, "true", undefined])
    t.deepEqual(viewerOf({ iss, sub: "u1", email: "ceo@corp.example", email_verified }), { sub: `${iss}#u1` }, String(email_verified));
  t.deepEqual(viewerOf({ iss, sub: "u1", email_verified: true }), { sub: `${iss}#u1` });
});
