// The content tags of Berth's images (hack/berth-images.ts): a function of the files an image is
// built from, as .dockerignore leaves them in the build context, and of the base image's digest.
import test from "ava";
import { chmodSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { COMMON_INPUTS, fileDigests, inputsTag, skipped } from "../../hack/berth-images.ts";
import { root } from "../helpers/binaries.ts";

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

test("every input the hash reads exists in the repository and is copied by the Dockerfile", async (t) => {
  const dockerfile = readFileSync(join(root, "Dockerfile"), "utf8");
  for (const p of COMMON_INPUTS.filter((p) => p !== "Dockerfile" && p !== ".dockerignore")) {
    t.true(new RegExp(`^COPY .*\\b${p.replace(/[./]/g, (c) => `\\${c}`)}\\b`, "m").test(dockerfile), `the Dockerfile copies ${p}`);
  }
  t.true((await fileDigests(root, COMMON_INPUTS)).length > 50);
});
