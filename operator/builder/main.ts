// The build program: what a build Job's container runs (docs/builds.md). It fetches one commit,
// builds it with BuildKit (the repository's Dockerfile, or the plan stack detection writes), pushes
// the image and writes one JSON result to the termination log, which the operator copies into the
// deployment record. Every step logs to stdout with a prefix ([clone], [detect], [build], [push],
// [result]): those lines are the build log users read through the API.
//
// Node.js builtins only: the builder image has git, buildctl and Node.js, no node_modules.
import { spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { mkdir, mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import type { BuildConfig, BuildkitTls, Step } from "./config.ts";
import { ConfigError, fromEnvironment, RESULT_LINE_PREFIX } from "./config.ts";
import type { Plan, SourceTree, Stack } from "./detect.ts";
import { detect, DETECT_READS } from "./detect.ts";

export type BuildResult =
  | {
      ok: true;
      image: string;
      digest: string;
      tag: string;
      stack: Stack | "dockerfile";
      commitMessage: string;
      cloneMs: number;
      buildMs: number;
    }
  | { ok: false; step: Step; reason: string; message: string };

/** The termination log's limit (Kubernetes reads at most 4096 bytes of it). */
export const RESULT_MAX_BYTES = 4096;
export const COMMIT_MESSAGE_MAX = 1000;
export const FAILURE_MESSAGE_MAX = 2000;

class StepError extends Error {
  readonly step: Step;
  readonly reason: string;
  constructor(step: Step, reason: string, message: string) {
    super(message);
    this.step = step;
    this.reason = reason;
  }
}

/** At most `max` characters (UTF-16 units, never splitting a pair), with an ellipsis when cut. */
export function truncate(text: string, max: number, from: "end" | "start" = "end"): string {
  if (text.length <= max) return text;
  const chars = [...text];
  if (chars.length <= max) return text;
  return from === "end" ? `${chars.slice(0, max - 1).join("")}…` : `…${chars.slice(chars.length - max + 1).join("")}`;
}

/** The result as the termination log holds it: one JSON object of at most RESULT_MAX_BYTES bytes. */
export function resultJson(result: BuildResult): string {
  const r: BuildResult = result.ok
    ? { ...result, commitMessage: truncate(result.commitMessage, COMMIT_MESSAGE_MAX) }
    : { ...result, message: truncate(result.message, FAILURE_MESSAGE_MAX, "start") };
  let text = JSON.stringify(r);
  // multi-byte characters (and JSON escapes) can still make it too long: cut the free text until it fits
  for (
    let max = r.ok ? COMMIT_MESSAGE_MAX : FAILURE_MESSAGE_MAX;
    Buffer.byteLength(text) > RESULT_MAX_BYTES && max > 0;
    max = Math.floor(max * 0.8)
  ) {
    text = JSON.stringify(
      r.ok ? { ...r, commitMessage: truncate(r.commitMessage, max) } : { ...r, message: truncate(r.message, max, "start") },
    );
  }
  return text;
}

// ---------------------------------------------------------------------------------------------
// git

/**
 * The environment of every git command: no system or global configuration, no prompts, a HOME of
 * its own (the container's may be read-only), and the credentials as an `http.extraHeader` given
 * through GIT_CONFIG_* variables, so that they appear in no argument list, URL or log line.
 */
/** `base`: the inherited variables (BuildConfig.environment). */
export function gitEnv(
  base: Readonly<Record<string, string | undefined>>,
  home: string,
  credentials: BuildConfig["credentials"],
): Record<string, string> {
  const env: Record<string, string> = {};
  for (const [name, v] of Object.entries(base)) if (v !== undefined && name !== "BUILDKIT_HOST") env[name] = v;
  Object.assign(env, {
    HOME: home,
    XDG_CONFIG_HOME: join(home, ".config"),
    GIT_CONFIG_NOSYSTEM: "1",
    GIT_CONFIG_GLOBAL: "/dev/null",
    GIT_TERMINAL_PROMPT: "0",
    GIT_ASKPASS: "true",
    LC_ALL: "C",
  });
  if (credentials) {
    const basic = Buffer.from(`${credentials.username}:${credentials.password}`).toString("base64");
    Object.assign(env, {
      GIT_CONFIG_COUNT: "1",
      GIT_CONFIG_KEY_0: "http.extraHeader",
      GIT_CONFIG_VALUE_0: `Authorization: Basic ${basic}`,
    });
  }
  return env;
}

/** The commands that fetch exactly one commit into a bare repository and check it out into `src` (argv of git, no secrets). */
export function gitCommands(c: Pick<BuildConfig, "repoUrl" | "commit">, gitDir: string, src: string): string[][] {
  const g = ["--git-dir", gitDir];
  return [
    ["init", "--quiet", "--bare", gitDir],
    [...g, "remote", "add", "origin", c.repoUrl],
    [...g, "fetch", "--quiet", "--depth", "1", "--no-tags", "origin", c.commit],
    [...g, "--work-tree", src, "checkout", "--quiet", "--force", c.commit, "--", "."],
  ];
}

/** What a failed `git fetch` means, from its output. */
export function cloneFailure(output: string): { reason: string; message: string } {
  const tail = output.trim().split("\n").slice(-5).join("\n");
  if (/Authentication failed|could not read (Username|Password)|terminal prompts disabled|\b401\b|\b403\b/i.test(output)) {
    return {
      reason: "AuthenticationFailed",
      message: `the Git server refused access to the repository: check the repository's credentials (gitInstallationId) and that they can read it.\n${tail}`,
    };
  }
  if (
    /not our ref|couldn't find remote ref|no such remote ref|unadvertised object|not a valid object|upload-pack: not our ref|fatal: remote error: .*(want|object)/i.test(
      output,
    )
  ) {
    return {
      reason: "CommitNotFound",
      message: `the repository has no such commit (reachable from its branches and tags): was it force-pushed away, or pushed to another repository?\n${tail}`,
    };
  }
  if (/repository .* not found|\b404\b|does not appear to be a git repository/i.test(output)) {
    return {
      reason: "RepositoryNotFound",
      message: `the Git server has no such repository (or hides it without credentials): check gitRepoUrl.\n${tail}`,
    };
  }
  if (
    /Could not resolve host|Connection refused|Connection timed out|Failed to connect|Operation timed out|SSL|certificate/i.test(output)
  ) {
    return { reason: "RepositoryUnreachable", message: `the Git server could not be reached: ${tail}` };
  }
  return { reason: "CloneFailed", message: `git fetch failed: ${tail}` };
}

// ---------------------------------------------------------------------------------------------
// buildctl

export interface BuildInput {
  /** the build context: the checked-out commit */
  context: string;
  /** the directory holding the Dockerfile, and its name there */
  dockerfileDir: string;
  dockerfileName: string;
  metadataFile: string;
  /** BuildKit's source policy (sourcePolicy), written beside the plan */
  sourcePolicyFile?: string | undefined;
  /** mutual TLS to buildkitd: the files writeTlsFiles wrote */
  tls?: TlsFiles | undefined;
}

/** The files of mutual TLS to buildkitd, as buildctl's global flags name them. */
export interface TlsFiles {
  /** the directory holding them (removed after the build) */
  dir: string;
  ca: string;
  cert: string;
  key: string;
  serverName?: string | undefined;
}

/**
 * Writes the CA, the client certificate and its key for buildctl into a new directory under
 * `parent` (/tmp: never the build context nor the plan's directory, which buildkitd receives), the
 * directory 0700 and each file 0600: readable by this user alone. The texts appear in no argument,
 * environment or log line.
 */
export async function writeTlsFiles(tls: BuildkitTls, parent: string = tmpdir()): Promise<TlsFiles> {
  const dir = await mkdtemp(join(parent, "berth-buildkit-tls-"));
  const file = async (name: string, text: string) => {
    const path = join(dir, name);
    await writeFile(path, text, { mode: 0o600, flag: "wx" });
    return path;
  };
  return {
    dir,
    ca: await file("ca.crt", tls.ca),
    cert: await file("tls.crt", tls.cert),
    key: await file("tls.key", tls.key),
    serverName: tls.serverName,
  };
}

/** buildctl's global flags of mutual TLS (before its command); none without it. */
export function buildctlTlsArgs(tls: TlsFiles | undefined): string[] {
  if (!tls) return [];
  return [
    "--tlscacert",
    tls.ca,
    "--tlscert",
    tls.cert,
    "--tlskey",
    tls.key,
    ...(tls.serverName ? ["--tlsservername", tls.serverName] : []),
  ];
}

/**
 * `buildctl build`'s arguments (BUILDKIT_HOST in the environment names the daemon), after the
 * global flags of mutual TLS when the build has it (input.tls). With a cache
 * ref: the App's registry cache is imported (a missing one is not an error: BuildKit goes on
 * without it) and exported with every step (mode=max, as an OCI image manifest, which any registry
 * stores); a failed export is ignored, since the image is already pushed by then.
 */
/**
 * The namespace of a build's cache mounts (BuildKit's BUILDKIT_CACHE_MOUNT_NS): every
 * `RUN --mount=type=cache,id=<id>` of the build, the repository's Dockerfile's or a plan's, is
 * the daemon's cache `<namespace>/<id>`, so a build reaches only its own App's caches whatever ids
 * its Dockerfile names. Without a scope (a Job made without its App), a namespace of its own.
 */
export function cacheMountNamespace(cacheScope: string | undefined): string {
  return `berth/${cacheScope ?? `once-${randomBytes(10).toString("hex")}`}`;
}

/**
 * The `# syntax=` directive of a Dockerfile, if any (a parser directive: a comment among the first
 * lines, before any instruction). Berth ignores it (buildctlArgs' `cmdline`): another frontend is
 * code of the repository's choosing run by the shared daemon, which could name any cache.
 */
export function syntaxDirective(dockerfile: string): string | undefined {
  for (const line of dockerfile
    .replace(/^\uFEFF/, "")
    .split("\n")
    .slice(0, 20)) {
    const m = /^\s*#\s*([a-z][a-z0-9_-]*)\s*=\s*(\S*)/i.exec(line);
    if (!m) return undefined; // directives end at the first instruction, blank line or other comment
    if (m[1]!.toLowerCase() === "syntax") return m[2] || undefined;
  }
  return undefined;
}

/**
 * BuildKit's source policy for a build (buildctl --source-policy-file): images under the build
 * area `<registry>/<prefix>/` are refused as sources (FROM, COPY --from, RUN --mount=from) unless
 * they are under the build's own `<registry>/<prefix>/<namespace>/`. Later rules win (BuildKit's
 * sourcepolicy engine). The daemon applies it to every source of the solve, and with the built-in
 * frontend pinned (`cmdline`), no Dockerfile can step around it. `image` is BERTH_BUILD_IMAGE:
 * `<registry>/<prefix>/<namespace>/<app>`.
 */
export function sourcePolicy(
  image: string,
  network: "proxy" | "daemon" = "daemon",
): { rules: { action: "ALLOW" | "DENY"; selector: { identifier: string; match_type: "REGEX" } }[] } | undefined {
  const parts = image.split("/");
  const rules: { action: "ALLOW" | "DENY"; selector: { identifier: string; match_type: "REGEX" } }[] = [];
  if (parts.length >= 3) {
    // <registry>/.../<namespace>/<app>
    const own = parts.slice(0, -1).join("/");
    const area = parts.slice(0, -2).join("/");
    const re = (s: string) => `^docker-image://${s.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")}/`;
    rules.push(
      { action: "DENY", selector: { identifier: re(area), match_type: "REGEX" } },
      { action: "ALLOW", selector: { identifier: re(own), match_type: "REGEX" } },
    );
  }
  // RUN steps' requests through BuildKit's proxy are judged as http(s) sources: none to a
  // loopback, private, shared or link-local address, or to localhost.
  if (network === "proxy") rules.push({ action: "DENY", selector: { identifier: PRIVATE_URL, match_type: "REGEX" } });
  return rules.length ? { rules } : undefined;
}

/**
 * An http(s) URL whose host is localhost, an IPv6 literal, or an IPv4 literal in 0/8, 10/8,
 * 100.64/10, 127/8, 169.254/16, 172.16/12 or 192.168/16 (RE2 syntax, as BuildKit matches it).
 * A name that resolves to such an address is not caught: the proxy resolves it.
 */
export const PRIVATE_URL =
  "^(?i)https?://([^/@]*@)?(localhost|[^/:]*\\.localhost|\\[|0\\.|10\\.|127\\.|169\\.254\\.|192\\.168\\.|172\\.(1[6-9]|2[0-9]|3[01])\\.|100\\.(6[4-9]|[7-9][0-9]|1[01][0-9]|12[0-7])\\.)";

export function buildctlArgs(
  c: Pick<BuildConfig, "image" | "tag" | "insecure" | "cacheRef" | "cacheScope"> & { network?: BuildConfig["network"] },
  input: BuildInput,
): string[] {
  const insecure = c.insecure ? ["registry.insecure=true"] : [];
  const output = [`type=image`, `name=${c.image}:${c.tag}`, "push=true", "oci-mediatypes=true", ...insecure].join(",");
  const cache = c.cacheRef
    ? [
        "--import-cache",
        ["type=registry", `ref=${c.cacheRef}`, ...insecure].join(","),
        "--export-cache",
        [
          "type=registry",
          `ref=${c.cacheRef}`,
          "mode=max",
          "oci-mediatypes=true",
          "image-manifest=true",
          "ignore-error=true",
          ...insecure,
        ].join(","),
      ]
    : [];
  return [
    ...buildctlTlsArgs(input.tls),
    "build",
    "--frontend",
    "dockerfile.v0",
    "--progress",
    "plain",
    "--local",
    `context=${input.context}`,
    "--local",
    `dockerfile=${input.dockerfileDir}`,
    "--opt",
    `filename=${input.dockerfileName}`,
    // every cache mount under the App's own namespace of the daemon's caches
    "--opt",
    `build-arg:BUILDKIT_CACHE_MOUNT_NS=${cacheMountNamespace(c.cacheScope)}`,
    // the daemon's built-in Dockerfile frontend, whatever `# syntax=` the Dockerfile names (with
    // `cmdline` set, dockerfile.v0 forwards to no other frontend: BuildKit's builder/build.go)
    "--opt",
    "cmdline=",
    ...(input.sourcePolicyFile ? ["--source-policy-file", input.sourcePolicyFile] : []),
    // RUN steps reach the network only through BuildKit's proxy (docs/builds.md "Network")
    ...(c.network === "proxy" ? ["--proxy-network"] : []),
    "--output",
    output,
    ...cache,
    "--metadata-file",
    input.metadataFile,
  ];
}

/** buildctl's environment: only what it reads (never the Git credentials). */
export function buildctlEnv(base: Readonly<Record<string, string | undefined>>, home: string): Record<string, string> {
  const env: Record<string, string> = {};
  for (const [name, v] of Object.entries(base)) if (v !== undefined && !name.startsWith("GIT_")) env[name] = v;
  return { ...env, HOME: home, DOCKER_CONFIG: join(home, ".docker") };
}

/** What a failed `buildctl build` means, from the end of its output: which step, why, and the lines a user needs. */
export function buildFailure(output: string, image: string): { step: Step; reason: string; message: string } {
  const lines = output.trim().split("\n");
  const errorAt = lines.findLastIndex((l) => /^error: /.test(l));
  const error = errorAt >= 0 ? lines.slice(errorAt).join("\n") : lines.slice(-3).join("\n");
  const context =
    errorAt >= 0
      ? lines
          .slice(Math.max(0, errorAt - 15), errorAt)
          .filter((l) => !/^#\d+ (DONE|CACHED)\b|^#\d+ \[internal\]/.test(l))
          .join("\n")
      : "";
  const both = `${context ? `${context}\n` : ""}${error}`;
  // Before any step ran (no "#<n>" line): the connection to buildkitd, not a registry's certificate.
  if (
    /authentication handshake failed|x509: |tls: |first record does not look like a TLS handshake/i.test(error) &&
    !/^#\d+/m.test(output)
  ) {
    return {
      step: "build",
      reason: "BuilderUnavailable",
      message: `the build service (BuildKit) refused the connection's TLS (its certificate, the build's client certificate or the name it is reached by): tell the platform's operator.\n${error}`,
    };
  }
  if (
    // (a TLS 1.3 server refuses a client certificate after the client's handshake ends: the client
    // may then see its next write fail, a broken pipe or a reset, rather than TLS's alert)
    /connection refused|no such file or directory.*sock|failed to dial|connection error|transport: Error while dialing|context deadline exceeded|server preface|broken pipe|connection reset by peer/i.test(
      error,
    ) &&
    !/^#\d+/m.test(output)
  ) {
    return {
      step: "build",
      reason: "BuilderUnavailable",
      message: `the build service (BuildKit) could not be reached; retry the deploy, and tell the platform's operator if it persists.\n${error}`,
    };
  }
  if (
    /failed to (push|export image)|pushing |exporting to image|unexpected status from PUT|unexpected status from POST|failed to copy.*push/i.test(
      error,
    ) ||
    (/^#\d+ (pushing|exporting to image)/m.test(lines.slice(Math.max(0, errorAt - 5)).join("\n")) && /push/i.test(error))
  ) {
    return { step: "push", reason: "PushFailed", message: `the image was built but could not be pushed to ${image}.\n${error}` };
  }
  const denied = /source "docker-image:\/\/([^"]+)" denied by policy/.exec(output);
  if (denied) {
    return {
      step: "build",
      reason: "ImageNotAllowed",
      message: `the Dockerfile uses ${denied[1]}, another workspace's build: a build may use its own workspace's images and the platform's base images.\n${error}`,
    };
  }
  if (/failed to resolve source metadata|pull access denied|failed to do request.*(manifests|blobs)|not found: not found/i.test(error)) {
    return {
      step: "build",
      reason: "BaseImageUnavailable",
      message: `a FROM image could not be pulled: only images from the platform's registry can be used.\n${both}`,
    };
  }
  if (/dockerfile parse error|failed to parse|unknown instruction|Dockerfile.*syntax/i.test(error)) {
    return { step: "build", reason: "DockerfileInvalid", message: `the Dockerfile is not valid.\n${error}` };
  }
  return { step: "build", reason: "BuildFailed", message: `a build step failed.\n${both}` };
}

// ---------------------------------------------------------------------------------------------
// running

type Log = (step: Step | "result", line: string) => void;

/**
 * A line of the build log as printed: `[step] text`, with every control character of the text
 * escaped (a newline as \n, others as \u00XX; tabs kept). Repositories put text in it (a commit
 * message, package.json's scripts, build steps' output): escaped, none of it can start a line of
 * its own, such as a forged `[result] {...}` naming another image.
 */
export function logLine(step: Step | "result", text: string): string {
  // eslint-disable-next-line no-control-regex
  const safe = text.replace(/[\u0000-\u0008\u000a-\u001f\u007f\u2028\u2029]/g, (c) =>
    c === "\n" ? "\\n" : c === "\r" ? "\\r" : `\\u${c.charCodeAt(0).toString(16).padStart(4, "0")}`,
  );
  return `[${step}] ${safe}`;
}

const stdoutLog: Log = (step, line) => {
  process.stdout.write(`${logLine(step, line)}\n`);
};

/** Runs a command, passing each output line to `onLine`; resolves with its exit code and all output. */
function runCommand(
  cmd: string,
  args: string[],
  env: Record<string, string>,
  cwd: string,
  onLine: (line: string) => void,
): Promise<{ code: number; output: string }> {
  return new Promise((resolve) => {
    const child = spawn(cmd, args, { env, cwd, stdio: ["ignore", "pipe", "pipe"] });
    let output = "";
    let partial = "";
    const take = (chunk: Buffer) => {
      const text = partial + chunk.toString("utf8");
      const parts = text.split("\n");
      partial = parts.pop() ?? "";
      for (const p of parts) {
        output += `${p}\n`;
        onLine(p);
      }
      if (output.length > 1_000_000) output = output.slice(-500_000);
    };
    child.stdout.on("data", take);
    child.stderr.on("data", take);
    child.on("error", (err) => {
      output += `${err.message}\n`;
      resolve({ code: 127, output });
    });
    child.on("close", (code) => {
      if (partial) {
        output += partial;
        onLine(partial);
      }
      resolve({ code: code ?? 1, output });
    });
  });
}

async function git(
  args: string[],
  env: Record<string, string>,
  cwd: string,
  log: Log,
  quiet = false,
): Promise<{ code: number; output: string }> {
  return runCommand("git", args, env, cwd, quiet ? () => {} : (l) => log("clone", l));
}

/** The files of `src` that detection reads, and the commit's file list. */
async function sourceTree(files: string[], src: string): Promise<SourceTree> {
  const contents: Record<string, string> = {};
  for (const name of DETECT_READS) {
    if (files.includes(name)) contents[name] = (await readFile(join(src, name), "utf8").catch(() => "")).slice(0, 256 * 1024);
  }
  return { files, contents };
}

export async function build(c: BuildConfig, log: Log = stdoutLog, at: { step: Step } = { step: "clone" }): Promise<BuildResult> {
  const ws = c.workspace;
  const home = join(ws, "home");
  const gitDir = join(ws, "repo.git");
  const src = join(ws, "src");
  const planDir = join(ws, "plan");
  for (const d of [gitDir, src, planDir, home]) await rm(d, { recursive: true, force: true });
  await mkdir(src, { recursive: true });
  await mkdir(planDir, { recursive: true });
  await mkdir(home, { recursive: true });

  // clone: exactly that commit, shallow
  const t0 = performance.now();
  log(
    "clone",
    `fetching ${c.commit}${c.branch ? ` (branch ${c.branch})` : ""} from ${c.repoUrl}${c.credentials ? " with the repository's credentials" : ""}`,
  );
  const env = gitEnv(c.environment, home, c.credentials);
  const [init, remote, fetch, checkout] = gitCommands(c, gitDir, src);
  for (const args of [init!, remote!]) {
    const r = await git(args, env, ws, log);
    if (r.code !== 0)
      throw new StepError("clone", "CloneFailed", `git ${args[0] === "--git-dir" ? args[2] : args[0]} failed: ${r.output.trim()}`);
  }
  const fetched = await git(fetch!, env, ws, log);
  if (fetched.code !== 0) {
    const f = cloneFailure(fetched.output);
    throw new StepError("clone", f.reason, f.message);
  }
  const out = await git(checkout!, env, ws, log);
  if (out.code !== 0) throw new StepError("clone", "CheckoutFailed", `git checkout failed: ${out.output.trim()}`);
  const message = await git(["--git-dir", gitDir, "log", "-1", "--format=%B", c.commit], env, ws, log, true);
  const commitMessage = message.code === 0 ? message.output.trim() : "";
  const listed = await git(["--git-dir", gitDir, "ls-tree", "-r", "--name-only", "-z", c.commit], env, ws, log, true);
  if (listed.code !== 0) throw new StepError("clone", "CheckoutFailed", `git ls-tree failed: ${listed.output.trim()}`);
  const files = listed.output.split("\0").filter(Boolean);
  await rm(gitDir, { recursive: true, force: true }); // the build context is the work tree alone
  const cloneMs = Math.round(performance.now() - t0);
  log("clone", `${c.commit.slice(0, 12)} "${commitMessage.split("\n")[0] ?? ""}": ${files.length} files in ${cloneMs} ms`);

  at.step = "detect";
  // detect: the repository's Dockerfile, or a plan
  let stack: Stack | "dockerfile";
  let input: BuildInput;
  const metadataFile = join(planDir, "metadata.json");
  // Without dockerfilePath, a Dockerfile at the repository's root is the plan (as Heroku, Render
  // and Railway do): the repository says how it is built, detection is for those that do not.
  const dockerfile = c.dockerfile ?? (files.includes("Dockerfile") ? "Dockerfile" : undefined);
  if (dockerfile) {
    if (!files.includes(dockerfile))
      throw new StepError(
        "detect",
        "DockerfileNotFound",
        `the commit has no ${dockerfile} (the App's dockerfilePath, relative to the repository's root)`,
      );
    log(
      "detect",
      `building the repository's ${dockerfile}${c.dockerfile ? "" : " (found at the root; set dockerfilePath to build another)"}`,
    );
    stack = "dockerfile";
    const syntax = syntaxDirective(await readFile(join(src, dockerfile), "utf8").catch(() => ""));
    if (syntax)
      log(
        "detect",
        `the Dockerfile asks for the frontend ${syntax} (# syntax=): it is built with BuildKit's built-in Dockerfile frontend instead, since another frontend could reach other builds' caches`,
      );
    input = { context: src, dockerfileDir: join(src, dirname(dockerfile)), dockerfileName: dockerfile.split("/").at(-1)!, metadataFile };
  } else {
    const detected = detect(await sourceTree(files, src), c.baseImages, c.cacheScope);
    if (!detected.ok) throw new StepError("detect", detected.reason, detected.message);
    const plan: Plan = detected.plan;
    stack = plan.stack;
    log("detect", `detected ${plan.stack}; start command: ${plan.start}`);
    for (const n of plan.notes) log("detect", n);
    await writeFile(join(planDir, "Dockerfile"), plan.dockerfile);
    log("detect", "build plan (generated Dockerfile):");
    for (const l of plan.dockerfile.trimEnd().split("\n")) log("detect", `  ${l}`);
    input = { context: src, dockerfileDir: planDir, dockerfileName: "Dockerfile", metadataFile };
  }

  const policy = sourcePolicy(c.image, c.network);
  if (policy) {
    input.sourcePolicyFile = join(planDir, "source-policy.json");
    await writeFile(input.sourcePolicyFile, JSON.stringify(policy));
  }

  // build and push
  at.step = "build";
  const t1 = performance.now();
  log(
    "build",
    `buildctl build → ${c.image}:${c.tag}${c.insecure ? " (plain-HTTP registry)" : ""} on ${c.environment.BUILDKIT_HOST ?? "buildctl's default address"}${c.tls ? " over mutual TLS (the platform's client certificate)" : ""}`,
  );
  if (c.tls) input.tls = await writeTlsFiles(c.tls);
  let built: { code: number; output: string };
  try {
    built = await runCommand(c.buildctl, buildctlArgs(c, input), buildctlEnv(c.environment, home), ws, (l) => log("build", l));
  } finally {
    if (input.tls) await rm(input.tls.dir, { recursive: true, force: true });
  }
  const buildMs = Math.round(performance.now() - t1);
  if (built.code !== 0) {
    const f = buildFailure(built.output.trim() || `buildctl exited with code ${built.code} and printed nothing`, c.image);
    throw new StepError(f.step, f.reason, f.message);
  }
  let digest: unknown;
  try {
    digest = (JSON.parse(await readFile(metadataFile, "utf8")) as Record<string, unknown>)["containerimage.digest"];
  } catch {
    digest = undefined;
  }
  if (typeof digest !== "string" || !/^sha256:[0-9a-f]{64}$/.test(digest))
    throw new StepError("push", "NoDigest", "buildctl finished but reported no image digest: the push may not have happened");
  log("push", `pushed ${c.image}:${c.tag} as ${c.image}@${digest} (build and push ${buildMs} ms)`);
  return { ok: true, image: `${c.image}@${digest}`, digest, tag: c.tag, stack, commitMessage, cloneMs, buildMs };
}

/** The result of a thrown error: a StepError as it says, a ConfigError at its step, anything else an internal error of the step running. */
export function failureOf(err: unknown, step: Step = "build"): BuildResult {
  if (err instanceof StepError) return { ok: false, step: err.step, reason: err.reason, message: err.message };
  if (err instanceof ConfigError)
    return {
      ok: false,
      step: err.step,
      reason: "InvalidConfiguration",
      message: `the build Job is misconfigured (a platform problem, not the app's): ${err.message}`,
    };
  return {
    ok: false,
    step,
    reason: "InternalError",
    message: `the builder failed unexpectedly: ${err instanceof Error ? err.message : String(err)}`,
  };
}

async function main(): Promise<number> {
  let result: BuildResult;
  let resultFile = "/dev/termination-log";
  const at: { step: Step } = { step: "clone" };
  try {
    const c = fromEnvironment();
    resultFile = c.resultFile;
    result = await build(c, stdoutLog, at);
  } catch (err) {
    result = failureOf(err, at.step);
    if (!(err instanceof StepError) && !(err instanceof ConfigError) && err instanceof Error)
      process.stderr.write(`${err.stack ?? err.message}\n`);
  }
  const json = resultJson(result);
  if (result.ok) stdoutLog("result", `ok: ${result.image} (${result.stack}; clone ${result.cloneMs} ms, build ${result.buildMs} ms)`);
  else for (const l of `failed at ${result.step}: ${result.reason}: ${result.message}`.split("\n")) stdoutLog("result", l);
  process.stdout.write(`${RESULT_LINE_PREFIX}${json}\n`);
  try {
    await writeFile(resultFile, json);
  } catch (err) {
    process.stderr.write(`cannot write the result to ${resultFile}: ${err instanceof Error ? err.message : String(err)}\n${json}\n`);
  }
  return result.ok ? 0 : 1;
}

if (import.meta.main) {
  main().then(
    (code) => {
      process.exitCode = code;
    },
    (err: unknown) => {
      process.stderr.write(`${err instanceof Error ? err.stack : String(err)}\n`);
      process.exitCode = 1;
    },
  );
}
