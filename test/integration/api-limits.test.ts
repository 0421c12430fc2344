// Limits of the real API server (docs/api.md "Limits"): per-key rate limits (the api, ingest and
// guard budgets) with 429 and Retry-After (the limits' clock is the test's, moved by hand: no
// waiting, no timing asserted), slow clients cut off with a 408 while others are served, and
// bodies over the limit refused with a 413, announced or streamed.
import { connect, type Socket } from "node:net";
import test from "ava";
import { startApi, type TestApi } from "../helpers/api.ts";
import { provisionApp } from "../helpers/governance.ts";
import { identity } from "../helpers/identities.ts";

/** A raw HTTP/1.1 connection to the server: what a careless or hostile client sends. */
function rawConnection(api: TestApi): { socket: Socket; received: Promise<string> } {
  const url = new URL(api.url);
  const socket = connect(Number(url.port), url.hostname);
  let text = "";
  socket.setEncoding("utf8");
  socket.on("data", (d: string) => {
    text += d;
  });
  const received = new Promise<string>((resolve) => {
    socket.on("close", () => resolve(text));
    socket.on("error", () => undefined); // a reset after the answer: what was read is kept
  });
  return { socket, received };
}

/** The status and the JSON body of a raw HTTP/1.1 answer. */
function parseAnswer(raw: string): { status: number; headers: string; body: Record<string, unknown> | undefined } {
  const [head = "", body = ""] = raw.split("\r\n\r\n", 2);
  const status = Number(/^HTTP\/1\.1 (\d{3})/.exec(head)?.[1] ?? 0);
  let json: Record<string, unknown> | undefined;
  try {
    json = JSON.parse(body) as Record<string, unknown>;
  } catch {
    json = undefined;
  }
  return { status, headers: head, body: json };
}

test("a workspace over its budget gets 429 with Retry-After, all its keys together; other workspaces and budgets are unaffected; after Retry-After it passes again", async (t) => {
  t.timeout(120_000);
  let now = 1_700_000_000_000;
  const api = await startApi({
    now: () => now,
    env: {
      BERTH_RATE_LIMIT_API_PER_SECOND: "1",
      BERTH_RATE_LIMIT_API_BURST: "3",
      BERTH_RATE_LIMIT_INGEST_PER_SECOND: "0.5",
      BERTH_RATE_LIMIT_INGEST_BURST: "2",
      BERTH_RATE_LIMIT_GUARD_PER_SECOND: "0.5",
      BERTH_RATE_LIMIT_GUARD_BURST: "2",
    },
  });
  t.teardown(() => api.stop());
  const ws = `/workspaces/${api.workspaceId}`;
  const second = (await api.services.keys.create(api.orm.em.fork(), api.workspaceId, "second")).secret;
  const other = await api.createWorkspace("other");

  for (let i = 0; i < 3; i++) {
    const r = await api.fetchJson("GET", ws);
    t.is(r.status, 200);
    t.is(r.headers.get("ratelimit-policy"), '"api";q=3;w=3');
    t.is(r.headers.get("ratelimit"), `"api";r=${2 - i};t=${i + 1}`);
  }
  const limited = await api.fetchJson("GET", ws);
  t.is(limited.status, 429);
  t.regex(limited.headers.get("content-type") ?? "", /^application\/problem\+json/);
  t.is(limited.body.code, "rate_limited");
  t.is(limited.headers.get("retry-after"), "1");
  t.is(limited.headers.get("ratelimit"), '"api";r=0;t=3');
  t.is(
    (await api.fetchJson("POST", `${ws}/apps`, { body: { name: "x", slug: "x", type: "web" } })).status,
    429,
    "every route of the api budget",
  );

  t.is(
    (await api.fetchJson("GET", ws, { key: second })).status,
    429,
    "another key of the same workspace shares its budget: minting keys buys no requests",
  );
  t.is(
    (await api.fetchJson("GET", `/workspaces/${other.workspaceId}`, { key: other.apiKey })).status,
    200,
    "another workspace is unaffected",
  );
  t.is(
    (await api.fetchJson("GET", "/governance/guard-templates", { key: api.adminKey })).status,
    200,
    "a platform admin key has its own budget",
  );
  for (let i = 0; i < 2; i++) t.is((await api.fetchJson("GET", ws, { key: other.apiKey })).status, 404);
  t.is(
    (await api.fetchJson("GET", `/workspaces/${other.workspaceId}`, { key: other.apiKey })).status,
    429,
    "calls on another workspace's path spend the caller's own budget",
  );

  // Ingestion spends its own budget, per app key.
  const app = await provisionApp(api, (await identity("operator")).token, "limited");
  for (let i = 0; i < 2; i++) {
    const r = await api.fetchJson("GET", "/governance/config", { key: app.key });
    t.is(r.status, 200);
    t.is(r.headers.get("ratelimit-policy"), '"ingest";q=2;w=4');
  }
  const ingestLimited = await api.fetchJson("POST", "/governance/traces", { key: app.key, body: {} });
  t.is(ingestLimited.status, 429, "the ingestion budget is spent before the body is looked at");
  t.is(ingestLimited.headers.get("retry-after"), "2");
  t.is(ingestLimited.body.details.policy, "ingest");

  // Guard checks spend a budget of their own, per app key: ingestion's is spent, theirs is whole.
  const guardCheck = () => api.fetchJson("POST", "/governance/guard-check", { key: app.key, body: { phase: "input", text: "hello" } });
  for (let i = 0; i < 2; i++) {
    const r = await guardCheck();
    t.is(r.status, 200, r.text);
    t.is(r.headers.get("ratelimit-policy"), '"guard";q=2;w=4');
  }
  const guardLimited = await guardCheck();
  t.is(guardLimited.status, 429);
  t.is(guardLimited.headers.get("retry-after"), "2");
  t.is(guardLimited.body.details.policy, "guard");
  t.regex(guardLimited.body.detail, /the guard budget of this app key is spent/);

  // Requests without a valid key spend their address's budget: public routes and refused keys alike.
  for (let i = 0; i < 3; i++) t.is((await api.fetchJson("GET", "/openapi.json", { key: null })).status, 200);
  t.is((await api.fetchJson("GET", "/openapi.json", { key: null })).status, 429);
  const guessing = await api.fetchJson("GET", ws, { key: "ws_sk_guessedguessedguessedguessedguessedguessedgue" });
  t.is(guessing.status, 429, "a refused key spends the address's budget, not a key's");
  t.is((await api.fetchJson("GET", "/healthz", { key: null })).status, 200, "liveness and readiness are never limited");

  now += Number(limited.headers.get("retry-after")) * 1000;
  t.is((await api.fetchJson("GET", ws)).status, 200, "after Retry-After the key passes again");
  t.is((await api.fetchJson("GET", ws)).status, 429, "one request per second refilled, no more");
  now += 2000;
  t.is((await api.fetchJson("GET", "/governance/config", { key: app.key })).status, 200, "the ingestion budget refilled too");
  t.is((await guardCheck()).status, 200, "and the guard budget");
  t.is((await api.fetchJson("GET", ws, { key: "ws_sk_guessedguessedguessedguessedguessedguessedgue" })).status, 401);
});

test("behind trusted proxies each client has its own budget (X-Forwarded-For); without them every client behind the proxy shares one", async (t) => {
  t.timeout(60_000);
  const now = 1_700_000_000_000;
  const env = { BERTH_RATE_LIMIT_API_PER_SECOND: "1", BERTH_RATE_LIMIT_API_BURST: "2" };
  // The test's client stands for the ingress controller: its peer address is 127.0.0.1.
  const anon = (api: TestApi, forwardedFor: string) =>
    api.fetchJson("GET", "/openapi.json", { key: null, headers: { "X-Forwarded-For": forwardedFor } });
  const shared = await startApi({ now: () => now, env });
  t.teardown(() => shared.stop());
  for (let i = 0; i < 2; i++) t.is((await anon(shared, "203.0.113.7")).status, 200);
  t.is(
    (await anon(shared, "203.0.113.8")).status,
    429,
    "without trusted proxies: one noisy client locks out every other behind the ingress",
  );
  const behind = await startApi({ now: () => now, env: { ...env, BERTH_TRUSTED_PROXIES: "127.0.0.0/8" } });
  t.teardown(() => behind.stop());
  for (let i = 0; i < 2; i++) t.is((await anon(behind, "203.0.113.7")).status, 200);
  t.is((await anon(behind, "203.0.113.7")).status, 429);
  t.is((await anon(behind, "198.51.100.1, 203.0.113.7")).status, 429, "an address a client prepends does not move it to another budget");
  t.is((await anon(behind, "203.0.113.8")).status, 200, "another client behind the proxy is served");
});

test("forward-auth: one viewer past its budget gets 429 through the ingress; every other viewer of the service is still served", async (t) => {
  const check = (api: TestApi, viewer: string) =>
    fetch(`${api.url}/api/v1/forward-auth/${api.namespace}/shop`, {
      redirect: "manual",
      headers: {
        "X-Forwarded-For": viewer,
        "X-Forwarded-Proto": "http",
        "X-Forwarded-Host": "shop.apps.berth.local",
        "X-Forwarded-Uri": "/",
        "X-Forwarded-Method": "GET",
      },
    });
  const limited = await startApi({ env: { BERTH_RATE_LIMIT_EDGE_PER_SECOND: "0.001", BERTH_RATE_LIMIT_EDGE_BURST: "3" } });
  t.teardown(() => limited.stop());
  for (let i = 0; i < 3; i++) t.not((await check(limited, "203.0.113.7")).status, 429);
  const over = await check(limited, "203.0.113.7");
  t.is(over.status, 429);
  t.truthy(over.headers.get("retry-after"));
  t.is(((await over.json()) as { code: string }).code, "rate_limited");
  t.not((await check(limited, "203.0.113.8")).status, 429, "another viewer behind the same ingress is answered");
  // the limit off: the same viewer is never throttled
  const open = await startApi({ env: { BERTH_RATE_LIMIT_EDGE_PER_SECOND: "0" } });
  t.teardown(() => open.stop());
  for (let i = 0; i < 6; i++) t.not((await check(open, "203.0.113.7")).status, 429);
});

test("a workspace holds at most BERTH_MAX_KEYS_PER_WORKSPACE keys (409 key_limit_reached); revoking one makes room", async (t) => {
  const api = await startApi({ env: { BERTH_MAX_KEYS_PER_WORKSPACE: "3" } });
  t.teardown(() => api.stop());
  const keys = `/workspaces/${api.workspaceId}/api-keys`;
  const made = [];
  for (let i = 0; i < 2; i++) {
    const r = await api.fetchJson("POST", keys, { body: { name: `k${i}` } });
    t.is(r.status, 201, r.text);
    made.push(r.body.id as string);
  }
  const over = await api.fetchJson("POST", keys, { body: { name: "one too many" } });
  t.is(over.status, 409, over.text);
  t.is(over.body.code, "key_limit_reached");
  t.regex(over.body.detail, /3 keys/);
  t.is((await api.fetchJson("DELETE", `${keys}/${made[0]}`)).status, 204);
  t.is((await api.fetchJson("POST", keys, { body: { name: "room again" } })).status, 201);
});

test("slow clients (headers or body) are cut off with a 408 after the configured time, while other clients are served", async (t) => {
  t.timeout(60_000);
  const api = await startApi({ env: { BERTH_HEADERS_TIMEOUT_MS: "1000", BERTH_REQUEST_TIMEOUT_MS: "2000" } });
  t.teardown(() => api.stop());

  // Slowloris: headers that never end, a byte at a time.
  const slowHeaders = Array.from({ length: 10 }, () => rawConnection(api));
  const drips: NodeJS.Timeout[] = [];
  for (const [i, c] of slowHeaders.entries()) {
    c.socket.write(`GET /api/v1/workspaces/${api.workspaceId} HTTP/1.1\r\nHost: x\r\n`);
    drips.push(
      setInterval(() => {
        if (c.socket.writable) c.socket.write(`X-Drip-${i}: a\r\n`);
      }, 100),
    );
  }
  // A slow body: complete headers, then a byte at a time of the announced length.
  const slowBody = rawConnection(api);
  slowBody.socket.write(
    `POST /api/v1/workspaces/${api.workspaceId}/apps HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${api.apiKey}\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{`,
  );
  drips.push(
    setInterval(() => {
      if (slowBody.socket.writable) slowBody.socket.write(" ");
    }, 100),
  );
  t.teardown(() => {
    for (const d of drips) clearInterval(d);
  });

  // Meanwhile a normal client is served, repeatedly.
  for (let i = 0; i < 5; i++) t.is((await api.fetchJson("GET", `/workspaces/${api.workspaceId}`)).status, 200);

  for (const c of slowHeaders) {
    const answer = parseAnswer(await c.received);
    t.is(answer.status, 408);
    t.regex(answer.headers, /content-type: application\/problem\+json/i);
    t.is(answer.body?.code, "request_timeout");
  }
  const body = parseAnswer(await slowBody.received);
  t.is(body.status, 408, "a body that does not arrive in BERTH_REQUEST_TIMEOUT_MS is cut off");
  t.is(body.body?.code, "request_timeout");
  t.is((await api.fetchJson("GET", `/workspaces/${api.workspaceId}`)).status, 200, "served after the cuts too");
  t.true(api.logs.some((l) => l.msg === "client cut off: request not received in time"));
});

test("a slow client busy when it is cut off still reads its 408; a request it completes afterwards is never served", async (t) => {
  t.timeout(60_000);
  const api = await startApi({ env: { BERTH_HEADERS_TIMEOUT_MS: "1000", BERTH_REQUEST_TIMEOUT_MS: "2000" } });
  t.teardown(() => api.stop());
  const keys = `/workspaces/${api.workspaceId}/api-keys`;
  const key = await api.fetchJson("POST", keys, { body: { name: "kept" } });
  t.is(key.status, 201, key.text);

  // Busy: it drips header lines and reads nothing from before the cut (1 s) until well after it.
  // Closed at once, the connection is reset with the drips unread, and the reset drops the unread
  // answer (every time, with the close before the lingering one).
  const busy = Array.from({ length: 5 }, () => rawConnection(api));
  const drips: NodeJS.Timeout[] = [];
  t.teardown(() => {
    for (const d of drips) clearInterval(d);
  });
  for (const c of busy) {
    c.socket.write(`GET /api/v1/workspaces/${api.workspaceId} HTTP/1.1\r\nHost: x\r\n`);
    drips.push(
      setInterval(() => {
        if (c.socket.writable) c.socket.write("X-Drip: a\r\n");
      }, 20),
    );
    setTimeout(() => c.socket.pause(), 700);
    setTimeout(() => c.socket.resume(), 1400);
  }
  for (const c of busy) t.is(parseAnswer(await c.received).status, 408);

  // Cut off, then the request completes while the connection lingers: it must not be served (a
  // DELETE the client was told was not received).
  const late = connect(Number(new URL(api.url).port), new URL(api.url).hostname);
  late.on("error", () => undefined);
  let text = "";
  const answered = new Promise<void>((resolve) =>
    late.on("data", (d: Buffer) => {
      text += d.toString("utf8");
      if (text.includes("\r\n\r\n")) resolve();
    }),
  );
  late.write(`DELETE /api/v1${keys}/${key.body.id as string} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${api.apiKey}\r\n`);
  const drip = setInterval(() => {
    if (late.writable) late.write("X-Drip: a\r\n");
  }, 100);
  drips.push(drip);
  await answered;
  clearInterval(drip);
  t.is(parseAnswer(text).status, 408);
  late.write("\r\n"); // the headers end: a whole DELETE
  await new Promise((resolve) => late.on("close", resolve));
  t.notRegex(text.slice(text.indexOf("\r\n\r\n")), /HTTP\/1\.1 \d{3}/, "one answer only: the 408");
  // the key still works: the DELETE was not served (served, it would be revoked: 401)
  t.is((await api.fetchJson("GET", keys, { key: key.body.key as string })).status, 200);
});

test("a body over the limit is refused with 413: at once when announced, and while it streams", async (t) => {
  t.timeout(60_000);
  const api = await startApi({ env: { BERTH_BODY_LIMIT_BYTES: "2048" } });
  t.teardown(() => api.stop());
  const path = `/api/v1/workspaces/${api.workspaceId}/apps`;

  // Announced: only the headers are sent; the answer comes without the body, before the key is checked.
  const announced = rawConnection(api);
  announced.socket.write(`POST ${path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100000000\r\n\r\n`);
  const a = parseAnswer(await announced.received);
  t.is(a.status, 413);
  t.regex(a.headers, /content-type: application\/problem\+json/i);
  t.regex(a.headers, /connection: close/i);
  t.is(a.body?.code, "payload_too_large");
  t.deepEqual(a.body?.details, { limitBytes: 2048 });

  // Streamed (chunked, no length): refused once the limit is passed, without waiting for the end.
  const streamed = rawConnection(api);
  streamed.socket.write(
    `POST ${path} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${api.apiKey}\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n`,
  );
  const chunk = `{"name":"${"x".repeat(1000)}`;
  for (let i = 0; i < 3; i++) streamed.socket.write(`${Buffer.byteLength(chunk).toString(16)}\r\n${chunk}\r\n`);
  const s = parseAnswer(await streamed.received);
  t.is(s.status, 413);
  t.is(s.body?.code, "payload_too_large");

  // The same through fetch, and a body within the limit still works.
  const big = await api.fetchJson("POST", path.replace("/api/v1", ""), {
    rawBody: JSON.stringify({ name: "x".repeat(5000) }),
    headers: { "Content-Type": "application/json" },
  });
  t.is(big.status, 413);
  const ok = await api.fetchJson("POST", path.replace("/api/v1", ""), {
    body: { name: "small", slug: "small", type: "web", image: "nginx:1.27" },
  });
  t.is(ok.status, 201);
});
