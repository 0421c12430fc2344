// A Git server over git's smart HTTP for the builder's tests: hack/lib/git-server.ts (Debian's
// `git http-backend` as CGI) on 127.0.0.1 with a temporary root. Repositories are bare directories under a
// temporary root; `repo()` makes one from a directory of files (one commit) and returns its sha.
// With `auth`, every request needs HTTP basic credentials (what GIT_USERNAME/GIT_PASSWORD give).
// Fetching any reachable sha is allowed (uploadpack.allowReachableSHA1InWant), as GitHub does.
import { execFileSync } from "node:child_process";
import { cpSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import type { Server } from "node:http";
import { gitServer } from "../../hack/lib/git-server.ts";
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

const GIT_ENV = {
  GIT_CONFIG_NOSYSTEM: "1",
  GIT_CONFIG_GLOBAL: "/dev/null",
  GIT_AUTHOR_NAME: "Berth Test",
  GIT_AUTHOR_EMAIL: "test@berth.local",
  GIT_COMMITTER_NAME: "Berth Test",
  GIT_COMMITTER_EMAIL: "test@berth.local",
};

export async function startGitServer(opts: { auth?: { username: string; password: string } } = {}): Promise<GitServer> {
  const root = mkdtempSync(join(tmpdir(), "berth-git-"));
  const requests: GitServer["requests"] = [];
  const server: Server = gitServer({
    root,
    authAll: !!opts.auth,
    onRequest: (r) => requests.push(r),
    ...(opts.auth ? { credentials: `${opts.auth.username}:${opts.auth.password}` } : {}),
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return {
    url,
    root,
    requests,
    repo(name, dir, extra = {}, message = `${name}: test commit`) {
      const work = mkdtempSync(join(tmpdir(), "berth-git-work-"));
      try {
        if (dir) cpSync(dir, work, { recursive: true });
        for (const [path, text] of Object.entries(extra)) {
          mkdirSync(dirname(join(work, path)), { recursive: true });
          writeFileSync(join(work, path), text);
        }
        const git = (args: string[], cwd = work) =>
          execFileSync("git", args, { cwd, env: { ...process.env, ...GIT_ENV }, encoding: "utf8" }).trim();
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
