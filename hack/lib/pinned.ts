// What hack/lib/common.sh defines, for TypeScript: the cache root, the pinned versions and the
// paths of the cached binaries (its bin_path). Pure reads of common.sh and the environment, which
// overrides a version as it does there.
import { createHash } from "node:crypto";
import { existsSync, mkdirSync, readdirSync, readFileSync, renameSync, rmSync, statSync, utimesSync } from "node:fs";
import { homedir } from "node:os";
import { join, relative } from "node:path";

const commonSh = readFileSync(join(import.meta.dirname, "common.sh"), "utf8");

/** $BERTH_CACHE, else ~/.cache/berth (common.sh's BERTH_CACHE): everything built or downloaded. */
export function cacheRoot(): string {
  return process.env.BERTH_CACHE || join(homedir(), ".cache/berth");
}

/**
 * How long a keyed entry of the cache (cachedDir, keyedVenv) is kept after its last use once a
 * newer key is in use: long enough that a second checkout of another commit on the same machine
 * (its own training items, its own pins) never removes what a run in the first one is reading,
 * short enough that a developer's cache does not keep every virtualenv it ever made.
 */
export const CACHE_KEEP_UNUSED_MS = 7 * 24 * 3600 * 1000;

/** Marks `file` (an entry's completion marker) as used now: the time pruneUnused reads. */
export function markUsed(file: string): void {
  const now = new Date();
  utimesSync(file, now, now);
}

/** When the entry `dir` was last used: its marker's time, else the directory's; undefined when gone. */
function lastUse(dir: string, done: string): number | undefined {
  for (const p of [join(dir, done), dir]) {
    try {
      return statSync(p).mtimeMs;
    } catch {
      // no marker (an unfinished build): the directory's own time; neither: removed meanwhile
    }
  }
  return undefined;
}

/**
 * Removes the entries of `parent` whose name `isKey` accepts, other than `keep`, whose marker
 * (`done`, inside each) was last used more than CACHE_KEEP_UNUSED_MS ago, or is missing (a build
 * that never finished; builds under way are *.tmp-<pid> and do not match).
 */
export function pruneUnused(parent: string, isKey: (name: string) => boolean, keep: string, done: string, now: number = Date.now()): void {
  for (const name of readdirSync(parent)) {
    if (name === keep || !isKey(name)) continue;
    const used = lastUse(join(parent, name), done);
    if (used !== undefined && now - used > CACHE_KEEP_UNUSED_MS) rmSync(join(parent, name), { recursive: true, force: true });
  }
}

/**
 * A directory of the cache made once per key: `<cache>/<area>/<key>` (key: 16 hex digits), built by
 * `build` into a temporary sibling and renamed into place, so that a directory there is always
 * whole; `done` is the file whose presence says so, and whose time says when the key was last
 * used (each call marks it). A concurrent build of the same key that renamed first wins (its
 * result is this one's). Once this one is in place (found or built), the directories of other keys unused for
 * CACHE_KEEP_UNUSED_MS are removed (builds under way elsewhere, *.tmp-<pid>, are left alone).
 */
export function cachedDir(area: string, key: string, done: string, build: (tmp: string) => void): string {
  const parent = join(cacheRoot(), area);
  const dir = join(parent, key);
  if (!existsSync(join(dir, done))) {
    const tmp = `${dir}.tmp-${process.pid}`;
    rmSync(tmp, { recursive: true, force: true });
    mkdirSync(tmp, { recursive: true });
    try {
      build(tmp);
    } catch (err) {
      rmSync(tmp, { recursive: true, force: true });
      throw err;
    }
    if (!existsSync(join(tmp, done))) {
      rmSync(tmp, { recursive: true, force: true });
      throw new Error(`${area}: the build wrote no ${done}`);
    }
    try {
      renameSync(tmp, dir);
    } catch (err) {
      rmSync(tmp, { recursive: true, force: true });
      if (!existsSync(join(dir, done))) throw err;
    }
  }
  markUsed(join(dir, done));
  pruneUnused(parent, (name) => /^[0-9a-f]{16}$/.test(name), key, done);
  return dir;
}

/** A version pinned in common.sh (`NAME="${NAME:-v1.2.3}"`), overridable from the environment like there. */
export function pinned(name: string): string {
  const fromEnv = process.env[name];
  if (fromEnv) return fromEnv;
  const m = new RegExp(`^${name}="\\$\\{${name}:-([^}"]+)\\}"`, "m").exec(commonSh);
  if (!m?.[1]) throw new Error(`${name} is not pinned in hack/lib/common.sh`);
  return m[1];
}

/**
 * A Go module's key, as common.sh's go_module_key prints it: the first 8 hex digits of the sha256
 * of its files (hack/go/<module>, in byte order of their paths) one after the other.
 */
export function goModuleKey(module: string): string {
  const dir = join(import.meta.dirname, "..", "go", module);
  const files = readdirSync(dir, { recursive: true, withFileTypes: true })
    .filter((e) => e.isFile())
    .map((e) => `./${relative(dir, join(e.parentPath, e.name))}`)
    .sort((a, b) => Buffer.compare(Buffer.from(a), Buffer.from(b)));
  const hash = createHash("sha256");
  for (const f of files) hash.update(readFileSync(join(dir, f)));
  return hash.digest("hex").slice(0, 8);
}

/**
 * The cached binary of the pinned version, as common.sh's bin_path prints it: its case lines
 * (`a|b) echo "$BERTH_BIN/$1-$VERSION" ;;`, a fixed name for $1, and `-$(go_module_key m)` after
 * the version) are read, not copied.
 */
export function binPath(name: string): string {
  const body = /^bin_path\(\) \{[^\n]*\n([\s\S]*?)\n\}/m.exec(commonSh)?.[1] ?? "";
  for (const m of body.matchAll(/^\s*([\w|-]+)\) echo "\$BERTH_BIN\/(\$1|[\w-]+)-\$(\w+)(?:-\$\(go_module_key (\w+)\))?" ;;/gm)) {
    if (!m[1]!.split("|").includes(name)) continue;
    const key = m[4] ? `-${goModuleKey(m[4])}` : "";
    return join(cacheRoot(), "bin", `${m[2] === "$1" ? name : m[2]}-${pinned(m[3]!)}${key}`);
  }
  throw new Error(`hack/lib/common.sh's bin_path knows no binary ${name}`);
}
