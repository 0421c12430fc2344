// The build program (operator/builder/main.ts, docs/builds.md) run on the host as a build Job's
// container runs it: against the real node's buildkitd (BERTH_BUILDKIT_ADDR) and registry
// (BERTH_REGISTRY), cloning from a Git server over smart HTTP that requires credentials
// (test/helpers/git-http.ts). A Dockerfile repository and the Node.js, Python and Go samples by
// detection land in the registry under their tag with the digest the result reports, and the
// detected images serve their page on PORT as pods on the real node; a failing Dockerfile fails at
// build, a missing commit at clone, a missing Dockerfile at detect. The builder image itself and
// the Python and Go bases are built by hack/berth-images.ts. buildkitd's TCP listener (what build
// Jobs reach) answers only a client with the platform's certificate, and the program builds
// through it with the Job's variables of mutual TLS.
import test from "ava";
import { spawn } from "node:child_process";
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { lookup } from "node:dns/promises";
import { hostname, tmpdir } from "node:os";
import { join } from "node:path";
import { BERTH_IMAGES, buildBerthImages, type BerthImage } from "../../hack/berth-images.ts";
import { IMAGES } from "../../hack/images.ts";
import { REAL_NODE_SELECTOR, REAL_NODE_TOLERATIONS } from "../../hack/lib/local-values.ts";
import { readBuildkitClient } from "../../hack/lib/buildkit-tls.ts";
import { Registry } from "../../hack/lib/registry.ts";
import type { BuildResult } from "../../operator/builder/main.ts";
import { resultOfLine } from "../../operator/release/build-log.ts";
import { OutboundPolicy } from "../../kube/addresses.ts";
import { binPath, kubectl, root, run } from "../helpers/binaries.ts";
import { startGitServer, type GitServer } from "../helpers/git-http.ts";
import { deleteNamespace, eventually, kube, uniqueName } from "../helpers/kube.ts";
import { need } from "../helpers/e2e.ts";
import { KubeClient } from "../../kube/client.ts";
import { readRegistryKey } from "../../kube/registry-credentials.ts";
import { REGISTRY_PULL_SECRET, registryPullSecret } from "../../operator/kit/registry-pull.ts";
import { issueCertificate, makeCa } from "../helpers/certificates.ts";

const REGISTRY = need("BERTH_REGISTRY");
const BUILDKIT = need("BERTH_BUILDKIT_ADDR");
/** buildkitd's TCP listener from the host (build Jobs reach it through the node's bridge), and hack's client certificate for it. */
const BUILDKIT_TCP = need("BERTH_BUILDKIT_TCP_ADDR");
const BUILDKIT_TLS_DIR = need("BERTH_BUILDKIT_TLS_DIR");
const registry = new Registry(REGISTRY);
const CREDENTIALS = { username: "berth-ci", password: `pw-${uniqueName("secret")}` };
const ns = uniqueName("e2e-build");
const k = kube();

let git: GitServer;
let built: Record<"builder" | "python" | "go", BerthImage>;
const dirs: string[] = [];

test.before(async () => {
  const images = await buildBerthImages({
    registry: REGISTRY,
    addr: BUILDKIT,
    components: ["builder", "python", "go"],
    log: (l) => console.log(`[berth-images] ${l}`),
  });
  built = Object.fromEntries(images.map((i) => [i.component, i])) as typeof built;
  git = await startGitServer({ auth: CREDENTIALS });
  await k.core.createNamespace({ body: { metadata: { name: ns } } });
  // the namespace's pull credential, as the operator writes it: its builds' images pull only with it
  const key = readRegistryKey(need("BERTH_REGISTRY_AUTH_KEY_FILE"));
  await new KubeClient(k.kc).apply(registryPullSecret(ns, { registry: REGISTRY, key }), "test");
});

test.after.always(async () => {
  await git?.close();
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
  await deleteNamespace(k, ns);
});

interface Run {
  code: number;
  stdout: string;
  result: BuildResult;
}

/** Runs the build program as the Job would, with the contract's environment; the result read back from BERTH_BUILD_RESULT_FILE. */
async function runBuilder(repo: string, commit: string, extra: Record<string, string> = {}): Promise<Run> {
  const ws = mkdtempSync(join(tmpdir(), "berth-builder-ws-"));
  dirs.push(ws);
  const env: Record<string, string> = {
    PATH: process.env.PATH ?? "/usr/bin:/bin",
    BERTH_BUILD_REPO_URL: `${git.url}/${repo}.git`,
    BERTH_BUILD_COMMIT: commit,
    BERTH_BUILD_BRANCH: "main",
    BERTH_BUILD_IMAGE: `${REGISTRY}/apps/${ns}/${repo}`,
    BERTH_BUILD_TAG: commit.slice(0, 12),
    BUILDKIT_HOST: BUILDKIT,
    BERTH_BUILD_REGISTRY_INSECURE: "true",
    BERTH_BUILD_BASE_IMAGES: JSON.stringify({
      node: `${REGISTRY}/${IMAGES.node.name}:${IMAGES.node.tag}`,
      python: `${REGISTRY}/${BERTH_IMAGES.python.name}:${BERTH_IMAGES.python.alias}`,
      go: `${REGISTRY}/${BERTH_IMAGES.go.name}:${BERTH_IMAGES.go.alias}`,
      static: `${REGISTRY}/${IMAGES.node.name}:${IMAGES.node.tag}`,
    }),
    GIT_USERNAME: CREDENTIALS.username,
    GIT_PASSWORD: CREDENTIALS.password,
    BERTH_BUILD_RESULT_FILE: join(ws, "termination-log"),
    BERTH_BUILD_WORKSPACE: ws,
    BERTH_BUILDCTL: binPath("buildctl"),
    ...extra,
  };
  const child = spawn(process.execPath, [join(root, "operator/builder/main.ts")], { env, cwd: ws, stdio: ["ignore", "pipe", "pipe"] });
  let stdout = "";
  child.stdout.on("data", (c: Buffer) => {
    stdout += c.toString();
  });
  child.stderr.on("data", (c: Buffer) => {
    stdout += c.toString();
  });
  const code = await new Promise<number>((resolve) => child.on("close", (c) => resolve(c ?? -1)));
  const text = readFileSync(join(ws, "termination-log"), "utf8");
  if (Buffer.byteLength(text) > 4096) throw new Error("the result is longer than a termination log holds");
  return { code, stdout, result: JSON.parse(text) as BuildResult };
}

function noSecrets(t: { false: (v: boolean, m?: string) => void }, run: Run): void {
  const basic = Buffer.from(`${CREDENTIALS.username}:${CREDENTIALS.password}`).toString("base64");
  t.false(run.stdout.includes(CREDENTIALS.password) || run.stdout.includes(basic), "the log never shows the credentials");
  t.false(JSON.stringify(run.result).includes(CREDENTIALS.password), "nor does the result");
}

/** The image's manifest digest in the registry under its tag equals the result's, and the reference pins it. */
async function inRegistry(t: { is: (a: unknown, b: unknown, m?: string) => void }, run: Run, repo: string, tag: string): Promise<void> {
  if (!run.result.ok) throw new Error(`expected a successful build:\n${run.stdout}`);
  t.is(
    await registry.manifestDigest(`apps/${ns}/${repo}`, tag),
    run.result.digest,
    "the registry has the image under the tag, with the digest of the result",
  );
  t.is(run.result.image, `${REGISTRY}/apps/${ns}/${repo}@${run.result.digest}`);
  t.is(run.result.tag, tag);
}

/** Runs the image as a pod on the real node with PORT=8080 and answers its GET / (through the API server's pod proxy). */
async function serve(image: string, name: string): Promise<string> {
  await k.core.createNamespacedPod({
    namespace: ns,
    body: {
      metadata: { name },
      spec: {
        nodeSelector: { ...REAL_NODE_SELECTOR },
        tolerations: REAL_NODE_TOLERATIONS.map((x) => ({ ...x })),
        imagePullSecrets: [{ name: REGISTRY_PULL_SECRET }],
        containers: [
          {
            name: "app",
            image,
            env: [{ name: "PORT", value: "8080" }],
            ports: [{ containerPort: 8080 }],
            readinessProbe: { httpGet: { path: "/", port: 8080 }, periodSeconds: 1 },
            securityContext: { runAsNonRoot: true, allowPrivilegeEscalation: false },
          },
        ],
      },
    },
  });
  return eventually(
    `${name} to answer on PORT`,
    async () => {
      const r = await kubectl(["get", "--raw", `/api/v1/namespaces/${ns}/pods/${name}:8080/proxy/`]);
      return r.code === 0 ? r.stdout : undefined;
    },
    90_000,
    1000,
  );
}

test.serial(
  "a repository with a Dockerfile (dockerfilePath in a subdirectory): built, pushed, the result has the digest, the commit message and the timings",
  async (t) => {
    const sha = git.repo(
      "with-dockerfile",
      undefined,
      {
        "deploy/Dockerfile": `FROM ${REGISTRY}/${IMAGES.node.name}:${IMAGES.node.tag}\nWORKDIR /app\nCOPY site/hello.txt ./\nCMD ["node", "-e", "console.log(require('fs').readFileSync('hello.txt', 'utf8'))"]\n`,
        "site/hello.txt": "hello from a Dockerfile\n",
      },
      "Add the Dockerfile\n\nWith a body that says why.",
    );
    const run = await runBuilder("with-dockerfile", sha, { BERTH_BUILD_DOCKERFILE: "deploy/Dockerfile" });
    t.is(run.code, 0, run.stdout);
    t.like(run.result, { ok: true, stack: "dockerfile", commitMessage: "Add the Dockerfile\n\nWith a body that says why." });
    await inRegistry(t, run, "with-dockerfile", sha.slice(0, 12));
    if (run.result.ok) t.true(run.result.cloneMs > 0 && run.result.buildMs > 0);
    for (const prefix of ["[clone]", "[detect]", "[build]", "[push]", "[result]"])
      t.true(run.stdout.includes(prefix), `the log has ${prefix} lines`);
    t.deepEqual(
      resultOfLine(run.stdout.trimEnd().split("\n").at(-1)!),
      run.result as unknown,
      "the log's last line carries the termination message's result",
    );
    t.true(
      git.requests.some((r) => r.path.endsWith("/git-upload-pack") && r.authorized),
      "git sent the credentials to the server",
    );
    noSecrets(t, run);
  },
);

test.serial("berth/python:v1 and berth/go:v1 are the images of their content tags", async (t) => {
  t.is(await registry.manifestDigest(BERTH_IMAGES.python.name, "v1"), built.python.digest);
  t.is(await registry.manifestDigest(BERTH_IMAGES.go.name, "v1"), built.go.digest);
});

for (const [stack, sample, start] of [
  ["node", "node-detect", "node server.js"],
  ["python", "python-detect", "python main.py"],
  ["go", "go-detect", "/app/server"],
] as const) {
  test.serial(
    `the ${sample} sample by detection: the plan is logged, the image is pushed and serves its page on PORT on the real node`,
    async (t) => {
      const sha = git.repo(sample, join(root, "samples", sample));
      const run = await runBuilder(sample, sha);
      t.is(run.code, 0, run.stdout);
      t.like(run.result, { ok: true, stack });
      await inRegistry(t, run, sample, sha.slice(0, 12));
      t.true(run.stdout.includes(`[detect] detected ${stack}; start command: ${start}`), run.stdout);
      t.regex(run.stdout, new RegExp(`\\[detect\\] {3}FROM .*berth/${stack}:v1`));
      noSecrets(t, run);
      if (run.result.ok) t.regex(await serve(run.result.image, sample), new RegExp(`^Hello from ${sample}, version 1$`, "m"));
    },
  );
}

test.serial(
  "a Dockerfile whose RUN fails: ok false at step build, with the failing command's output in the message; exit code 1",
  async (t) => {
    const sha = git.repo("failing", undefined, {
      Dockerfile: `FROM ${REGISTRY}/${IMAGES.node.name}:${IMAGES.node.tag}\nRUN echo "the tests fail on purpose" && exit 3\n`,
    });
    const run = await runBuilder("failing", sha, { BERTH_BUILD_DOCKERFILE: "Dockerfile" });
    t.is(run.code, 1);
    t.like(run.result, { ok: false, step: "build", reason: "BuildFailed" });
    if (!run.result.ok) {
      t.regex(run.result.message, /exit code: 3/);
      t.regex(run.result.message, /the tests fail on purpose/);
    }
    t.deepEqual(resultOfLine(run.stdout.trimEnd().split("\n").at(-1)!), run.result as unknown, "a failure's result ends the log too");
    t.is(await registry.manifestDigest(`apps/${ns}/failing`, sha.slice(0, 12)), undefined, "nothing was pushed");
  },
);

test.serial(
  "a commit the repository does not have: ok false at step clone (CommitNotFound); a missing Dockerfile: at detect",
  async (t) => {
    git.repo("present", undefined, { "index.html": "<p>hi</p>" });
    const missing = await runBuilder("present", "0123456789abcdef0123456789abcdef01234567");
    t.is(missing.code, 1);
    t.like(missing.result, { ok: false, step: "clone", reason: "CommitNotFound" });
    noSecrets(t, missing);
    const sha = git.repo("no-dockerfile", undefined, { "README.md": "nothing to build" });
    const noDockerfile = await runBuilder("no-dockerfile", sha, { BERTH_BUILD_DOCKERFILE: "build/Dockerfile" });
    t.like(noDockerfile.result, { ok: false, step: "detect", reason: "DockerfileNotFound" });
    const nothing = await runBuilder("no-dockerfile", sha);
    t.like(nothing.result, { ok: false, step: "detect", reason: "StackNotDetected" });
    const wrong = await runBuilder("no-dockerfile", sha, { GIT_PASSWORD: "wrong" });
    t.like(wrong.result, { ok: false, step: "clone", reason: "AuthenticationFailed" });
  },
);

test.serial(
  "the registry cache: a build exports its App's cache next to its images (an OCI manifest of BuildKit's cache config), the next one imports it",
  async (t) => {
    const from = `FROM ${REGISTRY}/${IMAGES.node.name}:${IMAGES.node.tag}\nWORKDIR /app\nRUN echo ${uniqueName("layer")} > stamp\nCOPY page.txt ./\nCMD ["node", "-e", "console.log(1)"]\n`;
    const first = git.repo("cached", undefined, { Dockerfile: from, "page.txt": "one\n" }, "One");
    const ref = `${REGISTRY}/apps/${ns}/cached:buildcache`;
    const run1 = await runBuilder("cached", first, { BERTH_BUILD_CACHE_REF: ref });
    t.is(run1.code, 0, run1.stdout);
    await inRegistry(t, run1, "cached", first.slice(0, 12));
    t.regex(run1.stdout, /exporting cache to registry/);
    const cache = await registry.getManifest(`apps/${ns}/cached`, "buildcache");
    t.is(
      (JSON.parse(cache.bytes.toString()) as { config: { mediaType: string } }).config.mediaType,
      "application/vnd.buildkit.cacheconfig.v0",
      "the cache, not an image, under the cache tag",
    );
    t.is(await registry.manifestDigest(`apps/${ns}/with-dockerfile`, "buildcache"), undefined, "without a cache ref, no registry cache");

    // the App's next commit (a repository of its own here: the helper makes one per commit)
    const second = git.repo("cached-next", undefined, { Dockerfile: from, "page.txt": "two\n" }, "Two");
    const run2 = await runBuilder("cached-next", second, { BERTH_BUILD_CACHE_REF: ref });
    t.is(run2.code, 0, run2.stdout);
    await inRegistry(t, run2, "cached-next", second.slice(0, 12));
    t.true(run2.stdout.includes(`importing cache manifest from ${ref}`), run2.stdout);
    noSecrets(t, run2);
  },
);

test.serial("a static site by detection: served by the static server from the node base", async (t) => {
  const sha = git.repo("static-site", undefined, { "index.html": "<h1>static, version 1</h1>\n", ".secret": "no" });
  const run = await runBuilder("static-site", sha);
  t.is(run.code, 0, run.stdout);
  t.like(run.result, { ok: true, stack: "static" });
  if (run.result.ok) t.regex(await serve(run.result.image, "static-site"), /static, version 1/);
});

test.serial(
  "the builder image: non-root, its entrypoint the build program, with git and buildctl; nothing but operator/builder of the code",
  async (t) => {
    const manifest = JSON.parse((await registry.getManifest(BERTH_IMAGES.builder.name, built.builder.tag)).bytes.toString()) as {
      config: { digest: `sha256:${string}` };
    };
    const config = JSON.parse((await registry.getBlob(BERTH_IMAGES.builder.name, manifest.config.digest)).toString()) as {
      config: { User?: string; Entrypoint?: string[]; WorkingDir?: string };
    };
    t.is(config.config.User, "10001:10001");
    t.deepEqual(config.config.Entrypoint, ["node", "/app/operator/builder/main.ts"]);
    t.is(config.config.WorkingDir, "/workspace");
    // In a pod on the real node: the tools answer, as the image's user.
    await k.core.createNamespacedPod({
      namespace: ns,
      body: {
        metadata: { name: "builder-tools" },
        spec: {
          restartPolicy: "Never",
          nodeSelector: { ...REAL_NODE_SELECTOR },
          tolerations: REAL_NODE_TOLERATIONS.map((x) => ({ ...x })),
          containers: [
            {
              name: "b",
              image: built.builder.reference,
              command: [
                "/bin/sh",
                "-c",
                "id -u; git --version; buildctl --version; node --version; ls /app; ls /app/operator; ls /app/kube",
              ],
              securityContext: { runAsNonRoot: true },
            },
          ],
        },
      },
    });
    const phase = await eventually(
      "the builder-tools pod to finish",
      async () => {
        const p = await k.core.readNamespacedPod({ namespace: ns, name: "builder-tools" });
        return ["Succeeded", "Failed"].includes(p.status?.phase ?? "") ? p.status!.phase! : undefined;
      },
      90_000,
      1000,
    );
    const logs = await kubectl(["-n", ns, "logs", "builder-tools"]);
    t.is(phase, "Succeeded", logs.stdout + logs.stderr);
    const lines = logs.stdout.trim().split("\n");
    t.is(lines[0], "10001");
    t.regex(lines[1] ?? "", /^git version 2\./);
    t.regex(lines[2] ?? "", /^buildctl github.com\/moby\/buildkit v0\./);
    t.regex(lines[3] ?? "", /^v24\./);
    t.deepEqual(
      lines.slice(4),
      ["compile-cache", "kube", "operator", "package.json", "builder", "addresses.ts"],
      "/app holds Node.js's compile cache, package.json, operator/builder and the address policy (kube/addresses.ts) only",
    );
  },
);

/** A Dockerfile built by buildctl alone, without anything Berth's build program adds (no output). */
async function plainBuild(dockerfile: string): Promise<{ code: number; out: string }> {
  const ctx = mkdtempSync(join(tmpdir(), "berth-plain-"));
  dirs.push(ctx);
  writeFileSync(join(ctx, "Dockerfile"), dockerfile);
  return new Promise((resolve) => {
    const child = spawn(
      binPath("buildctl"),
      [
        "--addr",
        BUILDKIT,
        "build",
        "--frontend",
        "dockerfile.v0",
        "--local",
        `context=${ctx}`,
        "--local",
        `dockerfile=${ctx}`,
        "--progress",
        "plain",
      ],
      { stdio: ["ignore", "pipe", "pipe"] },
    );
    let out = "";
    child.stdout.on("data", (c: Buffer) => {
      out += c.toString();
    });
    child.stderr.on("data", (c: Buffer) => {
      out += c.toString();
    });
    child.on("close", (code) => resolve({ code: code ?? -1, out }));
  });
}

test.serial(
  "FROM another workspace's build is refused (ImageNotAllowed); FROM the workspace's own builds and the base images is not",
  async (t) => {
    // the victim's build: an image under apps/<ns>/
    const secret = uniqueName("victim-secret");
    const victimSha = git.repo("from-victim", undefined, {
      Dockerfile: `FROM ${REGISTRY}/${IMAGES.node.name}:${IMAGES.node.tag}\nRUN echo "${secret}" > /tmp/secret.txt\n`,
    });
    const victim = await runBuilder("from-victim", victimSha);
    if (!victim.result.ok) throw new Error(victim.stdout);
    const stolen = `FROM ${victim.result.image}\nRUN cat /tmp/secret.txt\n`;
    // the protection off: BuildKit itself pulls it for anyone
    const plain = await plainBuild(stolen);
    t.is(plain.code, 0, plain.out);
    t.true(plain.out.includes(secret), plain.out);
    // another workspace's build (its image under apps/<other namespace>/) is refused before any step runs
    const thiefSha = git.repo("from-thief", undefined, { Dockerfile: stolen });
    const thief = await runBuilder("from-thief", thiefSha, { BERTH_BUILD_IMAGE: `${REGISTRY}/apps/${uniqueName("other-ws")}/thief` });
    t.not(thief.code, 0);
    t.like(thief.result, { ok: false, step: "build", reason: "ImageNotAllowed" });
    t.false(thief.stdout.includes(secret), "no step ran on the victim's image");
    // the same Dockerfile in the victim's own workspace builds
    const own = await runBuilder("from-thief", thiefSha);
    t.is(own.code, 0, own.stdout);
  },
);

test.serial(
  "a Dockerfile's cache mounts are its App's own: another App's build naming the same cache id neither reads nor plants in it (one namespace shares them)",
  async (t) => {
    const id = uniqueName("shared-cache");
    const base = `FROM ${REGISTRY}/${IMAGES.node.name}:${IMAGES.node.tag}\n`;
    // A fills its cache; B, whatever it names, prints what it finds there (in the build log)
    // (BuildKit leaves cache ids out of a step's cache key: the commands name the id, so that no step is a cache hit of an earlier run)
    const plant = git.repo("cache-victim", undefined, {
      Dockerfile: `${base}RUN --mount=type=cache,id=${id},target=/c,uid=10001 echo "planted ${id}" > /c/planted\n`,
    });
    const peek = (n: number) =>
      git.repo(`cache-attacker-${n}`, undefined, {
        Dockerfile: `${base}RUN --mount=type=cache,id=${id},target=/c,uid=10001 echo "run ${n} of ${id}: found [$(cat /c/planted 2>/dev/null || echo nothing)]"\n`,
      });
    const victim = await runBuilder("cache-victim", plant, { BERTH_BUILD_CACHE_SCOPE: "victimscope0001" });
    t.is(victim.code, 0, victim.stdout);

    // the protection off: B's build in A's cache namespace (as every build was before) reads A's file
    const shared = await runBuilder("cache-attacker-1", peek(1), { BERTH_BUILD_CACHE_SCOPE: "victimscope0001" });
    t.is(shared.code, 0, shared.stdout);
    t.true(shared.stdout.includes(`run 1 of ${id}: found [planted ${id}]`), shared.stdout);

    // each App in its own namespace: B finds nothing under the same id
    const own = await runBuilder("cache-attacker-2", peek(2), { BERTH_BUILD_CACHE_SCOPE: "attackerscope01" });
    t.is(own.code, 0, own.stdout);
    t.true(own.stdout.includes(`run 2 of ${id}: found [nothing]`), own.stdout);
  },
);

test.serial(
  "a # syntax= directive cannot bring another frontend into the daemon: the built-in one builds it, and the log says so",
  async (t) => {
    const evil = `${REGISTRY}/${uniqueName("evil-frontend")}:1`; // no such image: forwarding to it fails
    const dockerfile = `# syntax=${evil}\nFROM ${REGISTRY}/${IMAGES.node.name}:${IMAGES.node.tag}\nRUN echo built-in\n`;
    const sha = git.repo("syntax-directive", undefined, { Dockerfile: dockerfile });
    const run = await runBuilder("syntax-directive", sha);
    t.is(run.code, 0, run.stdout);
    t.true(run.stdout.includes(`[detect] the Dockerfile asks for the frontend ${evil} (# syntax=)`), run.stdout);
    // the protection off: buildctl without the pinned frontend forwards to the directive's image
    const plain = await plainBuild(dockerfile);
    t.not(plain.code, 0);
    t.true(plain.out.includes(evil.split(":")[0]!.split("/").slice(1).join("/")) || plain.out.includes(evil), plain.out);
  },
);

test.serial(
  "a RUN step reaches neither PostgreSQL nor the API server on buildkitd's host, by a raw connection or through BuildKit's proxy; with BERTH_BUILD_NETWORK=daemon it did",
  async (t) => {
    const pg = Number(need("BERTH_PG_PORT"));
    const apiServer = new URL(kube().kc.getCurrentCluster()!.server);
    // The machine's own name: BuildKit's source policy judges URLs and lets a name through; it
    // resolves to one of this host's addresses (127.0.0.1 here), where the API server listens.
    const host = hostname();
    const addresses = await lookup(host, { all: true });
    t.true(
      addresses.every((a) => new OutboundPolicy().permits(a.address) === false),
      `${host} resolves to ${addresses.map((a) => a.address).join(", ")}`,
    );
    const run = uniqueName("net"); // in the commands: no step is a cache hit of an earlier run
    const probe =
      [
        `FROM ${REGISTRY}/${IMAGES.node.name}:${IMAGES.node.tag}`,
        // a raw connection, as a Dockerfile's `net.connect(<PostgreSQL>)` reached the platform's database
        // when RUN steps shared buildkitd's network
        `RUN node -e 'const s = require("net").connect(${pg}, "127.0.0.1"); s.on("connect", () => { console.log("${run} pg OPEN"); process.exit(0); }); s.on("error", (e) => { console.log("${run} pg " + e.code); process.exit(0); })'`,
        // an HTTP request to the API server through whatever proxy the step is given (none: directly)
        `RUN node -e 'const p = process.env.HTTP_PROXY ? new URL(process.env.HTTP_PROXY) : undefined; const r = require("http").request(p ? { host: p.hostname, port: p.port, path: "http://127.0.0.1:${apiServer.port}/version" } : { host: "127.0.0.1", port: ${apiServer.port}, path: "/version" }, (res) => { console.log("${run} api " + res.statusCode); process.exit(0); }); r.on("error", (e) => { console.log("${run} api " + e.code); process.exit(0); }); r.end()'`,
        // the same by the machine's name, which the source policy cannot judge
        `RUN node -e 'const p = process.env.HTTP_PROXY ? new URL(process.env.HTTP_PROXY) : undefined; const r = require("http").request(p ? { host: p.hostname, port: p.port, path: "http://${host}:${apiServer.port}/version" } : { host: "${host}", port: ${apiServer.port}, path: "/version" }, (res) => { console.log("${run} byname " + res.statusCode); process.exit(0); }); r.on("error", (e) => { console.log("${run} byname " + e.code); process.exit(0); }); r.end()'`,
      ].join("\n") + "\n";
    const sha = git.repo("run-network", undefined, { Dockerfile: probe });

    // the protection off: RUN steps on buildkitd's own network (the host's, here)
    const open = await runBuilder("run-network", sha, { BERTH_BUILD_NETWORK: "daemon" });
    t.is(open.code, 0, open.stdout);
    t.true(open.stdout.includes(`${run} pg OPEN`), open.stdout);
    t.regex(open.stdout, new RegExp(`${run} api (400|200|401|403)`), "the API server answered (plain HTTP to its TLS port is a 400)");
    // (by name, a step's own container may not know the host's name: buildkitd, on the host, does)

    // the default: only BuildKit's proxy, which goes nowhere private
    const run2 = run.replace("net-", "net2-");
    const closed = await runBuilder("run-network-2", git.repo("run-network-2", undefined, { Dockerfile: probe.replaceAll(run, run2) }));
    t.is(closed.code, 0, closed.stdout);
    t.regex(closed.stdout, new RegExp(`${run2} pg (ECONNREFUSED|EHOSTUNREACH|ENETUNREACH|ETIMEDOUT)`));
    t.true(closed.stdout.includes(`${run2} api 403`), closed.stdout);
    // by name: past the source policy, BuildKit's proxy resolved it to this host, where the API
    // server answers; the builds' egress proxy refused it (its log says why)
    t.true(closed.stdout.includes(`${run2} byname 403`), closed.stdout);
    const egressLog = readFileSync(need("BERTH_BUILD_EGRESS_LOG"), "utf8");
    t.true(egressLog.includes(`refused ${host}:${apiServer.port}: ${host} resolves to a refused address`), egressLog.slice(-2000));
  },
);

// ---- mutual TLS on buildkitd's TCP listener (docs/builds.md "mTLS") ----

/** `buildctl debug workers` at `addr` with these global flags: the workers buildkitd lists (undefined when it listed none), and all output. */
async function workers(addr: string, flags: string[] = []): Promise<{ code: number; workers: { ID: string }[] | undefined; out: string }> {
  const r = await run(binPath("buildctl"), ["--addr", addr, ...flags, "debug", "workers", "--format", "{{json .}}"], { timeoutMs: 60_000 });
  let listed: unknown;
  try {
    listed = JSON.parse(r.stdout);
  } catch {
    listed = undefined;
  }
  return {
    code: r.code,
    workers: Array.isArray(listed) && listed.length ? (listed as { ID: string }[]) : undefined,
    out: r.stdout + r.stderr,
  };
}

/** A client certificate of another CA, with the same subjects as the platform's: what a tenant could make. Written to files, as buildctl reads them. */
function foreignClient(): { cert: string; key: string } {
  const d = mkdtempSync(join(tmpdir(), "berth-foreign-ca-"));
  dirs.push(d);
  const leaf = issueCertificate(makeCa("berth-local-buildkit-ca"), { client: { commonName: "berth-build" } });
  writeFileSync(join(d, "tls.crt"), leaf.cert);
  writeFileSync(join(d, "tls.key"), leaf.key, { mode: 0o600 });
  return { cert: join(d, "tls.crt"), key: join(d, "tls.key") };
}

test.serial(
  "buildkitd's TCP listener answers only the platform's client certificate: not a plain client, not one that checks the server alone, not one with another CA's certificate; a listener without TLS (the unix socket) answers anyone who reaches it",
  async (t) => {
    // the protection off: a listener without TLS lists its workers (and would run solves) for any client
    const open = await workers(BUILDKIT);
    t.is(open.code, 0, open.out);
    t.truthy(open.workers, open.out);

    // the TCP listener, as a client on the network without Berth's certificate tries it
    const plain = await workers(BUILDKIT_TCP);
    t.not(plain.code, 0, "a plain gRPC client is refused");
    t.is(plain.workers, undefined, plain.out);
    const serverOnly = await workers(BUILDKIT_TCP, ["--tlscacert", join(BUILDKIT_TLS_DIR, "ca.crt")]);
    t.not(serverOnly.code, 0, "TLS without a client certificate is refused");
    t.is(serverOnly.workers, undefined, serverOnly.out);
    // (TLS 1.3: the refusal comes after the client's side of the handshake, as the server's alert
    // or as the client's next write failing)
    t.regex(serverOnly.out, /tls: |broken pipe|connection reset by peer/, serverOnly.out);
    const foreign = foreignClient();
    const forged = await workers(BUILDKIT_TCP, [
      "--tlscacert",
      join(BUILDKIT_TLS_DIR, "ca.crt"),
      "--tlscert",
      foreign.cert,
      "--tlskey",
      foreign.key,
    ]);
    t.not(forged.code, 0, "a certificate of another CA, whatever its subject, is refused");
    t.is(forged.workers, undefined, forged.out);
    // TLS 1.3: the server checks the client's certificate after the client's side of the handshake
    // ended, so the client sees either the server's alert or its next write fail
    t.regex(forged.out, /tls: |broken pipe|connection reset by peer/, forged.out);

    // the platform's client certificate (the Secret berth-buildkit-client's keys): the same daemon answers
    const berth = await workers(BUILDKIT_TCP, ["--tlsdir", BUILDKIT_TLS_DIR]);
    t.is(berth.code, 0, berth.out);
    t.deepEqual(
      berth.workers?.map((w) => w.ID),
      open.workers?.map((w) => w.ID),
    );
  },
);

test.serial(
  "the build program through the TCP listener: with the Job's variables of mutual TLS it builds and pushes, the key in no log line and no file left; without them, or with another CA's certificate, buildkitd refuses it before any step (BuilderUnavailable)",
  async (t) => {
    const sha = git.repo("over-mtls", undefined, {
      Dockerfile: `FROM ${REGISTRY}/${IMAGES.node.name}:${IMAGES.node.tag}\nRUN echo ${uniqueName("mtls")} > /tmp/stamp\n`,
    });
    const client = readBuildkitClient(BUILDKIT_TLS_DIR);
    const tls = {
      BUILDKIT_HOST: BUILDKIT_TCP,
      BERTH_BUILDKIT_TLS_CA: client.ca,
      BERTH_BUILDKIT_TLS_CERT: client.cert,
      BERTH_BUILDKIT_TLS_KEY: client.key,
    };
    // (the program's /tmp: runBuilder gives it no TMPDIR)
    const before = new Set(readdirSync("/tmp").filter((n) => n.startsWith("berth-buildkit-tls-")));
    const built = await runBuilder("over-mtls", sha, tls);
    t.is(built.code, 0, built.stdout);
    await inRegistry(t, built, "over-mtls", sha.slice(0, 12));
    t.true(built.stdout.includes(`on ${BUILDKIT_TCP} over mutual TLS`), built.stdout);
    const keyBody = client.key.split("\n").filter((l) => l && !l.startsWith("-----"));
    t.false(
      keyBody.some((l) => built.stdout.includes(l)) || JSON.stringify(built.result).includes(keyBody[0]!),
      "the key is in no log line and not in the result",
    );
    noSecrets(t, built);
    const left = readdirSync("/tmp").filter((n) => n.startsWith("berth-buildkit-tls-") && !before.has(n));
    t.deepEqual(left, [], "the TLS files are removed once buildctl ends");

    // the protection off on the listener's side is shown above; here the Job's side without the certificate
    const plain = await runBuilder("over-mtls", sha, { BUILDKIT_HOST: BUILDKIT_TCP });
    t.is(plain.code, 1, plain.stdout);
    t.like(plain.result, { ok: false, step: "build", reason: "BuilderUnavailable" });
    const foreign = foreignClient();
    const forged = await runBuilder("over-mtls", sha, {
      ...tls,
      BERTH_BUILDKIT_TLS_CERT: readFileSync(foreign.cert, "utf8"),
      BERTH_BUILDKIT_TLS_KEY: readFileSync(foreign.key, "utf8"),
    });
    t.is(forged.code, 1, forged.stdout);
    t.like(forged.result, { ok: false, step: "build", reason: "BuilderUnavailable" });
    if (!forged.result.ok) t.regex(forged.result.message, /refused the connection's TLS|could not be reached/);
  },
);
