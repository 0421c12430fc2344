// Stack detection (operator/builder/detect.ts): a commit's file list and a few file texts in, the
// build plan (a generated Dockerfile) or a clear failure out. Also runs the static sites' server.
import test from "ava";
import { spawn } from "node:child_process";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { BaseImages, Detection, Plan, SourceTree } from "../../../operator/builder/detect.ts";
import { detect, detectStack, goMainPackage, hasRequirements, procfileWeb, pyprojectScripts } from "../../../operator/builder/detect.ts";
import { STATIC_SERVER_SOURCE } from "../../../operator/builder/static-server.ts";

const BASES: BaseImages = { node: "reg/berth/node:v1", python: "reg/berth/python:v1", go: "reg/berth/go:v1", static: "reg/berth/node:v1" };

function tree(files: Record<string, string>): SourceTree {
  const reads = ["package.json", "requirements.txt", "pyproject.toml", "go.mod", "Procfile"];
  return { files: Object.keys(files), contents: Object.fromEntries(Object.entries(files).filter(([k]) => reads.includes(k))) };
}

function plan(d: Detection): Plan {
  if (!d.ok) throw new Error(`expected a plan, got ${d.reason}: ${d.message}`);
  return d.plan;
}

/** The Dockerfile's instructions (continuations joined, comments and blank lines dropped). */
function instructions(dockerfile: string): string[] {
  return dockerfile
    .replace(/\\\n\s*/g, "")
    .split("\n")
    .filter((l) => l.trim() !== "" && !l.startsWith("#"));
}

const cmd = (p: Plan) => instructions(p.dockerfile).find((l) => /^(CMD|ENTRYPOINT) /.test(l));

test("the stack: Go before Python before Node.js before a static site; nothing known is none", (t) => {
  t.is(detectStack(tree({ "go.mod": "module x", "package.json": "{}" })), "go");
  t.is(detectStack(tree({ "requirements.txt": "", "package.json": "{}" })), "python");
  for (const f of ["pyproject.toml", "setup.py", "Pipfile", "main.py", "app.py"]) t.is(detectStack(tree({ [f]: "" })), "python", f);
  t.is(detectStack(tree({ "package.json": "{}", "index.html": "" })), "node");
  t.is(detectStack(tree({ "index.html": "" })), "static");
  t.is(detectStack(tree({ "public/index.html": "" })), "static");
  t.is(detectStack(tree({ "README.md": "", "src/index.html": "", "lib/main.py": "" })), undefined, "only the root counts");
  const none = detect(tree({ "README.md": "" }), BASES);
  t.like(none, { ok: false, reason: "StackNotDetected" });
  t.regex((none as { message: string }).message, /dockerfilePath/);
});

test("a stack without a configured base image fails with a reason that says which", (t) => {
  for (const [files, stack] of [
    [{ "package.json": "{}", "server.js": "" }, "node"],
    [{ "main.py": "" }, "python"],
    [{ "go.mod": "", "main.go": "" }, "go"],
    [{ "index.html": "" }, "static"],
  ] as const) {
    const bases = { ...BASES };
    delete bases[stack];
    const d = detect(tree(files), bases);
    t.like(d, { ok: false, reason: "BaseImageNotConfigured" }, stack);
    t.regex((d as { message: string }).message, new RegExp(`baseImages\\.${stack}`));
  }
});

test("Node.js without dependencies: one stage on the node base, the start script through sh, PORT a default only", (t) => {
  const p = plan(
    detect(tree({ "package.json": JSON.stringify({ scripts: { start: "node server.js" } }), "server.js": "", VERSION: "1" }), BASES),
  );
  t.is(p.stack, "node");
  t.is(p.start, "node server.js");
  t.deepEqual(instructions(p.dockerfile), [
    "FROM reg/berth/node:v1",
    "WORKDIR /app",
    "COPY . .",
    "ENV NODE_ENV=production PORT=8080 PATH=/app/node_modules/.bin:$PATH",
    "EXPOSE 8080",
    'CMD ["/bin/sh","-c","node server.js"]',
  ]);
  t.false(p.dockerfile.includes("npm"), "nothing to install: no npm needed");
});

test("Node.js with dependencies and a lock: npm ci --omit=dev in a build stage that checks for npm; the runtime stage gets /app", (t) => {
  const p = plan(
    detect(
      tree({
        "package.json": JSON.stringify({ scripts: { start: "node index.js" }, dependencies: { koa: "3" } }),
        "package-lock.json": "{}",
      }),
      BASES,
    ),
  );
  const ins = instructions(p.dockerfile);
  t.deepEqual(ins.slice(0, 5), ["FROM reg/berth/node:v1 AS build", "USER root", "ENV NODE_USE_SYSTEM_CA=1", "WORKDIR /app", "COPY . ."]);
  const run = ins.find((l) => l.startsWith("RUN "))!;
  t.regex(run, /--mount=type=cache,id=berth-npm,target=\/root\/\.npm/);
  t.regex(run, /command -v npm .*has no npm/);
  t.regex(run, /npm ci --omit=dev --no-audit --no-fund$/);
  t.true(ins.includes("COPY --from=build /app /app"));
  t.is(ins.filter((l) => l.startsWith("FROM ")).length, 2);
  t.true(
    p.notes.some((n) => /needs npm/.test(n)),
    "the log says the base needs npm",
  );
  const noLock = plan(detect(tree({ "package.json": JSON.stringify({ main: "app.js", dependencies: { koa: "3" } }) }), BASES));
  t.regex(noLock.dockerfile, /npm install --omit=dev/);
  t.is(noLock.start, "node app.js", "main when there is no start script");
});

test("Node.js with a build script: all dependencies, npm run build, then pruned to production", (t) => {
  const p = plan(
    detect(
      tree({
        "package.json": JSON.stringify({
          scripts: { build: "tsc", start: "node dist/main.js" },
          dependencies: { a: "1" },
          devDependencies: { typescript: "6" },
        }),
        "package-lock.json": "",
      }),
      BASES,
    ),
  );
  const ins = instructions(p.dockerfile);
  t.true(
    ins.some((l) => /npm ci --no-audit --no-fund$/.test(l)),
    "devDependencies are installed for the build",
  );
  t.true(ins.includes("RUN npm run build"));
  t.true(ins.includes("RUN npm prune --omit=dev --no-audit --no-fund"));
  t.true(ins.indexOf("RUN npm run build") < ins.indexOf("RUN npm prune --omit=dev --no-audit --no-fund"));
});

test("Node.js start command: the Procfile's web line, else the start script, else main, else a common entry file; none is a clear failure", (t) => {
  const pkg = (o: object) => JSON.stringify(o);
  t.is(
    plan(
      detect(
        tree({ "package.json": pkg({ scripts: { start: "node a.js" } }), Procfile: "worker: x\nweb: node web.js --port $PORT\n" }),
        BASES,
      ),
    ).start,
    "node web.js --port $PORT",
  );
  t.is(plan(detect(tree({ "package.json": pkg({ scripts: { start: "node a.js" }, main: "b.js" }) }), BASES)).start, "node a.js");
  t.is(plan(detect(tree({ "package.json": pkg({ main: "b.js" }), "index.js": "" }), BASES)).start, "node b.js");
  t.is(plan(detect(tree({ "package.json": pkg({}), "index.js": "", "server.js": "" }), BASES)).start, "node server.js");
  t.is(
    plan(detect(tree({ "package.json": pkg({}), "server.ts": "" }), BASES)).start,
    "node server.ts",
    "Node.js 24 runs TypeScript by stripping types",
  );
  const none = detect(tree({ "package.json": pkg({ scripts: { test: "ava" } }), "lib/x.js": "" }), BASES);
  t.like(none, { ok: false, reason: "NoStartCommand" });
  t.regex((none as { message: string }).message, /\$PORT/);
});

test("Node.js: a package.json that is not an object, or another package manager's lock without npm's, fails clearly", (t) => {
  t.like(detect(tree({ "package.json": "{ nope" }), BASES), { ok: false, reason: "InvalidPackageJson" });
  t.like(detect(tree({ "package.json": "[]" }), BASES), { ok: false, reason: "InvalidPackageJson" });
  t.like(detect(tree({ "package.json": JSON.stringify({ main: "a.js" }), "yarn.lock": "" }), BASES), {
    ok: false,
    reason: "UnsupportedPackageManager",
  });
  t.like(detect(tree({ "package.json": JSON.stringify({ main: "a.js", packageManager: "pnpm@9.0.0" }) }), BASES), {
    ok: false,
    reason: "UnsupportedPackageManager",
  });
  t.true(
    detect(tree({ "package.json": JSON.stringify({ main: "a.js" }), "yarn.lock": "", "package-lock.json": "" }), BASES).ok,
    "npm's lock wins",
  );
});

test("a start command is JSON in the Dockerfile: quotes and backslashes survive", (t) => {
  const p = plan(detect(tree({ "package.json": JSON.stringify({ scripts: { start: `node -e "console.log('a\\\\b')"` } }) }), BASES));
  const c = cmd(p)!;
  t.deepEqual(JSON.parse(c.slice("CMD ".length)), ["/bin/sh", "-c", `node -e "console.log('a\\\\b')"`]);
});

test("Python, standard library only: one stage, python main.py, unbuffered output", (t) => {
  const p = plan(detect(tree({ "main.py": "", VERSION: "1" }), BASES));
  t.is(p.stack, "python");
  t.deepEqual(instructions(p.dockerfile), [
    "FROM reg/berth/python:v1",
    "WORKDIR /app",
    "COPY . .",
    "ENV PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1 PORT=8080",
    "EXPOSE 8080",
    'CMD ["/bin/sh","-c","python main.py"]',
  ]);
  t.is(plan(detect(tree({ "app.py": "" }), BASES)).start, "python app.py");
  t.is(
    plan(detect(tree({ "requirements.txt": "# nothing yet\n\n", "main.py": "" }), BASES)).dockerfile.includes("pip"),
    false,
    "an empty requirements.txt installs nothing",
  );
});

test("Python with requirements: a virtual environment built in a build stage, on PATH in the runtime stage", (t) => {
  const p = plan(
    detect(tree({ "requirements.txt": "flask==3.1\n", "app.py": "", Procfile: "web: gunicorn app:app --bind 0.0.0.0:$PORT" }), BASES),
  );
  const ins = instructions(p.dockerfile);
  t.is(p.start, "gunicorn app:app --bind 0.0.0.0:$PORT");
  const run = ins.find((l) => l.startsWith("RUN "))!;
  t.regex(run, /--mount=type=cache,id=berth-pip,target=\/root\/\.cache\/pip/);
  t.regex(run, /python -m venv \/app\/\.venv && \/app\/\.venv\/bin\/pip install -r requirements\.txt$/);
  t.regex(run, /export PIP_DISABLE_PIP_VERSION_CHECK=1; .*python -m venv/, "pip asks PyPI nothing of its own version");
  t.true(ins.includes("COPY --from=build /app /app"));
  t.true(ins.some((l) => l.startsWith("ENV ") && l.includes("PATH=/app/.venv/bin:$PATH") && l.includes("VIRTUAL_ENV=/app/.venv")));
  const proj = plan(detect(tree({ "pyproject.toml": '[project]\nname = "x"\n[project.scripts]\nserve = "x.main:run"\n' }), BASES));
  t.is(proj.start, "serve", "pyproject's one script");
  t.regex(proj.dockerfile, /\/app\/\.venv\/bin\/pip install \.$/m);
});

test("Python: no entry point, or a Pipfile alone, fails clearly", (t) => {
  t.like(detect(tree({ "requirements.txt": "flask\n", "wsgi.py": "" }), BASES), { ok: false, reason: "NoStartCommand" });
  t.like(detect(tree({ Pipfile: "", "main.py": "" }), BASES), { ok: false, reason: "UnsupportedPackageManager" });
});

test("requirements, Procfile and pyproject readers", (t) => {
  t.false(hasRequirements(""));
  t.false(hasRequirements("# c\n\n  \n--index-url https://x\n"));
  t.true(hasRequirements("requests>=2 # http\n"));
  t.true(hasRequirements("-r base.txt\n"));
  t.false(hasRequirements("--no-index\n--find-links wheels\n"), "index options alone install nothing");
  t.true(hasRequirements("--no-index\n--find-links wheels\nberth-toolkit[langchain]\n"));
  t.is(procfileWeb("release: x\nweb:  node a.js  \n"), "node a.js");
  t.is(procfileWeb("worker: x"), undefined);
  t.deepEqual(pyprojectScripts('[project]\nname="a"\n[project.scripts]\na = "m:f"\n"b-c" = "m:g"\n[tool.x]\nd = 1\n'), ["a", "b-c"]);
});

test("Go: a build stage on the go base, a static binary on an empty image, non-root", (t) => {
  const p = plan(detect(tree({ "go.mod": "module example.com/app\n\ngo 1.24\n", "main.go": "", "main_test.go": "" }), BASES));
  const ins = instructions(p.dockerfile);
  t.is(p.stack, "go");
  t.is(ins[0], "FROM reg/berth/go:v1 AS build");
  t.regex(
    ins.find((l) => l.startsWith("RUN "))!,
    /CGO_ENABLED=0 .*go build -trimpath .* -o \/out\/app\/server \.$/,
  );
  t.deepEqual(ins.slice(ins.indexOf("FROM scratch")), [
    "FROM scratch",
    "COPY --from=build /out/ /",
    "USER 65532:65532",
    "ENV PORT=8080",
    "EXPOSE 8080",
    'ENTRYPOINT ["/app/server"]',
  ]);
  t.true(p.notes.some((n) => /go 1\.24/.test(n)));
});

test("Go's main package: the root, else the one cmd/, else the one named after the module", (t) => {
  t.deepEqual(goMainPackage(["go.mod", "main.go"], ""), { ok: true, pkg: "." });
  t.deepEqual(goMainPackage(["go.mod", "cmd/api/main.go", "internal/x.go"], ""), { ok: true, pkg: "./cmd/api" });
  t.deepEqual(goMainPackage(["cmd/api/main.go", "cmd/tool/main.go"], "module github.com/a/tool"), { ok: true, pkg: "./cmd/tool" });
  t.false(goMainPackage(["cmd/api/main.go", "cmd/tool/main.go"], "module github.com/a/b").ok);
  t.false(goMainPackage(["main_test.go", "pkg/x.go"], "").ok);
  t.like(detect(tree({ "go.mod": "module a", "pkg/x.go": "" }), BASES), { ok: false, reason: "NoMainPackage" });
});

test("a static site: the server script written by a quoted heredoc, the site's directory copied to the served root", (t) => {
  const root = plan(detect(tree({ "index.html": "", "style.css": "" }), BASES));
  t.is(root.stack, "static");
  t.regex(root.dockerfile, /^COPY <<"BERTH_STATIC_SERVER" \/opt\/berth\/static-server\.mjs$/m);
  t.true(root.dockerfile.includes(STATIC_SERVER_SOURCE.trimEnd()));
  t.regex(root.dockerfile, /^COPY \. \/srv\/www\/$/m);
  t.is(cmd(root), 'CMD ["node","/opt/berth/static-server.mjs"]');
  t.false(STATIC_SERVER_SOURCE.split("\n").includes("BERTH_STATIC_SERVER"), "the heredoc's delimiter never appears inside it");
  t.regex(plan(detect(tree({ "public/index.html": "" }), BASES)).dockerfile, /^COPY public\/ \/srv\/www\/$/m);
});

test("a Dockerfile in the repository is mentioned, not used", (t) => {
  const p = plan(detect(tree({ Dockerfile: "FROM x", "main.py": "" }), BASES));
  t.true(p.notes.some((n) => /dockerfilePath/.test(n)));
  t.false(p.dockerfile.includes("FROM x"));
});

test("the static server serves files, index.html for directories, and nothing outside its root or hidden", async (t) => {
  const dir = mkdtempSync(join(tmpdir(), "berth-static-"));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  mkdirSync(join(dir, "www/docs"), { recursive: true });
  mkdirSync(join(dir, "www/.git"), { recursive: true });
  writeFileSync(join(dir, "www/index.html"), "<h1>home</h1>");
  writeFileSync(join(dir, "www/docs/index.html"), "docs");
  writeFileSync(join(dir, "www/app.js"), "1");
  writeFileSync(join(dir, "www/.git/config"), "secret");
  writeFileSync(join(dir, "outside.txt"), "outside");
  writeFileSync(join(dir, "server.mjs"), STATIC_SERVER_SOURCE);
  const port = 20000 + Math.floor(Math.random() * 20000);
  const child = spawn(process.execPath, [join(dir, "server.mjs")], {
    env: { PORT: String(port), BERTH_STATIC_ROOT: join(dir, "www") },
    stdio: ["ignore", "pipe", "inherit"],
  });
  t.teardown(() => child.kill());
  await new Promise<void>((resolve) => child.stdout.once("data", () => resolve()));
  const get = async (path: string, method = "GET") => {
    const r = await fetch(`http://127.0.0.1:${port}${path}`, { method });
    return { status: r.status, type: r.headers.get("content-type"), body: await r.text() };
  };
  t.like(await get("/"), { status: 200, type: "text/html; charset=utf-8", body: "<h1>home</h1>" });
  t.like(await get("/docs/"), { status: 200, body: "docs" });
  t.like(await get("/app.js?v=2"), { status: 200, type: "text/javascript; charset=utf-8", body: "1" });
  t.like(await get("/.git/config"), { status: 404 });
  t.like(await get("/../outside.txt"), { status: 404 });
  t.like(await get("/%2e%2e/outside.txt"), { status: 404 });
  t.like(await get("/missing"), { status: 404 });
  t.like(await get("/", "POST"), { status: 405 });
  t.like(await get("/", "HEAD"), { status: 200, body: "" });
});
