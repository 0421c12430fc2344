// Serves the console, a static single-page app built by hack/console.ts, under /console on the
// API's own origin (no CORS). Its files are read once at start into memory, with a gzip copy, and
// only those files are served (no path from a request reaches the file system). A page path (one
// whose last segment has no dot) answers index.html, so every page's URL can be shared and
// reloaded. Every answer carries a strict Content-Security-Policy: scripts and styles only from
// the console's own files, no inline script, no framing.
import { createHash } from "node:crypto";
import { readdirSync, readFileSync, statSync } from "node:fs";
import { extname, join, relative, sep } from "node:path";
import { gzipSync } from "node:zlib";
import type Koa from "koa";
import { NotFoundError } from "../errors.ts";

export const CONSOLE_PATH = "/console";

export const CONSOLE_CSP = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self' data:",
  "font-src 'self'",
  "connect-src 'self'",
  "manifest-src 'self'",
  "base-uri 'none'",
  "form-action 'self'",
  "frame-ancestors 'none'",
].join("; ");

const TYPES: Record<string, string> = {
  ".html": "text/html; charset=utf-8",
  ".js": "text/javascript; charset=utf-8",
  ".css": "text/css; charset=utf-8",
  ".svg": "image/svg+xml",
  ".png": "image/png",
  ".ico": "image/x-icon",
  ".json": "application/json",
  ".txt": "text/plain; charset=utf-8",
  ".map": "application/json",
};

interface Asset {
  body: Buffer;
  gzip: Buffer | undefined;
  type: string;
  etag: string;
  /** Content-hashed names (assets/…-<hash>.js) never change: cached for a year. */
  immutable: boolean;
}

export interface ConsoleFiles {
  /** Path under /console/ (e.g. "index.html", "assets/main-AB12CD34.js") to the file. */
  files: Map<string, Asset>;
}

/** The console's files in `dir` (what hack/console.ts wrote); throws when it holds no index.html. */
export function loadConsole(dir: string): ConsoleFiles {
  const files = new Map<string, Asset>();
  const walk = (at: string): void => {
    for (const name of readdirSync(at)) {
      const path = join(at, name);
      if (statSync(path).isDirectory()) {
        walk(path);
        continue;
      }
      const rel = relative(dir, path).split(sep).join("/");
      const body = readFileSync(path);
      const type = TYPES[extname(name)] ?? "application/octet-stream";
      const compressible = /^(text\/|application\/json|image\/svg)/.test(type) && body.length > 512;
      files.set(rel, {
        body,
        gzip: compressible ? gzipSync(body, { level: 9 }) : undefined,
        type,
        etag: `"${createHash("sha256").update(body).digest("base64url").slice(0, 22)}"`,
        immutable: rel.startsWith("assets/") && /-[A-Z0-9]{8,}\.[a-z]+$/.test(name),
      });
    }
  };
  walk(dir);
  if (!files.has("index.html")) throw new Error(`${dir} holds no index.html: build the console with node hack/console.ts`);
  return { files };
}

/** The middleware answering GET/HEAD under /console; without files, a 404 that says how to build them. */
export function consoleMiddleware(console: ConsoleFiles | undefined): Koa.Middleware {
  return (ctx, next) => {
    if (ctx.path !== CONSOLE_PATH && !ctx.path.startsWith(`${CONSOLE_PATH}/`)) return next();
    if (ctx.method !== "GET" && ctx.method !== "HEAD") return next();
    ctx.set("Content-Security-Policy", CONSOLE_CSP);
    ctx.set("X-Frame-Options", "DENY");
    ctx.set("Referrer-Policy", "no-referrer");
    ctx.set("Cross-Origin-Opener-Policy", "same-origin");
    if (!console) {
      throw new NotFoundError(
        "console_not_built",
        "The console is not part of this server: build it with `node hack/console.ts` and set BERTH_CONSOLE_DIR.",
      );
    }
    if (ctx.path === CONSOLE_PATH) {
      ctx.redirect(`${CONSOLE_PATH}/`);
      ctx.status = 308;
      return undefined;
    }
    const rel = ctx.path.slice(CONSOLE_PATH.length + 1);
    const last = rel.split("/").pop() ?? "";
    const asset = last.includes(".") ? console.files.get(rel) : console.files.get("index.html");
    if (!asset) throw new NotFoundError("route_not_found", `No console file ${ctx.path}.`);
    ctx.set("Cache-Control", asset.immutable ? "public, max-age=31536000, immutable" : "no-cache");
    ctx.set("ETag", asset.etag);
    ctx.set("Vary", "Accept-Encoding");
    if (ctx.get("If-None-Match") === asset.etag) {
      ctx.status = 304;
      return undefined;
    }
    ctx.status = 200;
    ctx.type = asset.type;
    if (asset.gzip && /\bgzip\b/.test(ctx.get("Accept-Encoding"))) {
      ctx.set("Content-Encoding", "gzip");
      ctx.body = asset.gzip;
    } else {
      ctx.body = asset.body;
    }
    return undefined;
  };
}
