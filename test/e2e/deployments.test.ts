// From git push to a running release, on the real node: a repository pushed to the
// local Git server, a signed GitHub push delivery to the API, the operator's build Job (the
// builder image, BuildKit through the node's bridge, the local registry), the release command
// Job, the rollout, and the answer through the ingress; the registry build cache is on (each build
// imports and exports the App's cache), and builds reach buildkitd over mutual TLS. Every assertion is what a user sees: the
// deployment record and pipeline state at each step, the page the pushed commit serves, a failed
// build or release command that leaves the previous release serving, and a rollback without a
// build.
import test from "ava";
import { createHmac } from "node:crypto";
import { execFileSync } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { buildBerthImages } from "../../hack/berth-images.ts";
import { IMAGES } from "../../hack/images.ts";
import { Registry } from "../../hack/lib/registry.ts";
import { readBuildkitClient } from "../../hack/lib/buildkit-tls.ts";
import { BUILDKIT_CLIENT_SECRET } from "../../operator/release/builders.ts";
import type { TestApi } from "../helpers/api.ts";
import { need, startOnNode, type OnNode } from "../helpers/e2e.ts";
import { viaIngress } from "../helpers/ingress.ts";
import { eventually, kube, uniqueName } from "../helpers/kube.ts";

const INGRESS = need("BERTH_INGRESS_URL");
const REGISTRY = need("BERTH_REGISTRY");
const BUILDKIT = need("BERTH_BUILDKIT_ADDR");
const BUILDKIT_CLUSTER = need("BERTH_BUILDKIT_CLUSTER_ADDR");
/** hack's client certificate for buildkitd's TCP listener, which every build Job here presents. */
const BUILDKIT_TLS_DIR = need("BERTH_BUILDKIT_TLS_DIR");
const GIT = need("BERTH_GIT_URL");
const GIT_CLUSTER = need("BERTH_GIT_CLUSTER_URL");
const DOMAIN = "builds.e2e.local";

const k = kube();
let api: TestApi;
let node: OnNode | undefined;
let dir = "";
const repo = uniqueName("site");
let src = "";

const git = (...args: string[]) =>
  execFileSync("git", ["-c", "user.email=e2e@berth.local", "-c", "user.name=e2e", ...args], { cwd: src })
    .toString()
    .trim();

/** Commits the files (path → content) and pushes main; returns the commit's sha. */
function commit(message: string, files: Record<string, string>): string {
  for (const [p, c] of Object.entries(files)) writeFileSync(join(src, p), c);
  git("add", ".");
  git("commit", "-qm", message);
  git("push", "-q", `${GIT}/${repo}.git`, "HEAD:main");
  return git("rev-parse", "HEAD");
}

// Node as a container's PID 1 ignores SIGTERM unless it handles it: without the handler a replaced
// release's pod would take its whole grace period (30 s) to go.
const SERVER = (version: string) =>
  `require("node:http").createServer((q, s) => s.end("site ${version}\\n")).listen(Number(process.env.PORT));\nprocess.on("SIGTERM", () => process.exit(0));\n`;
const DOCKERFILE = `FROM ${REGISTRY}/${IMAGES.node.name}:${IMAGES.node.tag}\nCOPY server.js /app/server.js\nCMD ["node", "/app/server.js"]\n`;

test.before(async () => {
  const [builder] = await buildBerthImages({
    registry: REGISTRY,
    addr: BUILDKIT,
    components: ["builder"],
    log: (l) => console.log(`[berth-images] ${l}`),
  });
  node = await startOnNode({
    domain: DOMAIN,
    operatorEnv: {
      BERTH_BUILDER_IMAGE: builder!.reference,
      BERTH_BUILDKIT_HOST: BUILDKIT_CLUSTER,
      BERTH_BUILD_REGISTRY: REGISTRY,
      BERTH_BUILD_REGISTRY_INSECURE: "true",
      BERTH_BUILD_BASE_IMAGES: JSON.stringify({ node: `${REGISTRY}/${IMAGES.node.name}:${IMAGES.node.tag}` }),
      BERTH_BUILD_CACHE: "registry",
    },
  });
  api = node.api;
  dir = mkdtempSync(join(tmpdir(), "berth-e2e-git-"));
  src = join(dir, "src");
  execFileSync("git", ["init", "-q", "-b", "main", src]);
});
test.after.always(async () => {
  await node?.stop();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

const apps = () => `/workspaces/${api.workspaceId}/apps`;
let secret = "";
let first = "";
let firstSha = "";

async function deliver(sha: string, message: string) {
  const raw = Buffer.from(
    JSON.stringify({
      ref: "refs/heads/main",
      after: sha,
      repository: { clone_url: `${GIT_CLUSTER}/${repo}.git` },
      head_commit: { id: sha, message },
    }),
  );
  return api.fetchJson("POST", `/webhooks/github/${api.workspaceId}/site`, {
    key: null,
    rawBody: raw,
    headers: {
      "Content-Type": "application/json",
      "X-GitHub-Event": "push",
      "X-GitHub-Delivery": crypto.randomUUID(),
      "X-Hub-Signature-256": `sha256=${createHmac("sha256", secret).update(raw).digest("hex")}`,
    },
  });
}

/** Waits for the deployment to reach `want`; fails at once with its record when it ends otherwise. */
async function deployment(id: string, want: string, timeoutMs = 240_000): Promise<Record<string, unknown>> {
  let last = "";
  const d = await eventually(
    `${id} to be ${want}`,
    async () => {
      const r = (await api.fetchJson("GET", `${apps()}/site/deployments/${id}`)).body as Record<string, unknown>;
      if (r.status !== last) {
        console.log(`[e2e] ${id}: ${String(r.status)}`);
        last = r.status as string;
      }
      // (returned, not thrown: eventually retries what throws)
      return r.status === want || ["build_failed", "release_failed", "failed", "cancelled", "superseded"].includes(r.status as string)
        ? r
        : undefined;
    },
    timeoutMs,
    1000,
  );
  if (d.status !== want) throw new Error(`${id} is ${String(d.status)}, not ${want}: ${JSON.stringify(d.failure)}`);
  return d;
}

const page = async () => (await viaIngress(INGRESS, `site.${DOMAIN}`, "/")).text;

/**
 * Waits until a rollout has taken the replaced release out of rotation: every pod of the App runs
 * `image` or is terminating (no longer a ready endpoint), and the ingress answers `text` five times
 * in a row (its endpoints caught up). Until then a request may still reach the replaced pod.
 */
async function servesOnly(image: string, text: string): Promise<void> {
  await eventually(
    "the replaced release's pods to be terminating",
    async () => {
      const pods = (await k.core.listNamespacedPod({ namespace: api.namespace, labelSelector: "berth.dev/app=site" })).items;
      return pods.some((p) => p.spec?.containers[0]?.image === image) &&
        pods.every((p) => p.spec?.containers[0]?.image === image || p.metadata?.deletionTimestamp)
        ? true
        : undefined;
    },
    120_000,
    500,
  );
  await eventually(
    `the ingress to answer only ${JSON.stringify(text)}`,
    async () => {
      for (let i = 0; i < 5; i++) if ((await page()) !== text) return undefined;
      return true;
    },
    60_000,
    500,
  );
}

test.serial(
  "a signed push builds, releases and rolls out the commit: the ingress answers with its content, and the record and pipeline say so",
  async (t) => {
    t.timeout(360_000); // a cold build of the first commit on a loaded 2-core machine
    firstSha = commit("first version", { "server.js": SERVER("v1"), Dockerfile: DOCKERFILE });
    const created = await api.fetchJson("POST", apps(), {
      body: {
        name: "Site",
        slug: "site",
        gitRepoUrl: `${GIT_CLUSTER}/${repo}.git`,
        autoDeploy: true,
        visibility: "public",
        releaseCommand: "echo migrating && test -f /app/server.js",
      },
    });
    t.is(created.status, 201, created.text);
    secret = (await api.fetchJson("POST", `${apps()}/site/webhook-secret`)).body.secret as string;
    const r = await deliver(firstSha, "first version");
    t.is(r.status, 202, r.text);
    first = r.body.deployment.id as string;
    const done = await deployment(first, "succeeded");
    t.like(done, { trigger: "push", gitCommitSha: firstSha, gitCommitMessage: "first version", stack: "dockerfile" });
    t.regex(done.image as string, new RegExp(`^${REGISTRY}/apps/${api.namespace}/site@sha256:[0-9a-f]{64}$`));
    for (const step of ["buildStartedAt", "buildFinishedAt", "releaseStartedAt", "releaseFinishedAt", "deployStartedAt", "deployedAt"])
      t.truthy(done[step], step);
    const answer = await eventually(
      "the ingress to serve v1",
      async () => ((await page()) === "site v1\n" ? "ok" : undefined),
      60_000,
      500,
    );
    t.is(answer, "ok");
    const logs = await api.fetchJson("GET", `${apps()}/site/deployments/${first}/logs`);
    t.regex(logs.text, /==> build/);
    t.regex(logs.text, /migrating/, "the release command's output");
    // the build went over mutual TLS to buildkitd (test/helpers/operator.ts): the Job read the
    // operator's copy of the client certificate in the workspace's namespace, by secretKeyRef
    t.true(logs.text.includes(`on ${BUILDKIT_CLUSTER} over mutual TLS`), logs.text);
    const [job] = (await k.batch.listNamespacedJob({ namespace: api.namespace, labelSelector: "berth.dev/release-step=build" })).items;
    const env = job?.spec?.template.spec?.containers[0]?.env ?? [];
    // (client-node's classes, compared as the plain JSON the API server sent)
    t.deepEqual(JSON.parse(JSON.stringify(env.find((e) => e.name === "BERTH_BUILDKIT_TLS_KEY")?.valueFrom ?? null)), {
      secretKeyRef: { name: BUILDKIT_CLIENT_SECRET, key: "tls.key" },
    });
    t.is(job?.spec?.template.spec?.volumes, undefined, "still no volume");
    const copy = await k.core.readNamespacedSecret({ name: BUILDKIT_CLIENT_SECRET, namespace: api.namespace });
    t.like(copy.metadata?.labels, { "app.kubernetes.io/managed-by": "berth", "app.kubernetes.io/component": "buildkit-client" });
    t.is(
      Buffer.from(copy.data?.["tls.crt"] ?? "", "base64").toString(),
      readBuildkitClient(BUILDKIT_TLS_DIR).cert,
      "hack's client certificate",
    );
    const state = (await api.fetchJson("GET", `${apps()}/site/pipeline-state`)).body;
    t.like(state, {
      source: { status: "ok", lastCommitSha: firstSha, lastCommitMessage: "first version" },
      build: { status: "succeeded", buildpack: "dockerfile" },
      deploy: { status: "succeeded" },
      overallStatus: "active",
    });
    const svc = (await api.fetchJson("GET", `${apps()}/site`)).body;
    t.like(svc.latestDeployment, { id: first, status: "succeeded", gitCommitSha: firstSha, gitCommitMessage: "first version" });
    t.truthy(
      (await k.core.readNamespacedSecret({ name: "site-governance", namespace: api.namespace })).data?.GOVDB_CONNECTION,
      "governance provisioned on the first deployment",
    );
    t.truthy(
      await new Registry(REGISTRY).manifestDigest(`apps/${api.namespace}/site`, "buildcache"),
      "the App's build cache, exported next to its images",
    );
  },
);

test.serial("a second push rolls a new release and the answer changes; the first is superseded", async (t) => {
  t.timeout(300_000);
  const sha = commit("second version", { "server.js": SERVER("v2") });
  const r = await deliver(sha, "second version");
  t.is(r.status, 202, r.text);
  const done = await deployment(r.body.deployment.id as string, "succeeded");
  await eventually("the ingress to serve v2", async () => (await page()) === "site v2\n", 60_000, 500);
  // (the next tests check that v2 keeps answering: the v1 pod must have drained first)
  await servesOnly(done.image as string, "site v2\n");
  t.is((await api.fetchJson("GET", `${apps()}/site/deployments/${first}`)).body.status, "superseded");
  const logs = await api.fetchJson("GET", `${apps()}/site/deployments/${r.body.deployment.id as string}/logs`);
  t.true(logs.text.includes(`importing cache manifest from ${REGISTRY}/apps/${api.namespace}/site:buildcache`), logs.text);
});

test.serial("a Dockerfile that fails: build_failed with the reason, and the previous release still answers", async (t) => {
  t.timeout(300_000);
  const sha = commit("broken build", { Dockerfile: `${DOCKERFILE}RUN exit 3\n` });
  const r = await deliver(sha, "broken build");
  const failed = await eventually(
    "the build to fail",
    async () => {
      const d = (await api.fetchJson("GET", `${apps()}/site/deployments/${r.body.deployment.id as string}`)).body;
      return d.status === "build_failed" ? d : undefined;
    },
    240_000,
    1000,
  );
  t.like(failed.failure, { step: "build" });
  t.truthy(failed.failure.message);
  // The Release's status (read above) and the App's are written by two controllers: the App
  // follows its newest Release by a watch, so the service shows build_failed a moment later.
  await eventually(
    "the service to show build_failed",
    async () => (await api.fetchJson("GET", `${apps()}/site`)).body.status === "build_failed",
    30_000,
    250,
  );
  t.is(await page(), "site v2\n");
});

test.serial("a failing release command: release_failed, nothing rolls out", async (t) => {
  t.timeout(300_000);
  const sha = commit("fix the build", { Dockerfile: DOCKERFILE, "server.js": SERVER("v3") });
  t.is((await api.fetchJson("PATCH", `${apps()}/site`, { body: { releaseCommand: "echo cannot migrate >&2; exit 7" } })).status, 200);
  // A manual deploy of that commit (this API runs on the host, which cannot reach the Git server's
  // in-cluster address to read the branch head; test/integration/api-deployments.test.ts covers that).
  const r = await api.fetchJson("POST", `${apps()}/site/deployments`, { body: { commitSha: sha, commitMessage: "fix the build" } });
  t.is(r.status, 202, r.text);
  const failed = await eventually(
    "the release command to fail",
    async () => {
      const d = (await api.fetchJson("GET", `${apps()}/site/deployments/${r.body.id as string}`)).body;
      return d.status === "release_failed" ? d : undefined;
    },
    240_000,
    1000,
  );
  t.like(failed.failure, { step: "release", reason: "ReleaseCommandFailed" });
  t.regex(failed.failure.message, /code 7/);
  t.is(await page(), "site v2\n", "the previous release keeps serving");
  t.is((await api.fetchJson("PATCH", `${apps()}/site`, { body: { releaseCommand: null } })).status, 200);
});

test.serial("rollback to the first deployment: its content answers again, without a build", async (t) => {
  const r = await api.fetchJson("POST", `${apps()}/site/deployments/${first}/redeploy`);
  t.is(r.status, 202, r.text);
  const done = await deployment(r.body.id as string, "succeeded", 120_000);
  t.like(done, { trigger: "rollback", rollbackOf: first, buildStartedAt: null });
  await eventually("the ingress to serve v1 again", async () => (await page()) === "site v1\n", 60_000, 500);
  t.is(
    (await api.fetchJson("GET", `${apps()}/site/deployments/${r.body.id as string}/logs`)).text.trim(),
    "(a rollback: nothing was built)",
  );
  t.is(firstSha.length, 40);
});
