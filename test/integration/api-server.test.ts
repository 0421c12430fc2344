// Liveness, readiness and graceful shutdown of the real server.
import test from "ava";
import { z } from "zod";
import { defineRoute } from "../../api/http/route.ts";
import { startApi } from "../helpers/api.ts";

test("/healthz is 200 while the process serves; /readyz follows the database and every check", async (t) => {
  let flaky = true;
  const api = await startApi({
    readiness: [
      { name: "flaky", check: () => Promise.resolve(flaky) },
      { name: "steady", check: () => Promise.resolve(true) },
    ],
  });
  t.teardown(() => api.stop());

  const health = await api.fetchJson("GET", "/healthz", { key: null });
  t.is(health.status, 200);
  t.deepEqual(health.body, { status: "ok" });

  const ready = await api.fetchJson("GET", "/readyz", { key: null });
  t.is(ready.status, 200);
  t.deepEqual(ready.body, {
    status: "ready",
    checks: { "app-cache": true, database: true, flaky: true, "share-cache": true, steady: true },
  });

  flaky = false;
  const notReady = await api.fetchJson("GET", "/readyz", { key: null });
  t.is(notReady.status, 503);
  t.regex(notReady.headers.get("content-type") ?? "", /^application\/problem\+json/);
  t.is(notReady.body.code, "not_ready");
  t.deepEqual(notReady.body.details, { checks: { "app-cache": true, database: true, flaky: false, "share-cache": true, steady: true } });
  t.is((await api.fetchJson("GET", "/healthz", { key: null })).status, 200, "liveness does not depend on readiness");

  flaky = true;
  t.is((await api.fetchJson("GET", "/readyz", { key: null })).status, 200, "ready again");
});

test("a readiness check that throws counts as not ready", async (t) => {
  const api = await startApi({ readiness: [{ name: "broken", check: () => Promise.reject(new Error("no route to host")) }] });
  t.teardown(() => api.stop());
  const r = await api.fetchJson("GET", "/readyz", { key: null });
  t.is(r.status, 503);
  t.false(r.body.details.checks.broken);
  t.false(r.text.includes("no route to host"));
});

test("readiness fails when the database is unreachable", async (t) => {
  const api = await startApi();
  t.teardown(() => api.stop());
  t.is((await api.fetchJson("GET", "/readyz", { key: null })).status, 200);
  await api.orm.close();
  const r = await api.fetchJson("GET", "/readyz", { key: null });
  t.is(r.status, 503);
  t.false(r.body.details.checks.database);
});

function gate() {
  let open!: () => void;
  const opened = new Promise<void>((r) => {
    open = r;
  });
  return { open, opened };
}

test("shutdown stops accepting, finishes the in-flight request, then resolves", async (t) => {
  const entered = gate();
  const release = gate();
  const api = await startApi({
    routes: [
      defineRoute({
        method: "get",
        path: "/slow",
        operationId: "slow",
        summary: "waits",
        tags: ["test"],
        auth: "none",
        responses: { 200: z.object({ done: z.literal(true) }).strict() },
        handler: async () => {
          entered.open();
          await release.opened;
          return { status: 200, body: { done: true } };
        },
      }),
    ],
  });
  t.teardown(() => api.stop());

  const inflight = fetch(`${api.url}/api/v1/slow`);
  await entered.opened;
  let closed = false;
  const closing = api.server.close().then(() => {
    closed = true;
  });
  await new Promise((r) => setTimeout(r, 100));
  t.false(closed, "close waits for the in-flight request");
  await t.throwsAsync(fetch(`${api.url}/healthz`), undefined, "new connections are refused");

  release.open();
  const res = await inflight;
  t.is(res.status, 200);
  t.deepEqual(await res.json(), { done: true });
  t.is(res.headers.get("connection"), "close");
  await closing;
  t.true(closed);
});

test("shutdown cuts requests that outlive the timeout", async (t) => {
  const entered = gate();
  const api = await startApi({
    env: { BERTH_SHUTDOWN_TIMEOUT_MS: "300" },
    routes: [
      defineRoute({
        method: "get",
        path: "/stuck",
        operationId: "stuck",
        summary: "never answers",
        tags: ["test"],
        auth: "none",
        responses: { 200: z.object({}).strict() },
        handler: async () => {
          entered.open();
          await new Promise(() => undefined);
          return { status: 200, body: {} };
        },
      }),
    ],
  });
  t.teardown(() => api.stop());
  const inflight = fetch(`${api.url}/api/v1/stuck`);
  await entered.opened;
  const started = Date.now();
  await api.server.close();
  const took = Date.now() - started;
  t.true(took >= 250 && took < 3000, `closed after ${took} ms`);
  await t.throwsAsync(inflight);
});
