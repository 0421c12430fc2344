// Deployments and push webhooks through the real API, against the real API server and
// PostgreSQL, the API under its chart ServiceAccount: signed GitHub deliveries start exactly one
// Release, every refusal is a problem (never a 500), replays start nothing, the manual deploy reads
// the branch's head from a real Git server, and a rollback needs a built deployment. The builds
// themselves run on the real node (test/e2e/deployments.test.ts).
import test from "ava";
import { createHmac } from "node:crypto";
import { execFile } from "node:child_process";
import { promisify } from "node:util";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { AddressInfo } from "node:net";
import type { Server } from "node:http";
import { API_VERSION } from "../../crds/schemas.ts";
import { KubeClient, type KubeObject } from "../../kube/client.ts";
import { gitServer } from "../../hack/lib/git-server.ts";
import { headOf } from "../../api/deployments/git.ts";
import { repoIdentity, signatureMatches } from "../../api/deployments/webhooks.ts";
import { startApi, type TestApi } from "../helpers/api.ts";
import { eventually, kube } from "../helpers/kube.ts";

const k = kube();
const client = new KubeClient(k.kc);
let api: TestApi;
let git: Server;
let gitUrl = "";
let dir = "";
let sha = "";

// Asynchronous: the Git server runs in this process.
const sh = async (cwd: string, ...args: string[]) =>
  (await promisify(execFile)("git", ["-c", "user.email=t@berth.local", "-c", "user.name=t", ...args], { cwd })).stdout.trim();

test.before(async () => {
  // the Git server listens on loopback: allow-listed, as ./hack/up allow-lists its own
  api = await startApi({ env: { BERTH_OUTBOUND_ALLOW: "127.0.0.1/32" } });
  dir = mkdtempSync(join(tmpdir(), "berth-git-"));
  git = gitServer({ root: join(dir, "repos") });
  await new Promise<void>((r) => git.listen(0, "127.0.0.1", r));
  gitUrl = `http://127.0.0.1:${(git.address() as AddressInfo).port}`;
  const src = join(dir, "src");
  await sh(dir, "init", "-q", "-b", "main", src);
  writeFileSync(join(src, "index.html"), "v1\n");
  await sh(src, "add", ".");
  await sh(src, "commit", "-qm", "first version");
  await sh(src, "push", "-q", `${gitUrl}/site.git`, "main");
  sha = await sh(src, "rev-parse", "HEAD");
});
test.after.always(async () => {
  await api?.stop();
  git?.close();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

const apps = () => `/workspaces/${api.workspaceId}/apps`;

async function gitApp(slug: string, extra: Record<string, unknown> = {}): Promise<void> {
  const r = await api.fetchJson("POST", apps(), {
    body: { name: slug, slug, gitRepoUrl: `${gitUrl}/site.git`, gitBranch: "main", autoDeploy: true, ...extra },
  });
  if (r.status !== 201) throw new Error(r.text);
}

async function secretOf(slug: string): Promise<string> {
  const r = await api.fetchJson("POST", `${apps()}/${slug}/webhook-secret`);
  if (r.status !== 201) throw new Error(r.text);
  return r.body.secret as string;
}

function push(branch: string, after: string, repo = `${gitUrl}/site.git`) {
  return {
    ref: `refs/heads/${branch}`,
    before: "0".repeat(40),
    after,
    repository: { clone_url: repo },
    head_commit: { id: after, message: "first version" },
  };
}

async function deliver(slug: string, payload: unknown, o: { secret: string; event?: string; delivery?: string; signature?: string }) {
  const raw = Buffer.from(JSON.stringify(payload));
  const signature = o.signature ?? `sha256=${createHmac("sha256", o.secret).update(raw).digest("hex")}`;
  return api.fetchJson("POST", `/webhooks/github/${api.workspaceId}/${slug}`, {
    key: null,
    rawBody: raw,
    headers: {
      "Content-Type": "application/json",
      "X-GitHub-Event": o.event ?? "push",
      "X-GitHub-Delivery": o.delivery ?? crypto.randomUUID(),
      "X-Hub-Signature-256": signature,
    },
  });
}

const releases = async (slug: string) =>
  (
    await client.list<
      KubeObject & { spec: { appRef: { name: string }; trigger: string; git?: { commitSha: string; deliveryId?: string } } }
    >(API_VERSION, "Release", api.namespace)
  ).items.filter((r) => r.spec.appRef.name === slug);

test("pure parts: GitHub's signature in constant time, repository identity, a branch head from a ref advertisement", (t) => {
  const body = Buffer.from('{"a":1}');
  const sig = `sha256=${createHmac("sha256", "s3cret").update(body).digest("hex")}`;
  t.true(signatureMatches(sig, body, "s3cret"));
  t.false(signatureMatches(sig, body, "other"));
  t.false(signatureMatches(sig, Buffer.from('{"a":2}'), "s3cret"));
  t.false(signatureMatches(undefined, body, "s3cret"));
  t.false(signatureMatches("sha1=abc", body, "s3cret"));
  t.is(repoIdentity("https://GitHub.com/Org/Repo.git/"), repoIdentity("https://github.com/org/repo"));
  t.not(repoIdentity("https://github.com/org/repo"), repoIdentity("https://github.com/org/repo2"));
  const pkt = (s: string) => `${(s.length + 4).toString(16).padStart(4, "0")}${s}`;
  const adv = Buffer.from(
    `${pkt("# service=git-upload-pack\n")}0000${pkt(`${"a".repeat(40)} HEAD\0multi_ack\n`)}${pkt(`${"b".repeat(40)} refs/heads/feature/x\n`)}${pkt(`${"c".repeat(40)} refs/heads/main\n`)}0000`,
  );
  t.is(headOf(adv, "main"), "c".repeat(40));
  t.is(headOf(adv, "feature/x"), "b".repeat(40));
  t.is(headOf(adv, "nope"), undefined);
});

test("a signed push to the branch starts one deployment; a replay of the delivery starts nothing", async (t) => {
  await gitApp("hooked");
  const secret = await secretOf("hooked");
  t.is((await deliver("hooked", { zen: "hi" }, { secret, event: "ping" })).body.status, "pong");
  const delivery = crypto.randomUUID();
  const r = await deliver("hooked", push("main", sha), { secret, delivery });
  t.is(r.status, 202, r.text);
  t.is(r.body.status, "queued");
  t.like(r.body.deployment, {
    id: "hooked-1",
    number: 1,
    status: "queued",
    trigger: "push",
    gitBranch: "main",
    gitCommitSha: sha,
    gitCommitMessage: "first version",
  });
  const again = await deliver("hooked", push("main", sha), { secret, delivery });
  t.is(again.status, 200, again.text);
  t.is(again.body.status, "duplicate");
  const rs = await releases("hooked");
  t.deepEqual(
    rs.map((x) => [x.metadata.name, x.spec.trigger, x.spec.git?.deliveryId]),
    [["hooked-1", "push", delivery]],
  );
  const list = await api.fetchJson("GET", `${apps()}/hooked/deployments`);
  t.deepEqual(
    list.body.data.map((d: { id: string }) => d.id),
    ["hooked-1"],
  );
  const got = await api.fetchJson("GET", `${apps()}/hooked/deployments/hooked-1`);
  t.is(got.body.gitCommitSha, sha);
  const logs = await api.fetchJson("GET", `${apps()}/hooked/deployments/hooked-1/logs`);
  t.is(logs.status, 200);
  t.regex(logs.text, /not started yet|==> build/);
});

test("a captured push re-sent under a new delivery id does not deploy its commit again; a failed commit may be pushed again", async (t) => {
  await gitApp("replayed");
  const secret = await secretOf("replayed");
  t.is((await deliver("replayed", push("main", sha), { secret })).body.status, "queued");
  const replay = await deliver("replayed", push("main", sha), { secret, delivery: crypto.randomUUID() });
  t.is(replay.status, 202, replay.text);
  t.is(replay.body.status, "ignored");
  t.regex(replay.body.reason, /has a deployment already \(replayed-1, queued\)/);
  t.is((await releases("replayed")).length, 1);
  // the same delivery after the release failed: a retry is a deployment (what the rule lets through)
  const [r1] = await releases("replayed");
  await client.applyStatus(
    "releases",
    {
      apiVersion: API_VERSION,
      kind: "Release",
      metadata: { name: r1!.metadata.name!, namespace: api.namespace },
      status: { phase: "build_failed" },
    },
    "test",
  );
  const retry = await eventually("a push after the failure to deploy", async () => {
    const r = await deliver("replayed", push("main", sha), { secret, delivery: crypto.randomUUID() });
    return r.body.status === "queued" ? r : undefined;
  });
  t.like(retry.body.deployment, { id: "replayed-2", gitCommitSha: sha });
});

test("a soft-deleted service deploys nothing (409 service_suspended; pushes ignored) until it is resumed", async (t) => {
  await gitApp("sleeper");
  const secret = await secretOf("sleeper");
  t.is((await api.fetchJson("DELETE", `${apps()}/sleeper`)).status, 204);
  const manual = await api.fetchJson("POST", `${apps()}/sleeper/deployments`, { body: { commitSha: sha } });
  t.is(manual.status, 409, manual.text);
  t.is(manual.body.code, "service_suspended");
  const pushed = await deliver("sleeper", push("main", sha), { secret });
  t.is(pushed.status, 202);
  t.is(pushed.body.status, "ignored");
  t.regex(pushed.body.reason, /soft-deleted/);
  t.deepEqual(await releases("sleeper"), []);
  t.is((await api.fetchJson("POST", `${apps()}/sleeper/resume`)).status, 200);
  const resumed = await api.fetchJson("POST", `${apps()}/sleeper/deployments`, { body: { commitSha: sha } });
  t.is(resumed.status, 202, resumed.text);
});

test("the webhook secret's URLs: paths on the API's host by default, absolute under BERTH_PUBLIC_URL; GitHub's and GitLab's", async (t) => {
  await gitApp("urls");
  const rel = await api.fetchJson("POST", `${apps()}/urls/webhook-secret`);
  t.is(rel.status, 201, rel.text);
  t.like(rel.body, {
    url: `/api/v1/webhooks/github/${api.workspaceId}/urls`,
    gitlabUrl: `/api/v1/webhooks/gitlab/${api.workspaceId}/urls`,
  });
  // the path is the one deliveries are received at
  const pong = await api.fetchJson("POST", (rel.body.url as string).replace(/^\/api\/v1/, ""), {
    key: null,
    rawBody: Buffer.from("{}"),
    headers: {
      "Content-Type": "application/json",
      "X-GitHub-Event": "ping",
      "X-GitHub-Delivery": crypto.randomUUID(),
      "X-Hub-Signature-256": `sha256=${createHmac("sha256", rel.body.secret as string)
        .update("{}")
        .digest("hex")}`,
    },
  });
  t.is(pong.status, 200, pong.text);
  const pub = await startApi({ env: { BERTH_PUBLIC_URL: "https://berth.example.com/" } });
  try {
    const r = await pub.fetchJson("POST", `/workspaces/${pub.workspaceId}/apps`, {
      body: { name: "urls", slug: "urls", gitRepoUrl: `${gitUrl}/site.git` },
    });
    t.is(r.status, 201, r.text);
    const abs = await pub.fetchJson("POST", `/workspaces/${pub.workspaceId}/apps/urls/webhook-secret`);
    t.like(abs.body, {
      url: `https://berth.example.com/api/v1/webhooks/github/${pub.workspaceId}/urls`,
      gitlabUrl: `https://berth.example.com/api/v1/webhooks/gitlab/${pub.workspaceId}/urls`,
    });
  } finally {
    await pub.stop();
  }
});

test("refused deliveries: a bad or missing signature and an unknown service are the same 401, and start nothing", async (t) => {
  await gitApp("guarded");
  const secret = await secretOf("guarded");
  for (const r of [
    await deliver("guarded", push("main", sha), { secret: "wrong" }),
    await deliver("guarded", push("main", sha), { secret, signature: "" }),
    await deliver("nobody", push("main", sha), { secret }),
  ]) {
    t.is(r.status, 401, r.text);
    t.is(r.headers.get("content-type"), "application/problem+json");
  }
  // rotation: the old secret stops working
  const rotated = await secretOf("guarded");
  t.not(rotated, secret);
  t.is((await deliver("guarded", push("main", sha), { secret })).status, 401);
  t.deepEqual(await releases("guarded"), []);
});

test("other branches, tags, deletions, other events and autoDeploy off are ignored with the reason; another repository is 422", async (t) => {
  await gitApp("picky", { gitBranch: "release/v2" });
  const secret = await secretOf("picky");
  const reasons: string[] = [];
  for (const [payload, event] of [
    [push("main", sha), "push"],
    [{ ...push("release/v2", sha), ref: "refs/tags/v2" }, "push"],
    [{ ...push("release/v2", "0".repeat(40)), deleted: true }, "push"],
    [{ action: "opened" }, "pull_request"],
  ] as const) {
    const r = await deliver("picky", payload, { secret, event });
    t.is(r.status, 202, r.text);
    t.is(r.body.status, "ignored");
    reasons.push(r.body.reason as string);
  }
  t.regex(reasons[0]!, /push is to main; the service deploys release\/v2/);
  t.regex(reasons[1]!, /not a branch/);
  t.regex(reasons[2]!, /deleted/);
  t.regex(reasons[3]!, /pull_request is not handled/);
  const other = await deliver("picky", push("release/v2", sha, "https://github.com/someone/else.git"), { secret });
  t.is(other.status, 422, other.text);
  t.is(other.body.code, "repository_mismatch");
  const bad = await deliver("picky", { ref: 42 }, { secret });
  t.is(bad.status, 400);
  t.is(bad.body.code, "invalid_push_payload");
  await gitApp("manual-only", { autoDeploy: false });
  const s2 = await secretOf("manual-only");
  const off = await deliver("manual-only", push("main", sha), { secret: s2 });
  t.is(off.body.status, "ignored");
  t.regex(off.body.reason, /autoDeploy is off/);
  t.deepEqual([...(await releases("picky")), ...(await releases("manual-only"))], []);
});

test("a manual deploy builds the branch's head from the Git server; numbers follow; a rollback needs a built deployment", async (t) => {
  await gitApp("byhand", { autoDeploy: false });
  const first = await api.fetchJson("POST", `${apps()}/byhand/deployments`);
  t.is(first.status, 202, first.text);
  t.like(first.body, { id: "byhand-1", trigger: "manual", gitCommitSha: sha });
  const second = await api.fetchJson("POST", `${apps()}/byhand/deployments`, { body: { commitSha: sha } });
  t.is(second.body.id, "byhand-2");
  const list = await api.fetchJson("GET", `${apps()}/byhand/deployments`);
  t.deepEqual(
    list.body.data.map((d: { id: string }) => d.id),
    ["byhand-2", "byhand-1"],
    "newest first",
  );
  const rollback = await api.fetchJson("POST", `${apps()}/byhand/deployments/byhand-1/redeploy`);
  t.is(rollback.status, 409, rollback.text);
  t.is(rollback.body.code, "deployment_not_built");
  t.is((await api.fetchJson("GET", `${apps()}/byhand/deployments/nope-1`)).status, 404);
  const image = await api.fetchJson("POST", apps(), { body: { name: "img", slug: "img", image: "127.0.0.1:1/x:1" } });
  t.is(image.status, 201);
  const none = await api.fetchJson("POST", `${apps()}/img/deployments`);
  t.is(none.status, 409);
  t.is(none.body.code, "no_repository");
  const other = await api.createWorkspace("other");
  t.is(
    (await api.fetchJson("GET", `/workspaces/${other.workspaceId}/apps/byhand/deployments`, { key: other.apiKey })).status,
    404,
    "another workspace sees nothing",
  );
  t.is((await api.fetchJson("GET", `/workspaces/${api.workspaceId}/apps/byhand/deployments`, { key: other.apiKey })).status, 404);
});

test("a gitRepoUrl at an address the platform does not reach (loopback, the API server) is never fetched; the answer tells nothing of it", async (t) => {
  // the same repository deploys from the API above, which allow-lists loopback ("byhand"); this one does not
  const closed = await startApi();
  t.teardown(() => closed.stop());
  const ws = `/workspaces/${closed.workspaceId}/apps`;
  let hits = 0;
  const count = (req: { url?: string }) => {
    if (req.url?.includes("/info/refs")) hits++;
  };
  git.on("request", count);
  t.teardown(() => {
    git.off("request", count);
  });
  const server = new URL(k.kc.getCurrentCluster()!.server);
  for (const [slug, repo] of [
    ["loopback", `${gitUrl}/site.git`],
    ["apiserver", `https://127.0.0.1:${server.port}/api`],
    ["metadata", "http://169.254.169.254/latest"],
  ] as const) {
    t.is((await closed.fetchJson("POST", ws, { body: { name: slug, slug, gitRepoUrl: repo, autoDeploy: false } })).status, 201);
    const r = await closed.fetchJson("POST", `${ws}/${slug}/deployments`);
    t.is(r.status, 502, r.text);
    t.is(r.body.code, "git_unreachable");
    t.notRegex(r.text, /127\.0\.0\.1|169\.254|refused|ECONN|\b40[0-9]\b/, "nothing of what is at the address reaches the caller");
    t.true(
      closed.logs.some((l) => l.repoUrl === repo && /refused address/.test(String(l.detail))),
      `${slug}: the log says why`,
    );
  }
  t.is(hits, 0, "the Git server saw no request from the closed API");
  const allowed = await api.fetchJson("POST", apps(), {
    body: { name: "reach", slug: "reach", gitRepoUrl: `${gitUrl}/site.git`, autoDeploy: false },
  });
  t.is(allowed.status, 201);
  t.is((await api.fetchJson("POST", `${apps()}/reach/deployments`)).status, 202, "allow-listed, the same repository is read");
  t.true(hits > 0);
});

test("GitLab: the token is the secret (a wrong one is 401), a Push Hook to the branch starts one deployment, a replay none", async (t) => {
  await gitApp("labbed");
  const secret = await secretOf("labbed");
  const payload = {
    object_kind: "push",
    ref: "refs/heads/main",
    before: "0".repeat(40),
    after: sha,
    checkout_sha: sha,
    project: { git_http_url: `${gitUrl}/site.git` },
    commits: [{ id: sha, message: "first version\n" }],
  };
  const send = (token: string, delivery: string, event = "Push Hook") =>
    api.fetchJson("POST", `/webhooks/gitlab/${api.workspaceId}/labbed`, {
      key: null,
      rawBody: JSON.stringify(payload),
      headers: { "Content-Type": "application/json", "X-Gitlab-Event": event, "X-Gitlab-Event-UUID": delivery, "X-Gitlab-Token": token },
    });
  t.is((await send("wrong", crypto.randomUUID())).status, 401);
  t.is((await send(`${secret}x`, crypto.randomUUID())).status, 401);
  const delivery = crypto.randomUUID();
  const r = await send(secret, delivery);
  t.is(r.status, 202, r.text);
  t.like(r.body.deployment, { id: "labbed-1", trigger: "push", gitCommitSha: sha, gitCommitMessage: "first version\n" });
  t.is((await send(secret, delivery)).body.status, "duplicate");
  t.is((await send(secret, crypto.randomUUID(), "Tag Push Hook")).body.status, "ignored");
  t.is((await releases("labbed")).length, 1);
});
