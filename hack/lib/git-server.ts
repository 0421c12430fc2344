// A Git server for the local cluster (docs/builds.md): git's smart HTTP protocol, served by
// Debian's `git http-backend` (a CGI program) behind this small HTTP server. hack/cluster starts it
// with the real node; the host pushes to http://127.0.0.1:<port>/<name>.git and pods (build Jobs)
// fetch from the node's side of the bridge, http://<node ip>:<port>/<name>.git.
//
//   node hack/lib/git-server.ts --listen 127.0.0.1:PORT --root DIR [--credentials USER:PASSWORD]
//
// - `git push URL/<name>.git` creates the bare repository <root>/<name>.git on first use (names
//   are [a-z0-9._-], at most 100 characters, optionally below one directory: org/name.git).
// - Repositories accept pushes (http.receivepack) and fetches of a reachable commit by its sha
//   (uploadpack.allowReachableSHA1InWant), as GitHub does, so builds fetch exactly one commit.
// - With --credentials (or BERTH_GIT_CREDENTIALS), repositories whose name starts with
//   "private-" need HTTP Basic authentication with them (compared in constant time): what a
//   private repository with installation credentials looks like locally.
import { spawn, execFileSync } from "node:child_process";
import { createHash, timingSafeEqual } from "node:crypto";
import { existsSync, mkdirSync } from "node:fs";
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import { join } from "node:path";
import { parseArgs } from "node:util";

export interface GitServerOptions {
  /** directory of the bare repositories */
  root: string;
  /** USER:PASSWORD required for repositories named private-* (every repository with `authAll`) */
  credentials?: string;
  authAll?: boolean;
  /** Told of every request (tests: what a client sent). */
  onRequest?: (r: { method: string; path: string; authorized: boolean }) => void;
  log?: (line: string) => void;
}

/** <name>.git and what follows it in a request path, or undefined when the path names no repository. */
export function repoOfPath(pathname: string): { repo: string; rest: string } | undefined {
  const m = /^\/((?:[a-z0-9][a-z0-9._-]{0,99}\/)?[a-z0-9][a-z0-9._-]{0,99}\.git)(\/.*)?$/.exec(pathname);
  if (!m || m[1]!.includes("..")) return undefined;
  return { repo: m[1]!, rest: m[2] ?? "/" };
}

const digest = (s: string) => createHash("sha256").update(s).digest();

/** Whether the Authorization header carries exactly `credentials` (USER:PASSWORD) as Basic auth. */
export function basicAuthMatches(header: string | undefined, credentials: string): boolean {
  const m = /^Basic\s+([A-Za-z0-9+/=]+)$/i.exec(header ?? "");
  const given = m ? Buffer.from(m[1]!, "base64").toString() : "";
  return timingSafeEqual(digest(given), digest(credentials)) && m !== null;
}

function isPush(rest: string, query: URLSearchParams): boolean {
  return rest === "/git-receive-pack" || (rest === "/info/refs" && query.get("service") === "git-receive-pack");
}

function createRepo(dir: string): void {
  mkdirSync(dir, { recursive: true });
  execFileSync("git", ["init", "--quiet", "--bare", "--initial-branch=main", dir]);
  for (const [k, v] of [
    ["http.receivepack", "true"],
    ["uploadpack.allowReachableSHA1InWant", "true"],
    ["uploadpack.allowFilter", "true"],
  ]) {
    execFileSync("git", ["--git-dir", dir, "config", k!, v!]);
  }
}

/** Runs `git http-backend` for one request (RFC 3875 CGI) and relays its answer. */
function cgi(req: IncomingMessage, res: ServerResponse, root: string, url: URL, user: string | undefined): void {
  const env: Record<string, string> = {
    PATH: process.env.PATH ?? "/usr/bin:/bin",
    // no system or user configuration; fetching a reachable sha works in every repository, pushed or copied in
    GIT_CONFIG_NOSYSTEM: "1",
    GIT_CONFIG_GLOBAL: "/dev/null",
    GIT_CONFIG_COUNT: "1",
    GIT_CONFIG_KEY_0: "uploadpack.allowReachableSHA1InWant",
    GIT_CONFIG_VALUE_0: "true",
    GIT_PROJECT_ROOT: root,
    GIT_HTTP_EXPORT_ALL: "1",
    GATEWAY_INTERFACE: "CGI/1.1",
    REQUEST_METHOD: req.method ?? "GET",
    PATH_INFO: decodeURIComponent(url.pathname),
    QUERY_STRING: url.search.replace(/^\?/, ""),
    CONTENT_TYPE: req.headers["content-type"] ?? "",
    REMOTE_ADDR: req.socket.remoteAddress ?? "",
    ...(req.headers["content-length"] ? { CONTENT_LENGTH: req.headers["content-length"] } : {}),
    ...(req.headers["content-encoding"] ? { HTTP_CONTENT_ENCODING: req.headers["content-encoding"] } : {}),
    ...(req.headers["git-protocol"] ? { GIT_PROTOCOL: String(req.headers["git-protocol"]) } : {}),
    ...(user ? { REMOTE_USER: user } : {}),
  };
  const child = spawn("git", ["http-backend"], { env, stdio: ["pipe", "pipe", "pipe"] });
  req.pipe(child.stdin);
  child.stdin.on("error", () => undefined);
  let head = Buffer.alloc(0);
  let headersSent = false;
  let stderr = "";
  child.stderr.on("data", (d: Buffer) => {
    stderr += d.toString();
  });
  child.stdout.on("data", (chunk: Buffer) => {
    if (headersSent) {
      res.write(chunk);
      return;
    }
    head = Buffer.concat([head, chunk]);
    const end = head.indexOf("\r\n\r\n") >= 0 ? head.indexOf("\r\n\r\n") : head.indexOf("\n\n");
    if (end < 0) return;
    const sep = head[end] === 13 ? 4 : 2;
    let status = 200;
    for (const line of head.subarray(0, end).toString().split(/\r?\n/)) {
      const i = line.indexOf(":");
      if (i < 0) continue;
      const name = line.slice(0, i).trim();
      const value = line.slice(i + 1).trim();
      if (name.toLowerCase() === "status") status = Number.parseInt(value, 10) || 500;
      else res.setHeader(name, value);
    }
    res.statusCode = status;
    headersSent = true;
    res.write(head.subarray(end + sep));
  });
  child.on("close", (code) => {
    if (!headersSent) {
      res.statusCode = 500;
      res.end(`git http-backend failed (exit ${code}): ${stderr.slice(0, 500)}`);
      return;
    }
    res.end();
  });
}

export function gitServer(o: GitServerOptions): Server {
  const log = o.log ?? (() => undefined);
  return createServer((req, res) => {
    const url = new URL(req.url ?? "/", "http://git.local");
    o.onRequest?.({ method: req.method ?? "", path: url.pathname, authorized: req.headers.authorization !== undefined });
    const target = repoOfPath(url.pathname);
    if (!target) {
      res.writeHead(404, { "Content-Type": "text/plain" }).end("not a repository path: /<name>.git/...\n");
      return;
    }
    let user: string | undefined;
    if (o.authAll || target.repo.replace(/^.*\//, "").startsWith("private-")) {
      if (!o.credentials || !basicAuthMatches(req.headers.authorization, o.credentials)) {
        res
          .writeHead(401, { "WWW-Authenticate": 'Basic realm="berth-git"', "Content-Type": "text/plain" })
          .end("authentication required\n");
        return;
      }
      user = o.credentials.slice(0, o.credentials.indexOf(":"));
    }
    const dir = join(o.root, target.repo);
    if (!existsSync(dir)) {
      if (!isPush(target.rest, url.searchParams)) {
        res.writeHead(404, { "Content-Type": "text/plain" }).end(`no repository ${target.repo}\n`);
        return;
      }
      createRepo(dir);
      log(`created ${target.repo}`);
    }
    cgi(req, res, o.root, url, user);
  });
}

if (import.meta.main) {
  const { values } = parseArgs({ options: { listen: { type: "string" }, root: { type: "string" }, credentials: { type: "string" } } });
  const listen = values.listen ?? "";
  const m = /^(127\.0\.0\.1|[0-9.]+):(\d+)$/.exec(listen);
  if (!m || !values.root) {
    process.stderr.write("usage: node hack/lib/git-server.ts --listen 127.0.0.1:PORT --root DIR [--credentials USER:PASSWORD]\n");
    process.exit(2);
  }
  mkdirSync(values.root, { recursive: true });
  const credentials = values.credentials ?? process.env.BERTH_GIT_CREDENTIALS;
  const server = gitServer({
    root: values.root,
    ...(credentials ? { credentials } : {}),
    log: (l) => process.stdout.write(`${new Date().toISOString()} ${l}\n`),
  });
  server.listen(Number(m[2]), m[1], () => process.stdout.write(`git server on http://${listen}, repositories in ${values.root}\n`));
  const stop = () => server.close(() => process.exit(0));
  process.on("SIGTERM", stop);
  process.on("SIGINT", stop);
}
