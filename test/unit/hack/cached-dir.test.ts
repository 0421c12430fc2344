// cachedDir (hack/lib/pinned.ts): a cache directory per key, built once into a temporary sibling
// and renamed into place, the other keys' directories removed once unused for a week, nothing
// left by a failed build; keyedVenv (hack/lib/python.ts) prunes its family's older keys alike.
import test from "ava";
import { existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, statSync, utimesSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { CACHE_KEEP_UNUSED_MS, cachedDir } from "../../../hack/lib/pinned.ts";
import { keyedVenv, keyedVenvName } from "../../../hack/lib/python.ts";

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

/** Sets `file`'s times to `ms` milliseconds ago. */
function usedAgo(file: string, ms: number): void {
  const then = new Date(Date.now() - ms);
  utimesSync(file, then, then);
}

const DAY = 24 * 3600 * 1000;

test.serial("built once per key; another key's directory goes once unused for a week", (t) => {
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
  t.deepEqual(readdirSync(join(root, "area")).sort(), [A, B], "A was used a moment ago: kept, no temporary left");
  usedAgo(join(a, "done"), CACHE_KEEP_UNUSED_MS - DAY);
  cachedDir("area", B, "done", build);
  t.true(existsSync(a), "six days unused: still kept");
  usedAgo(join(a, "done"), CACHE_KEEP_UNUSED_MS + DAY);
  cachedDir("area", B, "done", build);
  t.is(builds, 2, "found, not built again");
  t.deepEqual(readdirSync(join(root, "area")), [B], "eight days unused: removed by a call that found its own key");
});

test.serial("a second checkout's new key leaves the key a run in the first one is reading", (t) => {
  // Two checkouts on one machine: a suite in the first reads the model it made at set-up (key A)
  // while the second builds its own (key B). Removing A there took a running suite's model away.
  withCache(t);
  const build = (tmp: string) => writeFileSync(join(tmp, "model.json"), "{}");
  const first = cachedDir("guard-model", A, "model.json", build);
  const second = cachedDir("guard-model", B, "model.json", build);
  t.not(first, second);
  t.true(existsSync(join(first, "model.json")), "the first checkout's model is still there");
  t.true(existsSync(join(second, "model.json")));
});

test.serial("a call marks its key used", (t) => {
  const root = withCache(t);
  const build = (tmp: string) => writeFileSync(join(tmp, "done"), "");
  const done = join(cachedDir("area", A, "done", build), "done");
  usedAgo(done, 3 * DAY);
  cachedDir("area", A, "done", build);
  t.true(Date.now() - statSync(done).mtimeMs < DAY, "used now");
  t.true(existsSync(join(root, "area", A)));
});

test.serial("keyedVenv: a family's older key unused for a week goes, other families and names stay", (t) => {
  const root = withCache(t);
  const venv = (name: string, agoMs: number) => {
    mkdirSync(join(root, name, "bin"), { recursive: true });
    writeFileSync(join(root, name, ".berth-installed"), "");
    usedAgo(join(root, name, ".berth-installed"), agoMs);
  };
  venv("guard-model-aaaaaaaaaaaa", CACHE_KEEP_UNUSED_MS + DAY); // the family's old key, unused
  venv("guard-model-cccccccccccc", DAY); // another checkout's key, used yesterday
  const current = keyedVenvName("guard-model", ["nothing-installed"]);
  venv(current, 2 * CACHE_KEEP_UNUSED_MS); // the one asked for: found, not made
  venv("toolkit-python-aaaaaaaaaaaa", CACHE_KEEP_UNUSED_MS + DAY); // another family
  venv("alt-profanity-check-0.2.1", CACHE_KEEP_UNUSED_MS + DAY); // a name without a key
  mkdirSync(join(root, "guard-model", A), { recursive: true }); // cachedDir's area beside them
  t.is(keyedVenv("guard-model", ["nothing-installed"]), join(root, current, "bin/python"));
  t.deepEqual(
    readdirSync(root).sort(),
    ["alt-profanity-check-0.2.1", "guard-model", current, "guard-model-cccccccccccc", "toolkit-python-aaaaaaaaaaaa"].sort(),
  );
  t.true(Date.now() - statSync(join(root, current, ".berth-installed")).mtimeMs < DAY, "marked used");
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
