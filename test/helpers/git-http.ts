// A minimal Git server over git's smart HTTP for the builder's tests: `git http-backend` (Debian's
// git) behind a node:http server on 127.0.0.1, as CGI. Repositories are bare directories under a
// temporary root; `repo()` makes one from a directory of files (one commit) and returns its sha.
// With `auth`, every request needs HTTP basic credentials (what GIT_USERNAME/GIT_PASSWORD give).
// Fetching any reachable sha is allowed (uploadpack.allowReachableSHA1InWant), as GitHub does.
import { execFileSync, spawn } from "node:child_process";
import { cpSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";

export interface GitServer {
  url: string;
  root: string;
  /** a bare repository `<name>.git` with one commit of the files under `dir` (plus `extra`); resolves the commit's sha */
  repo(name: string, dir: string | undefined, extra?: Record<string, string>, message?: string): string;
  /** the requests seen (method, path, the Authorization header's presence) */
  requests: { method: string; path: string; authorized: boolean }[];
  close(): Promise<void>;
}

const GIT_ENV = { GIT_CONFIG_NOSYSTEM: "1", GIT_CONFIG_GLOBAL: "/dev/null", GIT_AUTHOR_NAME: "Berth Test", GIT_AUTHOR_EMAIL: "test@berth.local", GIT_COMMITTER_NAME: "Berth Test", GIT_COMMITTER_EMAIL: "test@berth.local" };

export async function startGitServer(opts: { auth?: { username: string; password: string } } = {}): Promise<GitServer> {
  const root = mkdtempSync(join(tmpdir(), "berth-git-"));
  const requests: GitServer["requests"] = [];
  const expected = opts.auth ? `Basic ${Buffer.from(`${opts.auth.username}:${opts.auth.password}`).toString("base64")}` : undefined;
  const server: Server = createServer((req, res) => {
    const url = new URL(req.url ?? "/", "http://x");
    requests.push({ method: req.method ?? "", path: url.pathname, authorized: req.headers.authorization !== undefined });
    if (expected && req.headers.authorization !== expected) {
      res.writeHead(401, { "www-authenticate": 'Basic realm="berth-test"' }).end();
      return;
    }
    const cgi = spawn("git", ["http-backend"], {
      env: {
        ...GIT_ENV, PATH: process.env.PATH, GIT_PROJECT_ROOT: root, GIT_HTTP_EXPORT_ALL: "1",
        GIT_CONFIG_COUNT: "1", GIT_CONFIG_KEY_0: "uploadpack.allowReachableSHA1InWant", GIT_CONFIG_VALUE_0: "true",
        REQUEST_METHOD: req.method ?? "GET", PATH_INFO: url.pathname, QUERY_STRING: url.search.slice(1),
        CONTENT_TYPE: req.headers["content-type"] ?? "", REMOTE_ADDR: "127.0.0.1", REMOTE_USER: opts.auth?.username ?? "",
        ...(req.headers["content-encoding"] ? { HTTP_CONTENT_ENCODING: req.headers["content-encoding"] } : {}),
        ...(req.headers["git-protocol"] ? { GIT_PROTOCOL: String(req.headers["git-protocol"]) } : {}),
      },
      stdio: ["pipe", "pipe", "ignore"],
    });
    req.pipe(cgi.stdin);
    let head = Buffer.alloc(0);
    let headersDone = false;
    cgi.stdout.on("data", (chunk: Buffer) => {
      if (headersDone) { res.write(chunk); return; }
      head = Buffer.concat([head, chunk]);
      const end = head.indexOf("\r\n\r\n");
      if (end < 0) return;
      headersDone = true;
      let status = 200;
      for (const line of head.subarray(0, end).toString().split("\r\n")) {
        const i = line.indexOf(":");
        const [k, v] = [line.slice(0, i).trim(), line.slice(i + 1).trim()];
        if (k.toLowerCase() === "status") status = Number(v.split(" ")[0]);
        else res.setHeader(k, v);
      }
      res.writeHead(status);
      res.write(head.subarray(end + 4));
    });
    cgi.on("close", () => { if (!headersDone) res.writeHead(500); res.end(); });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return {
    url, root, requests,
    repo(name, dir, extra = {}, message = `${name}: test commit`) {
      const work = mkdtempSync(join(tmpdir(), "berth-git-work-"));
      try {
        if (dir) cpSync(dir, work, { recursive: true });
        for (const [path, text] of Object.entries(extra)) {
          mkdirSync(dirname(join(work, path)), { recursive: true });
          writeFileSync(join(work, path), text);
        }
        const git = (args: string[], cwd = work) => execFileSync("git", args, { cwd, env: { ...process.env, ...GIT_ENV }, encoding: "utf8" }).trim();
        git(["init", "--quiet", "-b", "main"]);
        git(["add", "-A"]);
        git(["commit", "--quiet", "-m", message]);
        const bare = join(root, `${name}.git`);
        git(["clone", "--quiet", "--bare", work, bare], root);
        return git(["rev-parse", "HEAD"]);
      } finally {
        rmSync(work, { recursive: true, force: true });
      }
    },
    async close() {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
      rmSync(root, { recursive: true, force: true });
    },
  };
}
