// Key material: format, hashing, display prefix, constant-time comparison, Bearer parsing.
import test from "ava";
import { createHash } from "node:crypto";
import {
  PLATFORM_ADMIN_KEY_PREFIX,
  WORKSPACE_KEY_PREFIX,
  bearerToken,
  digestsEqual,
  displayPrefix,
  hashToken,
  isTokenOfKind,
  mintToken,
} from "../../../api/auth/tokens.ts";
import { WORKSPACE_ID_PATTERN, namespaceFor, newWorkspaceId } from "../../../api/workspaces/service.ts";

test("workspace keys are ws_sk_ + 43 base64url characters of 32 random bytes", (t) => {
  const keys = new Set<string>();
  for (let i = 0; i < 200; i++) {
    const k = mintToken(WORKSPACE_KEY_PREFIX);
    t.regex(k, /^ws_sk_[A-Za-z0-9_-]{43}$/);
    t.is(Buffer.from(k.slice(6), "base64url").length, 32);
    keys.add(k);
  }
  t.is(keys.size, 200);
  t.regex(mintToken(PLATFORM_ADMIN_KEY_PREFIX), /^pa_sk_[A-Za-z0-9_-]{43}$/);
});

test("the stored hash is the SHA-256 hex of the whole key; the prefix is its first 12 characters", (t) => {
  const k = "ws_sk_" + "a".repeat(43);
  t.is(hashToken(k), createHash("sha256").update(k).digest("hex"));
  t.regex(hashToken(k), /^[0-9a-f]{64}$/);
  t.is(displayPrefix(k), "ws_sk_aaaaaa");
  t.notThrows(() => displayPrefix(mintToken(WORKSPACE_KEY_PREFIX)));
});

test("isTokenOfKind checks prefix, length and alphabet", (t) => {
  const k = mintToken(WORKSPACE_KEY_PREFIX);
  t.true(isTokenOfKind(k, WORKSPACE_KEY_PREFIX));
  t.false(isTokenOfKind(k, PLATFORM_ADMIN_KEY_PREFIX));
  t.false(isTokenOfKind(k + "a", WORKSPACE_KEY_PREFIX));
  t.false(isTokenOfKind(k.slice(0, -1), WORKSPACE_KEY_PREFIX));
  t.false(isTokenOfKind("ws_sk_" + "+".repeat(43), WORKSPACE_KEY_PREFIX));
});

test("digestsEqual compares digests, refusing anything that is not one", (t) => {
  const a = hashToken("a");
  t.true(digestsEqual(a, hashToken("a")));
  t.false(digestsEqual(a, hashToken("b")));
  t.false(digestsEqual(a, a.slice(0, 62)));
  t.false(digestsEqual("zz", "zz"));
});

test("bearerToken accepts 'Bearer <token>' in any case and nothing else", (t) => {
  t.is(bearerToken("Bearer ws_sk_abc"), "ws_sk_abc");
  t.is(bearerToken("bearer ws_sk_abc"), "ws_sk_abc");
  t.is(bearerToken("BEARER  ws_sk_abc "), "ws_sk_abc");
  t.is(bearerToken(undefined), undefined);
  t.is(bearerToken(""), undefined);
  t.is(bearerToken("Bearer"), undefined);
  t.is(bearerToken("Basic dXNlcjpwYXNz"), undefined);
  t.is(bearerToken("Bearer a b"), undefined);
  t.is(bearerToken("ws_sk_abc"), undefined);
});

test("workspace ids are ws + 10 lowercase base32 characters; namespaces are berth-<id>", (t) => {
  const ids = new Set<string>();
  for (let i = 0; i < 500; i++) {
    const id = newWorkspaceId();
    t.regex(id, WORKSPACE_ID_PATTERN);
    ids.add(id);
  }
  t.is(ids.size, 500);
  t.is(namespaceFor("wsabcdefghij"), "berth-wsabcdefghij");
  t.true(namespaceFor(newWorkspaceId()).length <= 63);
});
