// Stack detection (docs/builds.md): from a commit's file list and the texts of a few files, the
// build plan of a repository without a Dockerfile, as a generated Dockerfile on the configured base
// images. Pure: no I/O, no clock; the build program (main.ts) reads the files, this decides.
//
// Order, as Railpack's providers go: Go (go.mod), Python (requirements.txt, pyproject.toml,
// setup.py, Pipfile, main.py, app.py), Node.js (package.json), a static site (index.html, at the
// root or in public/). Every plan sets PORT=8080 as a default only: the operator sets PORT, and the
// start command (the app itself, or a Procfile's `web:` line through sh) listens on it.
import { STATIC_SERVER_SOURCE } from "./static-server.ts";

export const STACKS = ["node", "python", "go", "static"] as const;
export type Stack = (typeof STACKS)[number];
/** pip trusts the system's CA bundle (where BuildKit's proxy adds its CA during the step) rather than its own, when the image has one. */
const PIP_SYSTEM_CA = "if [ -f /etc/ssl/certs/ca-certificates.crt ]; then export PIP_CERT=/etc/ssl/certs/ca-certificates.crt; fi";
/**
 * pip asks PyPI for its own latest version unless told not to, even when the requirements file
 * says --no-index: a build from vendored wheels (--no-index --find-links in requirements.txt) must
 * make no request at all.
 */
const PIP_NO_VERSION_CHECK = "export PIP_DISABLE_PIP_VERSION_CHECK=1";

/** The base image per stack (BERTH_BUILD_BASE_IMAGES): a stack without one fails with BaseImageNotConfigured. */
export type BaseImages = Partial<Record<Stack, string>>;

/** The files whose texts detection reads (when the commit has them); every other file counts by its path only. */
export const DETECT_READS = ["package.json", "requirements.txt", "pyproject.toml", "go.mod", "Procfile"] as const;

export interface SourceTree {
  /** every file of the commit, relative, "/"-separated */
  files: readonly string[];
  /** the texts of the DETECT_READS the commit has */
  contents: Readonly<Partial<Record<(typeof DETECT_READS)[number], string>>>;
}

export interface Plan {
  stack: Stack;
  /** the generated Dockerfile, built with the repository as its context */
  dockerfile: string;
  /** what the container runs, for the log */
  start: string;
  /** what detection found and decided, one line each, for the log */
  notes: string[];
}

export type Detection = { ok: true; plan: Plan } | { ok: false; reason: string; message: string };

/** The default PORT of generated images; the operator sets the real one. */
export const DEFAULT_PORT = 8080;

const fail = (reason: string, message: string): Detection => ({ ok: false, reason, message });

/** The command of a Procfile's `web:` process, if any (Heroku's format: `name: command`). */
export function procfileWeb(text: string | undefined): string | undefined {
  for (const line of (text ?? "").split("\n")) {
    const m = /^\s*web\s*:\s*(.+?)\s*$/.exec(line);
    if (m) return m[1];
  }
  return undefined;
}

/** A Dockerfile's exec-form array (JSON is what the exec form is). */
const exec = (args: readonly string[]): string => JSON.stringify(args);

/** A shell command as the container's command: sh -c expands $PORT and runs it (dash execs the last command). */
const shell = (command: string): string => exec(["/bin/sh", "-c", command]);

const has = (tree: SourceTree, path: string): boolean => tree.files.includes(path);

/**
 * The plans' BuildKit cache mounts (`id=berth-npm` and the like) with `scope` appended. A cache id
 * belongs to the whole daemon and any Dockerfile may name it: with an App's own unguessable
 * scope (the operator derives it from the App's uid), no other workspace's build can read or
 * plant files in this App's dependency caches. Pure.
 */
export function scopeCacheIds(dockerfile: string, scope: string | undefined): string {
  return scope ? dockerfile.replace(/\bid=(berth-[a-z]+),/g, `id=$1-${scope},`) : dockerfile;
}

export function detect(tree: SourceTree, bases: BaseImages, cacheScope?: string): Detection {
  const notes: string[] = [];
  if (has(tree, "Dockerfile"))
    notes.push("the repository has a Dockerfile; detection ignores it (set the App's dockerfilePath to build it instead)");
  const stack = detectStack(tree);
  if (!stack) {
    return fail(
      "StackNotDetected",
      "no supported stack found at the repository's root: looked for go.mod (Go), requirements.txt, pyproject.toml, setup.py, Pipfile, main.py or app.py (Python), package.json (Node.js) and index.html or public/index.html (static site). Add one of them, or a Dockerfile and set the App's dockerfilePath",
    );
  }
  const base = bases[stack];
  if (!base)
    return fail(
      "BaseImageNotConfigured",
      `detected a ${STACK_NAMES[stack]} app, but no base image is configured for ${stack} (the builder's baseImages.${stack}): ask the platform's operator to configure one, or add a Dockerfile and set the App's dockerfilePath`,
    );
  const planned = PLANNERS[stack](tree, base, notes);
  return planned.ok
    ? {
        ok: true,
        plan: { ...planned.plan, dockerfile: scopeCacheIds(planned.plan.dockerfile, cacheScope), notes: [...notes, ...planned.plan.notes] },
      }
    : planned;
}

export const STACK_NAMES: Record<Stack, string> = { node: "Node.js", python: "Python", go: "Go", static: "static site" };

export function detectStack(tree: SourceTree): Stack | undefined {
  if (has(tree, "go.mod")) return "go";
  if (["requirements.txt", "pyproject.toml", "setup.py", "Pipfile", "main.py", "app.py"].some((f) => has(tree, f))) return "python";
  if (has(tree, "package.json")) return "node";
  if (staticRoot(tree) !== undefined) return "static";
  return undefined;
}

const PLANNERS: Record<Stack, (tree: SourceTree, base: string, notes: string[]) => Detection> = {
  node: planNode,
  python: planPython,
  go: planGo,
  static: planStatic,
};

const header = (stack: Stack, from: string): string =>
  `# Berth build plan: ${STACK_NAMES[stack]}, detected from ${from} (docs/builds.md). Generated: add a Dockerfile and set dockerfilePath to change it.\n`;

// ---------------------------------------------------------------------------------------------
// Node.js

interface PackageJson {
  main?: unknown;
  scripts?: Record<string, unknown>;
  dependencies?: Record<string, unknown>;
  devDependencies?: Record<string, unknown>;
  packageManager?: unknown;
  engines?: Record<string, unknown>;
}

/** Files a Node.js app is commonly started from, when package.json names none. */
export const NODE_ENTRY_FILES = [
  "server.js",
  "index.js",
  "main.js",
  "app.js",
  "server.mjs",
  "index.mjs",
  "server.ts",
  "index.ts",
  "main.ts",
  "app.ts",
];

function planNode(tree: SourceTree, base: string, notes: string[]): Detection {
  let pkg: PackageJson;
  try {
    const parsed: unknown = JSON.parse(tree.contents["package.json"] ?? "");
    if (typeof parsed !== "object" || parsed === null || Array.isArray(parsed)) throw new Error("not an object");
    pkg = parsed;
  } catch (err) {
    return fail(
      "InvalidPackageJson",
      `package.json is not a JSON object (${err instanceof Error ? err.message : String(err)}): fix it, or add a Dockerfile and set dockerfilePath`,
    );
  }
  const npmLock = ["package-lock.json", "npm-shrinkwrap.json"].find((f) => has(tree, f));
  const otherLock = ["yarn.lock", "pnpm-lock.yaml", "bun.lockb", "bun.lock"].find((f) => has(tree, f));
  const manager = typeof pkg.packageManager === "string" ? pkg.packageManager.split("@")[0] : undefined;
  if (!npmLock && (otherLock || (manager && manager !== "npm"))) {
    return fail(
      "UnsupportedPackageManager",
      `${otherLock ?? `packageManager "${manager}"`}: detection installs with npm only (package-lock.json or none); commit a package-lock.json (npm install --package-lock-only), or add a Dockerfile and set dockerfilePath`,
    );
  }
  const scripts = pkg.scripts ?? {};
  const script = (name: string) => (typeof scripts[name] === "string" && scripts[name].trim() !== "" ? scripts[name].trim() : undefined);
  const deps = Object.keys(pkg.dependencies ?? {}).length;
  const devDeps = Object.keys(pkg.devDependencies ?? {}).length;
  const build = script("build");

  const web = procfileWeb(tree.contents.Procfile);
  const main = typeof pkg.main === "string" && pkg.main.trim() !== "" ? pkg.main.trim() : undefined;
  const entry = NODE_ENTRY_FILES.find((f) => has(tree, f));
  let start: string;
  if (web) {
    start = web;
    notes.push(`start: the Procfile's web process: ${web}`);
  } else if (script("start")) {
    start = script("start")!;
    notes.push(`start: package.json's start script: ${start}`);
  } else if (main) {
    start = `node ${main}`;
    notes.push(`start: package.json's main: ${start}`);
  } else if (entry) {
    start = `node ${entry}`;
    notes.push(`start: ${entry} (package.json has no start script or main)`);
  } else
    return fail(
      "NoStartCommand",
      `package.json has no start script and no main, and none of ${NODE_ENTRY_FILES.join(", ")} exists: add "scripts": { "start": "node server.js" } (the server listens on $PORT)`,
    );

  const install = deps > 0 || (build !== undefined && devDeps > 0);
  const npmInstall = npmLock ? "npm ci" : "npm install";
  if (typeof pkg.engines?.node === "string")
    notes.push(`engines.node "${pkg.engines.node}" is not enforced: the configured Node.js base image is ${base}`);
  const lines = [header("node", "package.json")];
  if (!install && !build) {
    notes.push(
      deps + devDeps === 0 ? "no dependencies: nothing to install" : "only devDependencies and no build script: nothing to install",
    );
    lines.push(`FROM ${base}`, "WORKDIR /app", "COPY . .");
  } else {
    notes.push(
      install
        ? `install: ${npmInstall}${build ? "" : " --omit=dev"} (${npmLock ?? "no lock file"}); the node base image needs npm`
        : "no dependencies to install",
    );
    if (build) notes.push(`build: npm run build (${build})${install ? ", then npm prune --omit=dev" : ""}`);
    const npmCheck = `command -v npm >/dev/null 2>&1 || { echo "berth: the node base image ${base} has no npm, which installing dependencies needs: configure a node base image with npm, or add a Dockerfile and set dockerfilePath" >&2; exit 1; }`;
    // npm trusts the system's CA bundle, where BuildKit's proxy adds its CA during the step (docs/builds.md "Network")
    lines.push(`FROM ${base} AS build`, "USER root", "ENV NODE_USE_SYSTEM_CA=1", "WORKDIR /app", "COPY . .");
    if (install) {
      lines.push(
        `RUN --mount=type=cache,id=berth-npm,target=/root/.npm,sharing=locked \\\n    ${npmCheck}; \\\n    ${npmInstall}${build ? "" : " --omit=dev"} --no-audit --no-fund`,
      );
    } else {
      lines.push(`RUN ${npmCheck}`);
    }
    if (build) lines.push("RUN npm run build");
    if (build && install) lines.push("RUN npm prune --omit=dev --no-audit --no-fund");
    lines.push("", `FROM ${base}`, "WORKDIR /app", "COPY --from=build /app /app");
  }
  lines.push(
    `ENV NODE_ENV=production PORT=${DEFAULT_PORT} PATH=/app/node_modules/.bin:$PATH`,
    `EXPOSE ${DEFAULT_PORT}`,
    `CMD ${shell(start)}`,
  );
  return { ok: true, plan: { stack: "node", dockerfile: lines.join("\n") + "\n", start, notes: [] } };
}

// ---------------------------------------------------------------------------------------------
// Python

/**
 * Whether a requirements file lists anything: a line that is not blank, a comment or an index
 * option (-r and -e lines count). The index options include --no-index and --find-links: a file
 * may carry them to install from wheels that come with the source, without an index.
 */
export function hasRequirements(text: string | undefined): boolean {
  return (text ?? "")
    .split("\n")
    .map((l) => l.replace(/(^|\s)#.*$/, "").trim())
    .some(
      (s) =>
        s !== "" &&
        !/^(-i|--index-url|--extra-index-url|--no-index|-f|--find-links|--trusted-host|--pre|--no-binary|--only-binary|--prefer-binary|--require-hashes)\b/.test(
          s,
        ),
    );
}

/** The `[project.scripts]` entries of a pyproject.toml (names only; a small reader, not a TOML parser). */
export function pyprojectScripts(text: string | undefined): string[] {
  const out: string[] = [];
  let inScripts = false;
  for (const line of (text ?? "").split("\n")) {
    const table = /^\s*\[([^\]]+)\]\s*$/.exec(line);
    if (table) {
      inScripts = table[1]!.trim() === "project.scripts";
      continue;
    }
    const m = inScripts ? /^\s*"?([\w.-]+)"?\s*=/.exec(line) : null;
    if (m) out.push(m[1]!);
  }
  return out;
}

function planPython(tree: SourceTree, base: string, notes: string[]): Detection {
  const pyproject = tree.contents["pyproject.toml"];
  const installable = pyproject !== undefined && /^\s*\[(project|build-system|tool\.poetry)\]/m.test(pyproject);
  const requirements = has(tree, "requirements.txt") && hasRequirements(tree.contents["requirements.txt"]);
  const setupPy = has(tree, "setup.py");
  if (has(tree, "Pipfile") && !requirements && !installable) {
    return fail(
      "UnsupportedPackageManager",
      "Pipfile: detection installs with pip from requirements.txt or pyproject.toml only; export the requirements (pipenv requirements > requirements.txt), or add a Dockerfile and set dockerfilePath",
    );
  }
  const web = procfileWeb(tree.contents.Procfile);
  const scripts = pyprojectScripts(pyproject);
  const entry = ["main.py", "app.py", "server.py"].find((f) => has(tree, f));
  let start: string;
  if (web) {
    start = web;
    notes.push(`start: the Procfile's web process: ${web}`);
  } else if (entry) {
    start = `python ${entry}`;
    notes.push(`start: ${start}`);
  } else if ((installable || setupPy) && scripts.length === 1) {
    start = scripts[0]!;
    notes.push(`start: pyproject.toml's one script: ${start}`);
  } else {
    return fail(
      "NoStartCommand",
      `no main.py, app.py or server.py${scripts.length > 1 ? `, and pyproject.toml has several scripts (${scripts.join(", ")})` : ""}: add a main.py that serves on $PORT, or a Procfile with a web: line (e.g. web: gunicorn app:app --bind 0.0.0.0:$PORT)`,
    );
  }
  const installs: string[] = [];
  if (requirements) installs.push("pip install -r requirements.txt");
  if (installable || setupPy) installs.push("pip install .");
  notes.push(
    installs.length
      ? `install: ${installs.join(", then ")} into the virtual environment /app/.venv`
      : "no requirements: nothing to install",
  );
  const lines = [
    header(
      "python",
      [...["requirements.txt", "pyproject.toml", "setup.py", "main.py", "app.py"].filter((f) => has(tree, f))].join(", ") || "its files",
    ),
  ];
  const env = `ENV PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1 PORT=${DEFAULT_PORT}`;
  if (installs.length === 0) {
    lines.push(`FROM ${base}`, "WORKDIR /app", "COPY . .", env);
  } else {
    lines.push(
      `FROM ${base} AS build`,
      "USER root",
      "WORKDIR /app",
      "COPY . .",
      `RUN --mount=type=cache,id=berth-pip,target=/root/.cache/pip,sharing=locked \\\n    ${PIP_SYSTEM_CA}; ${PIP_NO_VERSION_CHECK}; \\\n    python -m venv /app/.venv && \\\n    ${installs.map((c) => `/app/.venv/bin/${c}`).join(" && \\\n    ")}`,
      "",
      `FROM ${base}`,
      "WORKDIR /app",
      "COPY --from=build /app /app",
      `${env} VIRTUAL_ENV=/app/.venv PATH=/app/.venv/bin:$PATH`,
    );
  }
  lines.push(`EXPOSE ${DEFAULT_PORT}`, `CMD ${shell(start)}`);
  return { ok: true, plan: { stack: "python", dockerfile: lines.join("\n") + "\n", start, notes: [] } };
}

// ---------------------------------------------------------------------------------------------
// Go

/** The package `go build` builds: "." with .go files at the root, else the one directory under cmd/ (or the one named like the module). */
export function goMainPackage(
  files: readonly string[],
  goMod: string | undefined,
): { ok: true; pkg: string } | { ok: false; message: string } {
  if (files.some((f) => /^[^/]+\.go$/.test(f) && !f.endsWith("_test.go"))) return { ok: true, pkg: "." };
  const cmds = [...new Set(files.map((f) => /^cmd\/([^/]+)\/[^/]+\.go$/.exec(f)?.[1]).filter((d): d is string => d !== undefined))].sort();
  if (cmds.length === 1) return { ok: true, pkg: `./cmd/${cmds[0]}` };
  const module = /^\s*module\s+(\S+)/m.exec(goMod ?? "")?.[1];
  const named = module?.split("/").at(-1);
  if (named && cmds.includes(named)) return { ok: true, pkg: `./cmd/${named}` };
  return {
    ok: false,
    message: cmds.length
      ? `several commands under cmd/ (${cmds.join(", ")}) and none is named after the module: add a Dockerfile and set dockerfilePath`
      : "no .go files at the root and no cmd/<name>/: put the main package at the root, or add a Dockerfile and set dockerfilePath",
  };
}

function planGo(tree: SourceTree, base: string, notes: string[]): Detection {
  const main = goMainPackage(tree.files, tree.contents["go.mod"]);
  if (!main.ok) return fail("NoMainPackage", main.message);
  const goVersion = /^\s*go\s+(\S+)/m.exec(tree.contents["go.mod"] ?? "")?.[1];
  notes.push(
    `build: CGO_ENABLED=0 go build ${main.pkg} on ${base}${goVersion ? ` (go.mod asks for go ${goVersion}; the base image's Go must be at least that)` : ""}`,
  );
  notes.push(
    "runtime: the static binary alone on an empty image (FROM scratch) with the CA certificates of the build stage, as user 65532",
  );
  if (procfileWeb(tree.contents.Procfile)) notes.push("the Procfile is ignored: a Go app runs its binary (the runtime image has no shell)");
  const start = "/app/server";
  const dockerfile = [
    header("go", "go.mod"),
    `FROM ${base} AS build`,
    "USER root",
    "WORKDIR /src",
    "COPY . .",
    "RUN --mount=type=cache,id=berth-gomod,target=/root/go/pkg/mod,sharing=locked \\\n    --mount=type=cache,id=berth-gobuild,target=/root/.cache/go-build,sharing=locked \\\n" +
      `    mkdir -p /out/app /out/etc/ssl/certs && \\\n    (cp /etc/ssl/certs/ca-certificates.crt /out/etc/ssl/certs/ 2>/dev/null || true) && \\\n` +
      `    CGO_ENABLED=0 GOFLAGS=-mod=mod GOMODCACHE=/root/go/pkg/mod GOCACHE=/root/.cache/go-build go build -trimpath -ldflags="-s -w" -o /out/app/server ${main.pkg}`,
    "",
    "FROM scratch",
    "COPY --from=build /out/ /",
    "USER 65532:65532",
    `ENV PORT=${DEFAULT_PORT}`,
    `EXPOSE ${DEFAULT_PORT}`,
    `ENTRYPOINT ${exec([start])}`,
  ];
  return { ok: true, plan: { stack: "go", dockerfile: dockerfile.join("\n") + "\n", start, notes: [] } };
}

// ---------------------------------------------------------------------------------------------
// static sites

/** The directory a static site is served from: the root with an index.html, else public/ with one. */
export function staticRoot(tree: SourceTree): string | undefined {
  if (has(tree, "index.html")) return ".";
  if (has(tree, "public/index.html")) return "public";
  return undefined;
}

/** Where the static server's script lives in the image, and the files it serves. */
export const STATIC_SERVER_PATH = "/opt/berth/static-server.mjs";
export const STATIC_ROOT = "/srv/www";

function planStatic(tree: SourceTree, base: string, notes: string[]): Detection {
  const dir = staticRoot(tree)!;
  notes.push(
    `serving ${dir === "." ? "the repository's root" : `${dir}/`} with Berth's static server (Node.js, ${base}): files only, no directory listings, no dotfiles, index.html for directories`,
  );
  const start = `node ${STATIC_SERVER_PATH}`;
  const dockerfile = [
    header("static", dir === "." ? "index.html" : `${dir}/index.html`),
    `FROM ${base}`,
    `COPY <<"BERTH_STATIC_SERVER" ${STATIC_SERVER_PATH}`,
    STATIC_SERVER_SOURCE.trimEnd(),
    "BERTH_STATIC_SERVER",
    `COPY ${dir === "." ? "." : `${dir}/`} ${STATIC_ROOT}/`,
    `ENV PORT=${DEFAULT_PORT} BERTH_STATIC_ROOT=${STATIC_ROOT}`,
    `EXPOSE ${DEFAULT_PORT}`,
    `CMD ${exec(["node", STATIC_SERVER_PATH])}`,
  ];
  return { ok: true, plan: { stack: "static", dockerfile: dockerfile.join("\n") + "\n", start, notes: [] } };
}
