// KubeRest's answer to "retry after" (429, or a 5xx, with Retry-After), against a loopback server
// that answers the way kube-apiserver does while a new CRD's storage initializes.
import test from "ava";
import { createServer, type Server } from "node:http";
import { once } from "node:events";
import type { AddressInfo } from "node:net";
import { KubeApiError, KubeRest, RETRY_AFTER_ATTEMPTS, quotaConflictMs, retryAfterMs } from "../../../kube/transport.ts";

const initializing = JSON.stringify({
  kind: "Status",
  apiVersion: "v1",
  status: "Failure",
  message: "storage is (re)initializing",
  reason: "TooManyRequests",
  details: { retryAfterSeconds: 0 },
  code: 429,
});

// What kube-apiserver answers when the quota admission plugin loses the race to record usage.
const quotaRace = {
  kind: "Status",
  apiVersion: "v1",
  status: "Failure",
  reason: "Conflict",
  code: 409,
  details: { name: "berth-workspace", kind: "resourcequotas" },
  message:
    'Operation cannot be fulfilled on resourcequotas "berth-workspace": the object has been modified; please apply your changes to the latest version and try again',
};
// A plain 409 on the object written (here: it exists already).
const exists = {
  kind: "Status",
  apiVersion: "v1",
  status: "Failure",
  reason: "AlreadyExists",
  code: 409,
  details: { name: "a", group: "berth.dev", kind: "apps" },
  message: 'apps.berth.dev "a" already exists',
};

async function apiServer(
  answers: Array<{ status: number; retryAfter?: string; body?: unknown }>,
): Promise<{ rest: KubeRest; server: Server; seen: string[] }> {
  const seen: string[] = [];
  const server = createServer((req, res) => {
    let body = "";
    req
      .setEncoding("utf8")
      .on("data", (c: string) => {
        body += c;
      })
      .on("end", () => {
        seen.push(`${req.method} ${req.url} ${body}`);
        const a = answers.shift() ?? { status: 200 };
        res.writeHead(a.status, {
          "Content-Type": "application/json",
          ...(a.retryAfter !== undefined ? { "Retry-After": a.retryAfter } : {}),
        });
        res.end(
          a.body !== undefined ? JSON.stringify(a.body) : a.status === 200 ? JSON.stringify({ kind: "List", items: [] }) : initializing,
        );
      });
  });
  server.listen(0, "127.0.0.1");
  await once(server, "listening");
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const rest = new KubeRest({ getCurrentCluster: () => ({ server: url }), applyToHTTPSOptions: () => Promise.resolve() });
  return { rest, server, seen };
}

test("a 429 or 5xx with Retry-After is sent again after that wait (the same body), then answered", async (t) => {
  const { rest, server, seen } = await apiServer([
    { status: 429, retryAfter: "0" },
    { status: 503, retryAfter: "0" },
  ]);
  try {
    t.deepEqual(await rest.request("POST", "/apis/berth.dev/v1alpha1/domains", { body: { a: 1 } }), { kind: "List", items: [] });
    t.deepEqual(seen, Array(3).fill(`POST /apis/berth.dev/v1alpha1/domains {"a":1}`));
  } finally {
    server.close();
  }
});

test("without Retry-After, or after the last attempt, the answer is the error", async (t) => {
  const plain = await apiServer([{ status: 429 }]);
  try {
    const err = await t.throwsAsync(plain.rest.request("GET", "/x"), { instanceOf: KubeApiError });
    t.is(err.code, 429);
    t.is(plain.seen.length, 1);
  } finally {
    plain.server.close();
  }
  const always = await apiServer(Array.from({ length: 20 }, () => ({ status: 429, retryAfter: "0" })));
  try {
    const err = await t.throwsAsync(always.rest.request("GET", "/x"), { instanceOf: KubeApiError });
    t.regex(err.message, /429 storage is \(re\)initializing/);
    t.is(always.seen.length, RETRY_AFTER_ATTEMPTS);
  } finally {
    always.server.close();
  }
});

test("retryAfterMs: only 429 and 5xx, only whole seconds, capped", (t) => {
  t.is(retryAfterMs(429, "1"), 1000);
  t.is(retryAfterMs(500, " 2 "), 2000);
  t.is(retryAfterMs(429, "3600"), 10_000);
  t.is(retryAfterMs(409, "1"), undefined);
  t.is(retryAfterMs(429, undefined), undefined);
  t.is(retryAfterMs(429, "Wed, 21 Oct 2026 07:28:00 GMT"), undefined);
  t.is(retryAfterMs(429, "-1"), undefined);
});

test("a write that lost a race on the namespace's ResourceQuota is sent again; any other 409 is the caller's", async (t) => {
  const raced = await apiServer([
    { status: 409, body: quotaRace },
    { status: 409, body: quotaRace },
  ]);
  try {
    t.deepEqual(await raced.rest.request("POST", "/apis/berth.dev/v1alpha1/namespaces/w/apps", { body: { a: 1 } }), {
      kind: "List",
      items: [],
    });
    t.is(raced.seen.length, 3);
  } finally {
    raced.server.close();
  }
  const taken = await apiServer([{ status: 409, body: exists }]);
  try {
    const err = await t.throwsAsync(taken.rest.request("POST", "/apis/berth.dev/v1alpha1/namespaces/w/apps", { body: { a: 1 } }), {
      instanceOf: KubeApiError,
    });
    t.is(err.code, 409);
    t.is(taken.seen.length, 1);
  } finally {
    taken.server.close();
  }
  // a stale write to the quota itself is not sent again: its version will not get any fresher
  const own = await apiServer([{ status: 409, body: quotaRace }]);
  try {
    await t.throwsAsync(own.rest.request("PUT", "/api/v1/namespaces/w/resourcequotas/berth-workspace", { body: {} }), {
      instanceOf: KubeApiError,
    });
    t.is(own.seen.length, 1);
  } finally {
    own.server.close();
  }
  const endless = await apiServer(Array.from({ length: 20 }, () => ({ status: 409, body: quotaRace })));
  try {
    const err = await t.throwsAsync(endless.rest.request("POST", "/api/v1/namespaces/w/pods", { body: {} }), { instanceOf: KubeApiError });
    t.regex(err.message, /resourcequotas "berth-workspace"/);
    t.is(endless.seen.length, RETRY_AFTER_ATTEMPTS);
  } finally {
    endless.server.close();
  }
});

test("quotaConflictMs: only a 409 naming the resourcequotas, backing off", (t) => {
  const w1 = quotaConflictMs("/api/v1/namespaces/w/pods", 409, quotaRace, 1);
  const w3 = quotaConflictMs("/api/v1/namespaces/w/pods", 409, quotaRace, 3);
  t.true(w1 !== undefined && w1 >= 25 && w1 < 50);
  t.true(w3 !== undefined && w3 >= 100 && w3 < 200);
  t.is(quotaConflictMs("/api/v1/namespaces/w/pods", 409, exists, 1), undefined);
  t.is(quotaConflictMs("/api/v1/namespaces/w/pods", 422, quotaRace, 1), undefined);
  t.is(quotaConflictMs("/api/v1/namespaces/w/resourcequotas", 409, quotaRace, 1), undefined);
  t.is(quotaConflictMs("/api/v1/namespaces/w/pods", 409, "text", 1), undefined);
});

test("lines: a stream read line by line, however the chunks fall; an overlong line skipped whole; the last unterminated line kept", async (t) => {
  const long = "x".repeat(100);
  const server = createServer((_req, res) => {
    res.writeHead(200, { "Content-Type": "text/plain" });
    const chunks = ["fir", "st\nsec", `ond\n${long.slice(0, 45)}`, `${long.slice(45)}\nthird\n\n`, "last"];
    const next = () => {
      const c = chunks.shift();
      if (c === undefined) {
        res.end();
        return;
      }
      res.write(c);
      setTimeout(next, 5);
    };
    next();
  });
  server.listen(0, "127.0.0.1");
  await once(server, "listening");
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const rest = new KubeRest({ getCurrentCluster: () => ({ server: url }), applyToHTTPSOptions: () => Promise.resolve() });
  try {
    const got: string[] = [];
    await rest.lines("/log", { follow: true }, (l) => got.push(l), new AbortController().signal, { maxLine: 40 });
    t.deepEqual(got, ["first", "second", "third", "", "last"]);
  } finally {
    server.close();
  }
});

test("lines: a non-200 answer is a KubeApiError; an abort resolves quietly", async (t) => {
  const { rest, server } = await apiServer([{ status: 400 }]);
  try {
    const err = await t.throwsAsync(
      rest.lines("/log", {}, () => {}, new AbortController().signal),
      { instanceOf: KubeApiError },
    );
    t.is(err?.code, 400);
    const aborted = new AbortController();
    aborted.abort();
    await t.notThrowsAsync(rest.lines("/log", {}, () => {}, aborted.signal));
  } finally {
    server.close();
  }
});
