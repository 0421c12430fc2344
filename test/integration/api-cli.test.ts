// The processes, end to end: the bootstrap CLI (node api/cli.ts) against a real database and the
// control plane, its keys used against a running server; and node api/main.ts itself.
import test from "ava";
import { spawn } from "node:child_process";
import { createInterface } from "node:readline";
import { kube } from "../helpers/kube.ts";
import { freshDatabase, query } from "../helpers/db.ts";
import { identity } from "../helpers/identities.ts";
import { startApi, type TestApi } from "../helpers/api.ts";

const k = kube();
let api: TestApi;
const namespaces: string[] = [];
test.before(async () => {
  api = await startApi();
});
test.after.always(async () => {
  await api?.stop();
  for (const name of namespaces) await k.core.deleteNamespace({ name }).catch(() => undefined);
});

interface Run {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** The CLI as an operator of Berth runs it next to the API: with the API's ServiceAccount. */
async function run(args: string[], env: Record<string, string | undefined> = {}): Promise<Run> {
  const kubeconfig = (await identity("api")).kubeconfig;
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ["api/cli.ts", ...args], {
      env: { PATH: process.env.PATH, KUBECONFIG: kubeconfig, DATABASE_URL: api.db.url, ...env },
      stdio: ["ignore", "pipe", "pipe"],
    });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (d: Buffer) => {
      stdout += d.toString();
    });
    child.stderr.on("data", (d: Buffer) => {
      stderr += d.toString();
    });
    child.on("error", reject);
    child.on("close", (code) => resolve({ code, stdout, stderr }));
  });
}

test("workspace create prints the workspace, its labelled namespace and a working key", async (t) => {
  const r = await run(["workspace", "create", "--name", "CLI team"]);
  t.is(r.code, 0, r.stderr);
  const out = JSON.parse(r.stdout) as { workspaceId: string; namespace: string; apiKey: string; created: boolean };
  namespaces.push(out.namespace);
  t.regex(out.workspaceId, /^ws[a-z2-7]{10}$/);
  t.is(out.namespace, `berth-${out.workspaceId}`);
  t.regex(out.apiKey, /^ws_sk_[A-Za-z0-9_-]{43}$/);
  t.true(out.created);
  const ns = await k.core.readNamespace({ name: out.namespace });
  t.is(ns.metadata?.labels?.["berth.dev/workspace"], out.workspaceId);

  const ws = await api.fetchJson("GET", `/workspaces/${out.workspaceId}`, { key: out.apiKey });
  t.is(ws.status, 200);
  t.is(ws.body.name, "CLI team");

  const again = await run(["workspace", "create", "--name", "CLI team", "--id", out.workspaceId]);
  t.is(again.code, 0, again.stderr);
  t.false((JSON.parse(again.stdout) as { created: boolean }).created, "a retry with the id finishes, creates nothing");
});

test("key create, list and revoke", async (t) => {
  const created = await run(["key", "create", "--workspace", api.workspaceId, "--name", "deploy bot"]);
  t.is(created.code, 0, created.stderr);
  const key = JSON.parse(created.stdout) as { id: string; key: string; name: string; prefix: string };
  t.is(key.name, "deploy bot");
  t.is(key.prefix, key.key.slice(0, 12));
  t.is((await api.fetchJson("GET", `/workspaces/${api.workspaceId}`, { key: key.key })).status, 200);

  const list = await run(["key", "list", "--workspace", api.workspaceId]);
  t.is(list.code, 0, list.stderr);
  const listed = JSON.parse(list.stdout) as { id: string; revokedAt: string | null }[];
  t.true(listed.some((k2) => k2.id === key.id));
  t.false(list.stdout.includes(key.key.slice(6)), "no secret in the listing");

  const revoked = await run(["key", "revoke", "--key-id", key.id]);
  t.is(revoked.code, 0, revoked.stderr);
  t.truthy((JSON.parse(revoked.stdout) as { revokedAt: string | null }).revokedAt);
  t.is((await api.fetchJson("GET", `/workspaces/${api.workspaceId}`, { key: key.key })).status, 401);
});

test("admin-key create mints a platform admin key that the API accepts", async (t) => {
  const r = await run(["admin-key", "create", "--name", "ops"]);
  t.is(r.code, 0, r.stderr);
  const key = JSON.parse(r.stdout) as { id: string; key: string };
  t.regex(key.key, /^pa_sk_[A-Za-z0-9_-]{43}$/);
  const rows = await query(api.db.url, `select hash from platform_admin_keys where id = $1`, [key.id]);
  t.is(rows.length, 1);
  t.not(rows[0]!.hash, key.key);
  const list = await api.fetchJson("GET", "/workspaces", { key: key.key });
  t.is(list.status, 200);
  t.true((list.body.data as { id: string }[]).some((w) => w.id === api.workspaceId));

  const listed = await run(["admin-key", "list"]);
  t.is(listed.code, 0);
  t.false(listed.stdout.includes(key.key.slice(6)));
  t.is((await run(["admin-key", "revoke", "--key-id", key.id])).code, 0);
  t.is((await api.fetchJson("GET", "/workspaces", { key: key.key })).status, 401);
});

test("errors are clear and exit non-zero", async (t) => {
  const missing = await run(["key", "create", "--workspace", api.workspaceId]);
  t.is(missing.code, 2);
  t.regex(missing.stderr, /--name is required/);
  t.is(missing.stdout, "");

  const unknownCmd = await run(["workspace", "explode"]);
  t.is(unknownCmd.code, 2);
  t.regex(unknownCmd.stderr, /unknown command 'workspace explode'/);

  const unknownFlag = await run(["key", "list", "--wrokspace", "x"]);
  t.is(unknownFlag.code, 2);
  t.regex(unknownFlag.stderr, /wrokspace/);

  const noWorkspace = await run(["key", "create", "--workspace", "wsaaaaaaaaaa", "--name", "x"]);
  t.is(noWorkspace.code, 1);
  t.regex(noWorkspace.stderr, /Workspace wsaaaaaaaaaa does not exist\. \(workspace_not_found\)/);

  const noKey = await run(["key", "revoke", "--key-id", "00000000-0000-4000-8000-000000000000"]);
  t.is(noKey.code, 1);
  t.regex(noKey.stderr, /api_key_not_found/);

  const badConfig = await run(["key", "list", "--workspace", api.workspaceId], { DATABASE_URL: "mysql://nope" });
  t.is(badConfig.code, 1);
  t.regex(badConfig.stderr, /invalid configuration[\s\S]*DATABASE_URL/);

  const unreachable = await run(["admin-key", "list"], { DATABASE_URL: "postgres://berth:x@127.0.0.1:1/none" });
  t.is(unreachable.code, 1);
  t.regex(unreachable.stderr, /^error: /);
});

test("node api/main.ts --migrate serves a fresh database and stops cleanly on SIGTERM", async (t) => {
  const db = await freshDatabase({ empty: true });
  t.teardown(() => db.drop());
  const child = spawn(process.execPath, ["api/main.ts", "--migrate"], {
    env: { PATH: process.env.PATH, KUBECONFIG: (await identity("api")).kubeconfig, DATABASE_URL: db.url, BERTH_API_PORT: "0" },
    stdio: ["ignore", "pipe", "pipe"],
  });
  t.teardown(() => {
    child.kill("SIGKILL");
  });
  let stderr = "";
  child.stderr.on("data", (d: Buffer) => {
    stderr += d.toString();
  });
  const lines: Record<string, unknown>[] = [];
  const exited = new Promise<number | null>((resolve) => child.on("close", resolve));
  const url = await new Promise<string>((resolve, reject) => {
    createInterface({ input: child.stdout }).on("line", (line) => {
      const l = JSON.parse(line) as Record<string, unknown>;
      lines.push(l);
      if (typeof l.url === "string") resolve(l.url);
    });
    void exited.then((code) => reject(new Error(`main exited with ${code}: ${stderr}`)));
  });
  t.regex(url, /^http:\/\/127\.0\.0\.1:\d+$/, "listens on 127.0.0.1 by default");
  t.true(lines.some((l) => l.msg === "migrations applied"));
  t.is((await fetch(`${url}/healthz`)).status, 200);
  const ready = await fetch(`${url}/readyz`);
  t.is(ready.status, 200, await ready.text());
  const noKey = await fetch(`${url}/api/v1/workspaces`);
  t.is(noKey.status, 401);

  child.kill("SIGTERM");
  t.is(await exited, 0, stderr);
  t.true(lines.some((l) => l.msg === "stopped"));
});
