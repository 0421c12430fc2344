// cachedDir (hack/lib/pinned.ts): a cache directory per key, built once into a temporary sibling
// and renamed into place, the other keys' directories removed, nothing left by a failed build.
import test from "ava";
import { existsSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { cachedDir } from "../../../hack/lib/pinned.ts";

const A = "a".repeat(16);
const B = "b".repeat(16);

function withCache(t: { teardown: (fn: () => void) => void }): string {
  const root = mkdtempSync(join(tmpdir(), "berth-cached-dir-"));
  const before = process.env.BERTH_CACHE;
  process.env.BERTH_CACHE = root;
  t.teardown(() => {
    if (before === undefined) delete process.env.BERTH_CACHE;
    else process.env.BERTH_CACHE = before;
    rmSync(root, { recursive: true, force: true });
  });
  return root;
}

test.serial("built once per key; a new key's directory replaces the old one", (t) => {
  const root = withCache(t);
  let builds = 0;
  const build = (tmp: string) => {
    builds++;
    writeFileSync(join(tmp, "done"), "");
  };
  const a = cachedDir("area", A, "done", build);
  t.is(a, join(root, "area", A));
  t.is(cachedDir("area", A, "done", build), a);
  t.is(builds, 1, "the second call finds the directory");
  cachedDir("area", B, "done", build);
  t.is(builds, 2);
  t.deepEqual(readdirSync(join(root, "area")), [B], "the other key's directory is gone, no temporary left");
});

test.serial("a failed build, or one that never says it is done, leaves nothing in place", (t) => {
  const root = withCache(t);
  t.throws(() =>
    cachedDir("area", A, "done", (tmp) => {
      writeFileSync(join(tmp, "half"), "");
      throw new Error("pip failed");
    }),
  );
  t.throws(() => cachedDir("area", A, "done", () => {}), { message: /wrote no done/ });
  t.deepEqual(readdirSync(join(root, "area")), []);
  t.false(existsSync(join(root, "area", A)));
});
