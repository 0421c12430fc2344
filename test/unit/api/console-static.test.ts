// The console's files on a real HTTP server on loopback (api/console/static.ts): the strict CSP on
// every answer, page paths answered with index.html, hashed assets cached for good, gzip, ETags,
// and no path from a request reaching the file system.
import test from "ava";
import Koa from "koa";
import { mkdtempSync, mkdirSync, rmSync, writeFileSync } from "node:fs";
import { once } from "node:events";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { AddressInfo } from "node:net";
import type { Server } from "node:http";
import { Writable } from "node:stream";
import { gunzipSync } from "node:zlib";
import { CONSOLE_CSP, consoleMiddleware, loadConsole, type ConsoleFiles } from "../../../api/console/static.ts";
import { requestContext } from "../../../api/http/context.ts";
import { problemMiddleware } from "../../../api/http/problem.ts";
import { createLogger } from "../../../kube/logger.ts";

const logger = createLogger({ level: "error", destination: new Writable({ write: (_c, _e, cb) => cb() }) });
const dir = mkdtempSync(join(tmpdir(), "console-static-"));
const INDEX = `<!doctype html><html lang="en"><head><script type="module" src="/console/assets/main-ABCD1234.js"></script></head><body></body></html>`;
const SCRIPT = `console.log(${JSON.stringify("x".repeat(4000))});`;

async function serve(files: ConsoleFiles | undefined): Promise<{ url: string; server: Server }> {
  const app = new Koa();
  app.use(requestContext(logger));
  app.use(problemMiddleware());
  app.use(consoleMiddleware(files));
  app.use((ctx) => {
    ctx.status = 200;
    ctx.body = "next";
  });
  const server = app.listen(0, "127.0.0.1");
  await once(server, "listening");
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, server };
}

let built: { url: string; server: Server };
let bare: { url: string; server: Server };
test.before(async () => {
  mkdirSync(join(dir, "assets"));
  writeFileSync(join(dir, "index.html"), INDEX);
  writeFileSync(join(dir, "assets", "main-ABCD1234.js"), SCRIPT);
  writeFileSync(join(dir, "assets", "notes.txt"), "plain");
  writeFileSync(join(dir, "..", "console-static-secret.txt"), "outside");
  built = await serve(loadConsole(dir));
  bare = await serve(undefined);
});
test.after.always(() => {
  built?.server.close();
  bare?.server.close();
  rmSync(dir, { recursive: true, force: true });
  rmSync(join(dir, "..", "console-static-secret.txt"), { force: true });
});

test("page paths answer index.html with a strict CSP, so any page's URL can be reloaded", async (t) => {
  for (const path of ["/console/", "/console/services", "/console/services/abc/governance", "/console/sign-in"]) {
    const r = await fetch(built.url + path);
    t.is(r.status, 200, path);
    t.is(await r.text(), INDEX);
    t.is(r.headers.get("content-type"), "text/html; charset=utf-8");
    t.is(r.headers.get("content-security-policy"), CONSOLE_CSP);
    t.is(r.headers.get("cache-control"), "no-cache");
    t.is(r.headers.get("x-frame-options"), "DENY");
  }
  t.regex(CONSOLE_CSP, /script-src 'self'(;|$)/);
  t.notRegex(CONSOLE_CSP, /unsafe-inline|unsafe-eval/);
  const redirect = await fetch(`${built.url}/console`, { redirect: "manual" });
  t.is(redirect.status, 308);
  t.is(redirect.headers.get("location"), "/console/");
});

test("hashed assets are cached for good, compressed on request, and revalidated by ETag", async (t) => {
  const plain = await fetch(`${built.url}/console/assets/main-ABCD1234.js`, { headers: { "Accept-Encoding": "identity" } });
  t.is(plain.status, 200);
  t.is(await plain.text(), SCRIPT);
  t.is(plain.headers.get("cache-control"), "public, max-age=31536000, immutable");
  t.is(plain.headers.get("content-type"), "text/javascript; charset=utf-8");
  const etag = plain.headers.get("etag")!;
  const again = await fetch(`${built.url}/console/assets/main-ABCD1234.js`, { headers: { "If-None-Match": etag } });
  t.is(again.status, 304);
  // fetch would decompress: ask with node's raw view of the bytes instead.
  const { request } = await import("node:http");
  const gz = await new Promise<{ encoding: string | undefined; body: Buffer }>((resolve, reject) => {
    request(`${built.url}/console/assets/main-ABCD1234.js`, { headers: { "Accept-Encoding": "gzip" } }, (res) => {
      const chunks: Buffer[] = [];
      res.on("data", (c: Buffer) => chunks.push(c));
      res.on("end", () => resolve({ encoding: res.headers["content-encoding"], body: Buffer.concat(chunks) }));
    })
      .on("error", reject)
      .end();
  });
  t.is(gz.encoding, "gzip");
  t.true(gz.body.length < SCRIPT.length / 10);
  t.is(gunzipSync(gz.body).toString(), SCRIPT);
  const unhashed = await fetch(`${built.url}/console/assets/notes.txt`);
  t.is(unhashed.headers.get("cache-control"), "no-cache");
});

test("only the console's own files are served: no path reaches the file system", async (t) => {
  for (const path of [
    "/console/assets/missing.js",
    "/console/../console-static-secret.txt",
    "/console/%2e%2e/console-static-secret.txt",
    "/console/assets/..%2f..%2fconsole-static-secret.txt",
    "/console/index.html/x.js",
  ]) {
    const r = await fetch(built.url + path);
    const text = await r.text();
    t.false(text.includes("outside"), path);
    // A 404, the index of a page path, or (for a path the client normalised out of /console) not the console's answer at all.
    t.true(r.status === 404 || text === INDEX || text === "next", `${path}: ${r.status}`);
  }
  const missing = await fetch(`${built.url}/console/assets/missing.js`);
  t.is(missing.status, 404);
  t.regex(missing.headers.get("content-type") ?? "", /^application\/problem\+json/);
});

test("other paths and methods pass through; without built files the console says how to build them", async (t) => {
  t.is(await (await fetch(`${built.url}/consoles`)).text(), "next");
  t.is(await (await fetch(`${built.url}/console/`, { method: "POST" })).text(), "next");
  const r = await fetch(`${bare.url}/console/services`);
  t.is(r.status, 404);
  const body = (await r.json()) as { code: string; detail: string };
  t.is(body.code, "console_not_built");
  t.regex(body.detail, /hack\/console\.ts/);
  t.throws(() => loadConsole(join(dir, "assets")), { message: /no index\.html/ });
});
