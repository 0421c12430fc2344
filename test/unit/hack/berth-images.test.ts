// The content tags of Berth's images (hack/berth-images.ts): a function of the files an image is
// built from (the paths the Dockerfile's stages copy from the build context, read from the
// Dockerfile), as .dockerignore leaves them in the build context, and of the base image's digest.
import test from "ava";
import { execFileSync } from "node:child_process";
import { chmodSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import {
  BERTH_IMAGES,
  IMAGE_CONSOLE_DIR,
  componentTag,
  componentTags,
  COMPONENTS,
  dockerfileInputs,
  fileDigests,
  goToolchain,
  imageInputs,
  inputsTag,
  namedInputs,
  outputNames,
  skipped,
} from "../../../hack/berth-images.ts";
import { pinned, root } from "../../helpers/binaries.ts";
import { guardModelDir } from "../../../hack/guard-model.ts";
import { buildConsole } from "../../../hack/console.ts";

const BASE = "sha256:" + "a".repeat(64);

function tree(): string {
  const dir = mkdtempSync(join(tmpdir(), "berth-tag-"));
  mkdirSync(join(dir, "api/db"), { recursive: true });
  writeFileSync(join(dir, "api/main.ts"), "export {};\n");
  writeFileSync(join(dir, "api/db/orm.ts"), "export const x = 1;\n");
  return dir;
}

test("the same files and base give the same tag; a changed file, mode, new file or base gives another", async (t) => {
  const dir = tree();
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const tag = async (base = BASE) => inputsTag({ files: await fileDigests(dir, ["api"]), baseDigest: base });
  const first = await tag();
  t.regex(first, /^[0-9a-f]{12}$/);
  t.is(await tag(), first);
  t.not(await tag("sha256:" + "b".repeat(64)), first, "a rebuilt base is another input");
  writeFileSync(join(dir, "api/db/orm.ts"), "export const x = 2;\n");
  const changed = await tag();
  t.not(changed, first);
  chmodSync(join(dir, "api/main.ts"), 0o755);
  t.not(await tag(), changed, "the executable bit is copied, so it counts");
  chmodSync(join(dir, "api/main.ts"), 0o644);
  t.is(await tag(), changed);
  writeFileSync(join(dir, "api/new.ts"), "");
  t.not(await tag(), changed, "an untracked file is in the build context too");
});

test("what .dockerignore keeps out of the context does not change the tag", async (t) => {
  const dir = tree();
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const before = inputsTag({ files: await fileDigests(dir, ["api"]), baseDigest: BASE });
  mkdirSync(join(dir, "api/node_modules/x"), { recursive: true });
  writeFileSync(join(dir, "api/node_modules/x/index.js"), "");
  writeFileSync(join(dir, "api/main.test.ts"), "");
  t.is(inputsTag({ files: await fileDigests(dir, ["api"]), baseDigest: BASE }), before);
  const ignore = readFileSync(join(root, ".dockerignore"), "utf8").split("\n");
  t.true(ignore.includes("**/node_modules") && ignore.includes("**/*.test.ts"), "the hash skips what .dockerignore skips");
  t.true(skipped("node_modules") && skipped("x.test.ts") && !skipped("main.ts"));
});

const DOCKERFILE = `ARG BASE=registry/berth/node:v1
FROM \${BASE} AS deps
COPY package.json package-lock.json ./
RUN --mount=type=bind,from=npm,target=/opt/npm \\
    --mount=type=cache,target=/root/.npm \\
    node /opt/npm/bin/npm-cli.js ci

# the runtime
FROM \${BASE} AS runtime
COPY --from=deps /app/node_modules ./node_modules
COPY ["toolkit/src", "./toolkit/src"]
COPY --chown=0:0 \\
     ./kube/ ./kube
FROM runtime AS one
COPY one ./one
FROM runtime AS two
RUN --mount=type=bind,source=scripts,target=/s /s/setup
COPY two/ ./two
`;

test("the inputs are the build-context paths a target's stages copy, read from the Dockerfile", (t) => {
  t.deepEqual(dockerfileInputs(DOCKERFILE, "deps"), ["package-lock.json", "package.json"]);
  t.deepEqual(
    dockerfileInputs(DOCKERFILE, "one"),
    ["kube", "one", "package-lock.json", "package.json", "toolkit/src"],
    "its stage, the stage it is FROM and the stage it copies --from",
  );
  t.deepEqual(
    dockerfileInputs(DOCKERFILE, "two"),
    ["kube", "package-lock.json", "package.json", "scripts", "toolkit/src", "two"],
    "a RUN's bind mount of the context is an input",
  );
  t.deepEqual(imageInputs(DOCKERFILE, "one"), [
    "Dockerfile",
    ".dockerignore",
    "kube",
    "one",
    "package-lock.json",
    "package.json",
    "toolkit/src",
  ]);
  t.throws(() => dockerfileInputs(DOCKERFILE, "three"), { message: /no stage three/ });
  t.throws(() => dockerfileInputs(DOCKERFILE.replace("COPY one", "COPY *.json"), "one"), { message: /glob/ });
});

test("a COPY added to the Dockerfile is a new input of the targets built on its stage, and only of them", (t) => {
  const before = { one: dockerfileInputs(DOCKERFILE, "one"), two: dockerfileInputs(DOCKERFILE, "two") };
  const inRuntime = DOCKERFILE.replace("FROM runtime AS one", "COPY crds ./crds\nFROM runtime AS one");
  t.deepEqual(dockerfileInputs(inRuntime, "one"), [...before.one, "crds"].sort());
  t.deepEqual(dockerfileInputs(inRuntime, "two"), [...before.two, "crds"].sort());
  const inTwo = `${DOCKERFILE}COPY extra.json ./\n`;
  t.deepEqual(dockerfileInputs(inTwo, "one"), before.one);
  t.deepEqual(dockerfileInputs(inTwo, "two"), [...before.two, "extra.json"].sort());
  const fromStage = `${DOCKERFILE}COPY --from=deps /app/package.json ./copy.json\n`;
  t.deepEqual(dockerfileInputs(fromStage, "two"), before.two, "a COPY --from another stage reads no new file of the context");
  const covered = DOCKERFILE.replace("FROM runtime AS one", "COPY toolkit ./toolkit\nFROM runtime AS one");
  t.deepEqual(
    dockerfileInputs(covered, "one"),
    ["kube", "one", "package-lock.json", "package.json", "toolkit"],
    "a path under another is not listed twice",
  );
});

test("the repository's Dockerfile: each image's inputs are there, its own code and not the other's; the tags of both at once are those of each alone", async (t) => {
  const dockerfile = readFileSync(join(root, "Dockerfile"), "utf8");
  for (const c of ["api", "operator"] as const) {
    const inputs = imageInputs(dockerfile, BERTH_IMAGES[c].target);
    const other = BERTH_IMAGES[c === "api" ? "operator" : "api"].code;
    t.true(inputs.includes(BERTH_IMAGES[c].code) && !inputs.includes(other), `${c}: ${inputs.join(" ")}`);
    t.true(
      ["package.json", "package-lock.json", "kube", "crds"].every((p) => inputs.includes(p)),
      `${c}: ${inputs.join(" ")}`,
    );
    // the toolkit is the API's (its guards); the operator never loads it
    t.is(inputs.includes("toolkit/src") && inputs.includes("toolkit/package.json"), c === "api", `${c}: ${inputs.join(" ")}`);
    t.true((await fileDigests(root, inputs)).length > 50);
  }
  const tags = await componentTags(BASE);
  for (const c of COMPONENTS) t.is(tags[c], await componentTag(c, BASE), c);
  t.is(new Set(COMPONENTS.map((c) => tags[c])).size, COMPONENTS.length, "each image has its own tag");
});

test("the builder image is built from operator/builder, the address policy and package.json only (no dependencies, no other code), and its tag follows buildctl's version; the Python and Go bases from no file of the repository, Go's tag follows the toolchain's version", async (t) => {
  const dockerfile = readFileSync(join(root, "Dockerfile"), "utf8");
  t.deepEqual(imageInputs(dockerfile, BERTH_IMAGES.builder.target), [
    "Dockerfile",
    ".dockerignore",
    "kube/addresses.ts",
    "operator/builder",
    "package.json",
  ]);
  t.deepEqual(imageInputs(dockerfile, BERTH_IMAGES.python.target), ["Dockerfile", ".dockerignore"]);
  t.deepEqual(
    imageInputs(dockerfile, BERTH_IMAGES.go.target),
    ["Dockerfile", ".dockerignore"],
    "the toolchain is the named context go, not the repository's",
  );
  t.deepEqual(namedInputs("go"), {
    go: execFileSync("go", ["env", "GOVERSION"], { encoding: "utf8", env: { ...process.env, GOTOOLCHAIN: "local" } }).trim(),
  });
  t.regex(goToolchain().version, /^go1\.\d+/);
  t.deepEqual(namedInputs("builder"), { buildctl: pinned("BUILDKIT_VERSION") });
  await buildConsole(IMAGE_CONSOLE_DIR);
  const api = namedInputs("api");
  t.is(api.guardModel, (JSON.parse(readFileSync(join(guardModelDir(), "model.json"), "utf8")) as { sha256: string }).sha256);
  t.regex(api.console ?? "", /^sha256:[0-9a-f]{64}$/, "the console's built files are in the API's tag");
  await buildConsole(IMAGE_CONSOLE_DIR);
  t.is(namedInputs("api").console, api.console, "the same sources build the same console");
  t.deepEqual(namedInputs("operator"), {});
  const files: [string, string][] = [["operator/builder/main.ts", "-sha256:x"]];
  t.not(inputsTag({ files, baseDigest: BASE, guardModel: "a" }), inputsTag({ files, baseDigest: BASE, guardModel: "b" }));
  t.not(inputsTag({ files, baseDigest: BASE, console: "a" }), inputsTag({ files, baseDigest: BASE, console: "b" }));
  t.not(inputsTag({ files, baseDigest: BASE, buildctl: "v0.34.2" }), inputsTag({ files, baseDigest: BASE, buildctl: "v0.35.0" }));
  t.not(inputsTag({ files, baseDigest: BASE, go: "go1.26.8" }), inputsTag({ files, baseDigest: BASE, go: "go1.27.3" }));
  t.is(inputsTag({ files, baseDigest: BASE }), inputsTag({ files, baseDigest: BASE, buildctl: "" }), "no buildctl: the tag of before");
  t.is(outputNames("127.0.0.1:5000", "api", "abc"), "name=127.0.0.1:5000/berth/berth-api:abc");
  t.is(outputNames("127.0.0.1:5000", "python", "abc"), '"name=127.0.0.1:5000/berth/python:abc,127.0.0.1:5000/berth/python:v1"');
});
