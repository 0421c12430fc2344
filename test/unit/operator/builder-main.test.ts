// The build program's pure parts (operator/builder/main.ts, config.ts): the configuration read from
// the contract's environment, git's commands and environment (credentials only ever in the
// environment), buildctl's arguments (and its files of mutual TLS to buildkitd), what failures
// mean, and the result as the termination log holds it. test/e2e/builder.test.ts runs the program against real git, BuildKit and a registry.
import test from "ava";
import { mkdtempSync, readFileSync, rmSync, statSync, existsSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ConfigError, parseConfig, safeRelativePath } from "../../../operator/builder/config.ts";
import type { BuildResult } from "../../../operator/builder/main.ts";
import {
  buildctlArgs,
  buildctlEnv,
  buildctlTlsArgs,
  writeTlsFiles,
  cacheMountNamespace,
  PRIVATE_URL,
  sourcePolicy,
  syntaxDirective,
  buildFailure,
  cloneFailure,
  COMMIT_MESSAGE_MAX,
  failureOf,
  gitCommands,
  gitEnv,
  logLine,
  RESULT_MAX_BYTES,
  resultJson,
  truncate,
} from "../../../operator/builder/main.ts";
import { resultOfLine } from "../../../operator/release/build-log.ts";
import { scopeCacheIds } from "../../../operator/builder/detect.ts";
import { cacheScopeOf } from "../../../operator/release/builders.ts";

const SHA = "0123456789abcdef0123456789abcdef01234567";
const ENV = {
  PATH: "/usr/bin",
  BUILDKIT_HOST: "tcp://10.0.0.1:1234",
  BERTH_BUILD_REPO_URL: "https://git.example.com/team/app.git",
  BERTH_BUILD_COMMIT: SHA,
  BERTH_BUILD_BRANCH: "feature/x",
  BERTH_BUILD_IMAGE: "127.0.0.1:5000/apps/ns/app",
  BERTH_BUILD_TAG: SHA.slice(0, 12),
  BERTH_BUILD_REGISTRY_INSECURE: "true",
  BERTH_BUILD_BASE_IMAGES: JSON.stringify({ node: "reg/berth/node:v1", python: "reg/berth/python:v1", ruby: "x", go: "" }),
  GIT_USERNAME: "bot",
  GIT_PASSWORD: "hunter2-secret",
};

const configError = (env: Record<string, string | undefined>) => {
  try {
    parseConfig(env);
  } catch (err) {
    if (err instanceof ConfigError) return { step: err.step, message: err.message };
    throw err;
  }
  return undefined;
};

test("the configuration: the contract's variables, defaults for the optional ones, only known stacks' non-empty base images", (t) => {
  const c = parseConfig(ENV);
  t.like(c, {
    repoUrl: ENV.BERTH_BUILD_REPO_URL,
    commit: SHA,
    branch: "feature/x",
    dockerfile: undefined,
    image: ENV.BERTH_BUILD_IMAGE,
    tag: SHA.slice(0, 12),
    insecure: true,
    resultFile: "/dev/termination-log",
    workspace: "/workspace",
    buildctl: "buildctl",
  });
  t.deepEqual(c.baseImages, { node: "reg/berth/node:v1", python: "reg/berth/python:v1" });
  t.deepEqual(c.credentials, { username: "bot", password: "hunter2-secret" });
  t.deepEqual(
    c.environment,
    { PATH: "/usr/bin", BUILDKIT_HOST: "tcp://10.0.0.1:1234" },
    "only what the commands need is inherited: no BERTH_ or GIT_ variable",
  );
  t.like(
    parseConfig({
      ...ENV,
      BERTH_BUILD_DOCKERFILE: "./docker/Dockerfile.prod",
      BERTH_BUILD_REGISTRY_INSECURE: "",
      GIT_USERNAME: undefined,
      GIT_PASSWORD: undefined,
    }),
    { dockerfile: "docker/Dockerfile.prod", insecure: false, credentials: undefined },
  );
  t.like(
    parseConfig({ ...ENV, GIT_USERNAME: undefined }),
    { credentials: { username: "", password: "hunter2-secret" } },
    "a token alone is a password",
  );
  t.is(c.cacheRef, undefined);
  t.is(
    parseConfig({ ...ENV, BERTH_BUILD_CACHE_REF: "127.0.0.1:5000/apps/ns/app:buildcache" }).cacheRef,
    "127.0.0.1:5000/apps/ns/app:buildcache",
  );
  t.is(parseConfig({ ...ENV, BERTH_BUILD_CACHE_REF: "app:buildcache" }).cacheRef, "app:buildcache");
  for (const bad of [
    "127.0.0.1:5000/apps/app",
    "reg/app@sha256:00",
    "reg/app:cache,mode=min",
    "reg/a,b:cache",
    "reg/app:a b",
    "reg/app:-x",
    ":cache",
    "reg/app",
  ]) {
    t.like(configError({ ...ENV, BERTH_BUILD_CACHE_REF: bad }), { step: "build" }, bad);
  }
});

test("a bad configuration names its step and what is wrong", (t) => {
  t.like(configError({ ...ENV, BERTH_BUILD_REPO_URL: "" }), { step: "clone", message: "BERTH_BUILD_REPO_URL is not set" });
  t.like(configError({ ...ENV, BERTH_BUILD_REPO_URL: "git@github.com:a/b.git" }), { step: "clone" });
  t.like(configError({ ...ENV, BERTH_BUILD_REPO_URL: "ssh://github.com/a/b.git" }), { step: "clone" });
  t.regex(configError({ ...ENV, BERTH_BUILD_REPO_URL: "https://u:p@github.com/a/b.git" })!.message, /must not carry credentials/);
  t.like(configError({ ...ENV, BERTH_BUILD_COMMIT: "main" }), { step: "clone" });
  t.like(configError({ ...ENV, BERTH_BUILD_COMMIT: SHA.slice(0, 12) }), { step: "clone" });
  t.like(configError({ ...ENV, BERTH_BUILD_DOCKERFILE: "../Dockerfile" }), { step: "detect" });
  t.like(configError({ ...ENV, BERTH_BUILD_DOCKERFILE: "/etc/passwd" }), { step: "detect" });
  t.like(configError({ ...ENV, BERTH_BUILD_BASE_IMAGES: "{" }), { step: "detect" });
  t.like(configError({ ...ENV, BERTH_BUILD_BASE_IMAGES: "[]" }), { step: "detect" });
  t.like(configError({ ...ENV, BERTH_BUILD_IMAGE: "127.0.0.1:5000/apps/ns/app:v1" }), { step: "build" });
  t.like(configError({ ...ENV, BERTH_BUILD_IMAGE: "127.0.0.1:5000/apps/ns/app@sha256:00" }), { step: "build" });
  t.like(
    configError({ ...ENV, BERTH_BUILD_IMAGE: "127.0.0.1:5000/apps/ns/a,push=false" }),
    { step: "build" },
    "nothing that would change buildctl's output options",
  );
  t.like(configError({ ...ENV, BERTH_BUILD_TAG: "a b" }), { step: "build" });
  t.is(configError({ ...ENV, BERTH_BUILD_IMAGE: "registry.example.com:443/apps/ns/app" }), undefined, "a registry's port is not a tag");
  t.true(safeRelativePath("a/b/Dockerfile"));
  t.false(safeRelativePath("a/../../b"));
  t.false(safeRelativePath("a\\b"));
});

test("git: exactly the commit, shallow, into a bare repository checked out beside it; no argument carries a credential", (t) => {
  const c = parseConfig(ENV);
  const cmds = gitCommands(c, "/ws/repo.git", "/ws/src");
  t.deepEqual(cmds, [
    ["init", "--quiet", "--bare", "/ws/repo.git"],
    ["--git-dir", "/ws/repo.git", "remote", "add", "origin", "https://git.example.com/team/app.git"],
    ["--git-dir", "/ws/repo.git", "fetch", "--quiet", "--depth", "1", "--no-tags", "origin", SHA],
    ["--git-dir", "/ws/repo.git", "--work-tree", "/ws/src", "checkout", "--quiet", "--force", SHA, "--", "."],
  ]);
  const basic = Buffer.from("bot:hunter2-secret").toString("base64");
  for (const arg of cmds.flat()) t.false(arg.includes("hunter2") || arg.includes(basic) || arg.includes("bot"), arg);
});

test("git's environment: the credentials as an http.extraHeader through GIT_CONFIG_*, its own HOME, no prompts or global configuration", (t) => {
  const env = gitEnv({ PATH: "/usr/bin", HTTPS_PROXY: "http://proxy:3128", BUILDKIT_HOST: "tcp://x" }, "/ws/home", {
    username: "bot",
    password: "hunter2-secret",
  });
  t.like(env, {
    PATH: "/usr/bin",
    HTTPS_PROXY: "http://proxy:3128",
    HOME: "/ws/home",
    GIT_CONFIG_NOSYSTEM: "1",
    GIT_CONFIG_GLOBAL: "/dev/null",
    GIT_TERMINAL_PROMPT: "0",
    GIT_CONFIG_COUNT: "1",
    GIT_CONFIG_KEY_0: "http.extraHeader",
    GIT_CONFIG_VALUE_0: `Authorization: Basic ${Buffer.from("bot:hunter2-secret").toString("base64")}`,
  });
  t.false("BUILDKIT_HOST" in env);
  const anonymous = gitEnv({ PATH: "/usr/bin" }, "/ws/home", undefined);
  t.false("GIT_CONFIG_COUNT" in anonymous || "GIT_CONFIG_VALUE_0" in anonymous);
});

test("buildctl: the dockerfile frontend, the checkout as context, a push with the metadata file; plain HTTP only when configured; no credential in its arguments or environment", (t) => {
  const c = parseConfig(ENV);
  const input = {
    context: "/ws/src",
    dockerfileDir: "/ws/src/docker",
    dockerfileName: "Dockerfile.prod",
    metadataFile: "/ws/plan/metadata.json",
  };
  t.deepEqual(buildctlArgs({ ...c, cacheScope: "0123456789abcdef" }, input), [
    "build",
    "--frontend",
    "dockerfile.v0",
    "--progress",
    "plain",
    "--local",
    "context=/ws/src",
    "--local",
    "dockerfile=/ws/src/docker",
    "--opt",
    "filename=Dockerfile.prod",
    "--opt",
    "build-arg:BUILDKIT_CACHE_MOUNT_NS=berth/0123456789abcdef",
    "--opt",
    "cmdline=",
    "--proxy-network",
    "--output",
    `type=image,name=127.0.0.1:5000/apps/ns/app:${SHA.slice(0, 12)},push=true,oci-mediatypes=true,registry.insecure=true`,
    "--metadata-file",
    "/ws/plan/metadata.json",
  ]);
  t.false(
    buildctlArgs({ ...c, insecure: false }, input)
      .join(" ")
      .includes("insecure"),
  );
  t.false(
    buildctlArgs(c, input).some((a) => a.includes("cache")),
    "no cache ref: buildkitd's own cache only",
  );
  const ref = "127.0.0.1:5000/apps/ns/app:buildcache";
  const cached = buildctlArgs({ ...c, cacheRef: ref }, input);
  t.deepEqual(cached.slice(cached.indexOf("--import-cache"), cached.indexOf("--metadata-file")), [
    "--import-cache",
    `type=registry,ref=${ref},registry.insecure=true`,
    "--export-cache",
    `type=registry,ref=${ref},mode=max,oci-mediatypes=true,image-manifest=true,ignore-error=true,registry.insecure=true`,
  ]);
  t.false(
    buildctlArgs({ ...c, cacheRef: ref, insecure: false }, input)
      .join(" ")
      .includes("insecure"),
  );
  const env = buildctlEnv({ ...c.environment, GIT_CONFIG_VALUE_0: "Authorization: Basic x" }, "/ws/home");
  t.deepEqual(env, { PATH: "/usr/bin", BUILDKIT_HOST: "tcp://10.0.0.1:1234", HOME: "/ws/home", DOCKER_CONFIG: "/ws/home/.docker" });
  t.false(JSON.stringify(buildctlArgs(c, input)).includes("hunter2"));
});

// Mutual TLS to buildkitd (docs/builds.md "mTLS"): PEM texts the build Job gets from the Secret
// berth-buildkit-client by secretKeyRef. These stand in for them; the key's text is a marker that
// must never show up anywhere but in its file.
const KEY_MARKER = "the-client-key-material";
const TLS_ENV = {
  BERTH_BUILDKIT_TLS_CA: "-----BEGIN CERTIFICATE-----\nMIIBcaCA\n-----END CERTIFICATE-----\n",
  BERTH_BUILDKIT_TLS_CERT: "-----BEGIN CERTIFICATE-----\nMIIBclient\n-----END CERTIFICATE-----",
  BERTH_BUILDKIT_TLS_KEY: `-----BEGIN PRIVATE KEY-----\n${KEY_MARKER}\n-----END PRIVATE KEY-----\n`,
};

test("mutual TLS to buildkitd: the CA, the certificate and the key together, each ending in a newline; none of them keeps plain TCP", (t) => {
  t.is(parseConfig(ENV).tls, undefined, "no variable: buildctl as before");
  const c = parseConfig({ ...ENV, ...TLS_ENV });
  t.deepEqual(c.tls, {
    ca: TLS_ENV.BERTH_BUILDKIT_TLS_CA,
    cert: `${TLS_ENV.BERTH_BUILDKIT_TLS_CERT}\n`,
    key: TLS_ENV.BERTH_BUILDKIT_TLS_KEY,
    serverName: undefined,
  });
  t.is(parseConfig({ ...ENV, ...TLS_ENV, BERTH_BUILDKIT_TLS_SERVER_NAME: "buildkitd.builds.svc" }).tls?.serverName, "buildkitd.builds.svc");
  t.is(
    parseConfig({
      ...ENV,
      ...TLS_ENV,
      BERTH_BUILDKIT_TLS_KEY: `-----BEGIN EC PRIVATE KEY-----\nk\n-----END EC PRIVATE KEY-----`,
    }).tls?.key.startsWith("-----BEGIN EC"),
    true,
  );
  t.false(
    Object.keys(c.environment).some((n) => n.startsWith("BERTH_BUILDKIT_TLS")),
    "the texts are inherited by neither git nor buildctl",
  );
});

test("a bad mutual TLS configuration names the variable at step build, never its text", (t) => {
  const cases: [string, Record<string, string | undefined>, RegExp][] = [
    [
      "the key alone",
      { BERTH_BUILDKIT_TLS_KEY: TLS_ENV.BERTH_BUILDKIT_TLS_KEY },
      /BERTH_BUILDKIT_TLS_CA and BERTH_BUILDKIT_TLS_CERT not set/,
    ],
    ["no key", { ...TLS_ENV, BERTH_BUILDKIT_TLS_KEY: " " }, /BERTH_BUILDKIT_TLS_KEY not set/],
    ["a CA that is no certificate", { ...TLS_ENV, BERTH_BUILDKIT_TLS_CA: "ca" }, /BERTH_BUILDKIT_TLS_CA is not a PEM certificate/],
    [
      "a key in the certificate's place",
      { ...TLS_ENV, BERTH_BUILDKIT_TLS_CERT: TLS_ENV.BERTH_BUILDKIT_TLS_KEY },
      /BERTH_BUILDKIT_TLS_CERT is not a PEM certificate/,
    ],
    [
      "a certificate in the key's place",
      { ...TLS_ENV, BERTH_BUILDKIT_TLS_KEY: TLS_ENV.BERTH_BUILDKIT_TLS_CA },
      /BERTH_BUILDKIT_TLS_KEY is not a PEM private key/,
    ],
    ["a server name without the rest", { BERTH_BUILDKIT_TLS_SERVER_NAME: "buildkitd" }, /BERTH_BUILDKIT_TLS_SERVER_NAME is set without/],
    [
      "a server name with a space",
      { ...TLS_ENV, BERTH_BUILDKIT_TLS_SERVER_NAME: "a b" },
      /BERTH_BUILDKIT_TLS_SERVER_NAME must be a host name/,
    ],
  ];
  for (const [what, env, message] of cases) {
    const e = configError({ ...ENV, ...env });
    t.like(e, { step: "build" }, what);
    t.regex(e?.message ?? "", message, what);
    t.false((e?.message ?? "").includes(KEY_MARKER), `${what}: the key's text is not in the message`);
  }
});

test("buildctl over mutual TLS: the files as its global flags before the command, the server name when set; the texts in no argument or environment", (t) => {
  const c = { ...parseConfig({ ...ENV, ...TLS_ENV }), cacheScope: "0123456789abcdef" };
  const input = { context: "/ws/src", dockerfileDir: "/ws/src", dockerfileName: "Dockerfile", metadataFile: "/ws/plan/metadata.json" };
  const files = {
    dir: "/tmp/berth-buildkit-tls-x",
    ca: "/tmp/berth-buildkit-tls-x/ca.crt",
    cert: "/tmp/berth-buildkit-tls-x/tls.crt",
    key: "/tmp/berth-buildkit-tls-x/tls.key",
  };
  const args = buildctlArgs(c, { ...input, tls: files });
  t.deepEqual(args.slice(0, 7), ["--tlscacert", files.ca, "--tlscert", files.cert, "--tlskey", files.key, "build"]);
  t.deepEqual(args.slice(6), buildctlArgs(c, input), "the build's own arguments are those of plain TCP");
  t.is(buildctlArgs(c, input)[0], "build", "without TLS files, no TLS flag");
  t.deepEqual(buildctlTlsArgs({ ...files, serverName: "buildkitd.builds.svc" }).slice(-2), ["--tlsservername", "buildkitd.builds.svc"]);
  t.deepEqual(buildctlTlsArgs(undefined), []);
  const text = JSON.stringify([args, buildctlEnv(c.environment, "/ws/home")]);
  t.false(text.includes(KEY_MARKER) || text.includes("MIIBclient") || text.includes("MIIBcaCA"));
});

test("the TLS files: a directory of their own under /tmp (outside the build context), each file 0600 holding its text, gone with the directory", async (t) => {
  const parent = mkdtempSync(join(tmpdir(), "berth-tls-test-"));
  try {
    const c = parseConfig({ ...ENV, ...TLS_ENV, BERTH_BUILDKIT_TLS_SERVER_NAME: "10.201.0.1" });
    const files = await writeTlsFiles(c.tls!, parent);
    t.true(files.dir.startsWith(join(parent, "berth-buildkit-tls-")));
    t.is(statSync(files.dir).mode & 0o777, 0o700, "the directory: its user's alone");
    for (const [path, text] of [
      [files.ca, c.tls!.ca],
      [files.cert, c.tls!.cert],
      [files.key, c.tls!.key],
    ] as const) {
      t.is(statSync(path).mode & 0o777, 0o600, `${path} is 0600`);
      t.is(readFileSync(path, "utf8"), text);
    }
    t.true(readFileSync(files.key, "utf8").includes(KEY_MARKER));
    t.is(files.serverName, "10.201.0.1");
    t.deepEqual(buildctlTlsArgs(files).slice(-2), ["--tlsservername", "10.201.0.1"]);
    const again = await writeTlsFiles(c.tls!, parent);
    t.not(again.dir, files.dir, "each build writes its own");
    rmSync(files.dir, { recursive: true, force: true });
    t.false(existsSync(files.key));
  } finally {
    rmSync(parent, { recursive: true, force: true });
  }
});

test("what a failed fetch means", (t) => {
  t.is(cloneFailure("fatal: remote error: upload-pack: not our ref 0123").reason, "CommitNotFound");
  t.is(cloneFailure("fatal: couldn't find remote ref 0123").reason, "CommitNotFound");
  t.is(cloneFailure("fatal: Authentication failed for 'https://x/y.git/'").reason, "AuthenticationFailed");
  t.is(cloneFailure("fatal: could not read Username for 'https://github.com': terminal prompts disabled").reason, "AuthenticationFailed");
  t.is(cloneFailure("remote: Repository not found.\nfatal: repository 'https://x/y.git/' not found").reason, "RepositoryNotFound");
  t.is(cloneFailure("fatal: unable to access 'https://x/': Could not resolve host: x").reason, "RepositoryUnreachable");
  t.is(cloneFailure("fatal: something else").reason, "CloneFailed");
});

test("what a failed build means: the failing step's output and BuildKit's error, the step (build or push) and a reason", (t) => {
  const run = [
    "#1 [internal] load build definition from Dockerfile",
    "#1 DONE 0.0s",
    "#5 [2/2] RUN echo boom && exit 3",
    "#5 0.101 boom",
    '#5 ERROR: process "/bin/sh -c echo boom && exit 3" did not complete successfully: exit code: 3',
    "------",
    " > [2/2] RUN echo boom && exit 3:",
    "0.101 boom",
    "------",
    'error: failed to solve: process "/bin/sh -c echo boom && exit 3" did not complete successfully: exit code: 3',
  ].join("\n");
  const f = buildFailure(run, "reg/apps/a");
  t.like(f, { step: "build", reason: "BuildFailed" });
  t.regex(f.message, /boom/);
  t.regex(f.message, /exit code: 3/);
  t.false(f.message.includes("[internal] load build definition"));
  t.like(
    buildFailure(
      "#8 exporting to image\n#8 pushing layers\n#8 ERROR: failed to push reg/apps/a:t: connection refused\nerror: failed to solve: failed to push reg/apps/a:t: connection refused",
      "reg/apps/a",
    ),
    { step: "push", reason: "PushFailed" },
  );
  t.like(
    buildFailure(
      "#2 [internal] load metadata for reg/x:v1\nerror: failed to solve: reg/x:v1: failed to resolve source metadata for reg/x:v1: not found",
      "reg/apps/a",
    ),
    { step: "build", reason: "BaseImageUnavailable" },
  );
  t.like(buildFailure("error: failed to solve: dockerfile parse error on line 2: unknown instruction: RUNN", "reg/apps/a"), {
    step: "build",
    reason: "DockerfileInvalid",
  });
  t.like(
    buildFailure(
      'error: listing workers: connection error: desc = "transport: Error while dialing: dial tcp 10.0.0.1:1234: connect: connection refused"',
      "reg/apps/a",
    ),
    { step: "build", reason: "BuilderUnavailable" },
  );
  // a plain client at a listener that wants TLS: the connection closed before gRPC's preface
  t.like(buildFailure("error: failed to solve: Unavailable: connection closed before server preface received", "reg/apps/a"), {
    step: "build",
    reason: "BuilderUnavailable",
  });
  // a client certificate refused after TLS 1.3's handshake: the client's next write fails
  for (const cut of [
    "error: failed to solve: Unavailable: write tcp 127.0.0.1:60828->127.0.0.1:26552: write: broken pipe",
    "error: failed to solve: Unavailable: read tcp 10.0.0.2:4000->10.0.0.1:1234: read: connection reset by peer",
  ])
    t.like(buildFailure(cut, "reg/apps/a"), { step: "build", reason: "BuilderUnavailable" }, cut);
  // mutual TLS refused before any step: the platform's certificates, said as such
  for (const tls of [
    'error: listing workers: connection error: desc = "transport: authentication handshake failed: tls: failed to verify certificate: x509: certificate signed by unknown authority"',
    'error: failed to solve: Unavailable: connection error: desc = "error reading server preface: remote error: tls: unknown certificate authority"',
    'error: listing workers: rpc error: code = Unavailable desc = connection error: desc = "error reading server preface: remote error: tls: certificate required"',
  ]) {
    const f = buildFailure(tls, "reg/apps/a");
    t.like(f, { step: "build", reason: "BuilderUnavailable" }, tls);
    t.regex(f.message, /refused the connection's TLS/);
  }
  t.like(
    buildFailure(
      "#2 [internal] load metadata for registry.example.com/x:v1\nerror: failed to solve: registry.example.com/x:v1: failed to resolve source metadata for registry.example.com/x:v1: failed to do request: tls: failed to verify certificate: x509: certificate signed by unknown authority",
      "reg/apps/a",
    ),
    { step: "build", reason: "BaseImageUnavailable" },
    "a registry's certificate during the build is not buildkitd's",
  );
});

test("the result fits the termination log: the commit message cut to about 1000 characters, a failure's message to its end, never over 4096 bytes", (t) => {
  const ok: BuildResult = {
    ok: true,
    image: `reg/a@sha256:${"a".repeat(64)}`,
    digest: `sha256:${"a".repeat(64)}`,
    tag: "t",
    stack: "node",
    commitMessage: "é".repeat(5000),
    cloneMs: 1,
    buildMs: 2,
  };
  const json = resultJson(ok);
  t.true(Buffer.byteLength(json) <= RESULT_MAX_BYTES);
  const back = JSON.parse(json) as BuildResult & { ok: true };
  t.true([...back.commitMessage].length <= COMMIT_MESSAGE_MAX && back.commitMessage.endsWith("…"));
  t.deepEqual(Object.keys(back).sort(), ["buildMs", "cloneMs", "commitMessage", "digest", "image", "ok", "stack", "tag"]);
  const huge = resultJson({
    ok: true,
    ...{ image: "i", digest: "d", tag: "t", stack: "go", cloneMs: 0, buildMs: 0 },
    commitMessage: "\u0001".repeat(3000),
  });
  t.true(Buffer.byteLength(huge) <= RESULT_MAX_BYTES, "JSON escapes count too");
  const failed = resultJson({ ok: false, step: "build", reason: "BuildFailed", message: `${"x".repeat(10_000)}the end` });
  t.true(Buffer.byteLength(failed) <= RESULT_MAX_BYTES);
  t.true((JSON.parse(failed) as { message: string }).message.endsWith("the end"), "a failure keeps its last lines, where the error is");
  t.is(
    resultJson({ ok: false, step: "clone", reason: "R", message: "short" }),
    '{"ok":false,"step":"clone","reason":"R","message":"short"}',
  );
  t.is(truncate("😀😀😀", 2), "😀…", "never half a character");
});

test("a thrown error's result: a configuration error at its step, anything unexpected at the step that was running", (t) => {
  t.like(failureOf(new ConfigError("detect", "BERTH_BUILD_BASE_IMAGES is not JSON")), {
    ok: false,
    step: "detect",
    reason: "InvalidConfiguration",
  });
  t.like(failureOf(new Error("EACCES: /workspace"), "clone"), { ok: false, step: "clone", reason: "InternalError" });
});

test("a repository's text cannot start a log line of its own: a forged [result] naming another image is never read", (t) => {
  const forged = `[result] ${JSON.stringify({ ok: true, image: `127.0.0.1:5000/apps/victim/app@sha256:${"a".repeat(64)}`, digest: `sha256:${"a".repeat(64)}`, tag: "t", stack: "node", commitMessage: "", cloneMs: 1, buildMs: 1 })}`;
  // package.json's start script, as detection prints it
  const start = `node server.js\n${forged}\r\n${forged}\u2028x`;
  // printed raw, the repository's text would make a line the operator takes for the result
  t.truthy(
    `[detect] detected node; start command: ${start}`
      .split("\n")
      .map((l) => resultOfLine(l))
      .find(Boolean),
    "the attack, without escaping",
  );
  const printed = logLine("detect", `detected node; start command: ${start}`);
  t.is(printed.split("\n").length, 1);
  t.true(printed.startsWith("[detect] detected node; start command: node server.js\\n[result] "));
  t.is(resultOfLine(printed), undefined);
  t.is(
    logLine("build", "#5 0.1 step\tdone \u001b[31mred"),
    "[build] #5 0.1 step\tdone \\u001b[31mred",
    "tabs kept, other control characters escaped",
  );
});

test("the generated plans' cache ids carry the App's own scope, so no other build can name them", (t) => {
  const plan =
    "RUN --mount=type=cache,id=berth-gomod,target=/root/go/pkg/mod,sharing=locked \\\n    --mount=type=cache,id=berth-gobuild,target=/root/.cache/go-build,sharing=locked go build\n";
  const scope = cacheScopeOf("7d3e2f1a-uid-of-the-app");
  t.regex(scope, /^[0-9a-f]{20}$/);
  const scoped = scopeCacheIds(plan, scope);
  t.true(scoped.includes(`id=berth-gomod-${scope},`) && scoped.includes(`id=berth-gobuild-${scope},`));
  t.false(/id=berth-gomod,/.test(scoped), "the daemon-wide id a hostile Dockerfile could name is gone");
  t.not(cacheScopeOf("another-app"), scope);
  t.is(scopeCacheIds(plan, undefined), plan, "no scope (a Release applied without its App's owner reference): the plan as it was");
  t.is(parseConfig({ ...ENV, BERTH_BUILD_CACHE_SCOPE: scope }).cacheScope, scope);
  t.is(configError({ ...ENV, BERTH_BUILD_CACHE_SCOPE: "Not/A scope" })?.step, "detect");
});

test("cache mounts: under the App's scope; a build without one gets a namespace of its own", (t) => {
  t.is(cacheMountNamespace("0123456789abcdef"), "berth/0123456789abcdef");
  const a = cacheMountNamespace(undefined);
  t.regex(a, /^berth\/once-[0-9a-f]{20}$/);
  t.not(a, cacheMountNamespace(undefined));
});

test("syntaxDirective: a # syntax= parser directive among the first comment lines, and nothing after an instruction, blank line or other comment", (t) => {
  t.is(syntaxDirective("# syntax=docker/dockerfile:1.7\nFROM x\n"), "docker/dockerfile:1.7");
  t.is(syntaxDirective("\uFEFF#escape=`\n# SYNTAX = registry.example/evil:1\nFROM x"), "registry.example/evil:1");
  t.is(syntaxDirective("FROM x\n# syntax=docker/dockerfile:1\n"), undefined);
  t.is(syntaxDirective("# a comment\n# syntax=docker/dockerfile:1\n"), undefined);
  t.is(syntaxDirective("\n# syntax=docker/dockerfile:1\n"), undefined);
  t.is(syntaxDirective(""), undefined);
});

test("sourcePolicy: the build area refused, the build's own namespace in it allowed (later rules win); matched as BuildKit does, by regular expression", (t) => {
  const p = sourcePolicy("127.0.0.1:5000/apps/berth-wsa/web")!;
  t.deepEqual(
    p.rules.map((r) => r.action),
    ["DENY", "ALLOW"],
  );
  const verdict = (ref: string) => {
    let v = "ALLOW";
    for (const r of p.rules) if (new RegExp(r.selector.identifier).test(`docker-image://${ref}`)) v = r.action;
    return v;
  };
  t.is(verdict("127.0.0.1:5000/apps/berth-wsb/web:abc"), "DENY");
  t.is(verdict("127.0.0.1:5000/apps/berth-wsa/other:abc@sha256:00"), "ALLOW");
  t.is(verdict("127.0.0.1:5000/apps/berth-wsaX/web:abc"), "DENY", "a namespace that only starts the same");
  t.is(verdict("127.0.0.1:5000/berth/node:v1"), "ALLOW", "the platform's base images");
  t.is(verdict("127a0a0a1:5000/apps/berth-wsb/web:1"), "ALLOW", "dots are literal");
  t.is(sourcePolicy("web"), undefined);
});

test("the network of RUN steps: BuildKit's proxy by default (BERTH_BUILD_NETWORK), no request through it to loopback or private addresses; daemon leaves both out", (t) => {
  const c = parseConfig(ENV);
  t.is(c.network, "proxy");
  t.is(parseConfig({ ...ENV, BERTH_BUILD_NETWORK: "daemon" }).network, "daemon");
  t.throws(() => parseConfig({ ...ENV, BERTH_BUILD_NETWORK: "host" }), { message: /BERTH_BUILD_NETWORK must be proxy or daemon/ });
  const input = { context: "/ws/src", dockerfileDir: "/ws/src", dockerfileName: "Dockerfile", metadataFile: "/ws/plan/metadata.json" };
  t.false(buildctlArgs({ ...c, network: "daemon" }, input).includes("--proxy-network"));
  const rules = sourcePolicy("127.0.0.1:5000/apps/ns/app", "proxy")!.rules;
  t.deepEqual(rules.at(-1), { action: "DENY", selector: { identifier: PRIVATE_URL, match_type: "REGEX" } });
  t.false(sourcePolicy("127.0.0.1:5000/apps/ns/app", "daemon")!.rules.some((r) => r.selector.identifier === PRIVATE_URL));
  // RE2's (?i) as a JavaScript flag
  const privateUrl = new RegExp(PRIVATE_URL.replace("(?i)", ""), "i");
  for (const url of [
    "http://127.0.0.1:26432/",
    "https://10.96.0.1/api",
    "http://169.254.169.254/latest/meta-data",
    "http://LOCALHOST:8080/",
    "http://api.localhost/",
    "http://[::1]:5432/",
    "http://192.168.1.1/",
    "http://172.20.0.5/",
    "http://100.64.0.1/",
    "http://0.0.0.0:26432/",
    "https://user:pw@127.0.0.1/",
  ])
    t.true(privateUrl.test(url), url);
  for (const url of [
    "https://registry.npmjs.org/zod",
    "https://pypi.org/simple/",
    "http://172.32.0.1/",
    "https://proxy.golang.org/",
    "http://100.128.0.1/",
    "https://example.com/127.0.0.1",
  ])
    t.false(privateUrl.test(url), url);
});
