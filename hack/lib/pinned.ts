// What hack/lib/common.sh defines, for TypeScript: the cache root, the pinned versions and the
// paths of the cached binaries (its bin_path). Pure reads of common.sh and the environment, which
// overrides a version as it does there.
import { createHash } from "node:crypto";
import { existsSync, mkdirSync, readdirSync, readFileSync, renameSync, rmSync } from "node:fs";
import { homedir } from "node:os";
import { join, relative } from "node:path";

const commonSh = readFileSync(join(import.meta.dirname, "common.sh"), "utf8");

/** $BERTH_CACHE, else ~/.cache/berth (common.sh's BERTH_CACHE): everything built or downloaded. */
export function cacheRoot(): string {
  return process.env.BERTH_CACHE || join(homedir(), ".cache/berth");
}

/**
 * A directory of the cache made once per key: `<cache>/<area>/<key>` (key: 16 hex digits), built by
 * `build` into a temporary sibling and renamed into place, so that a directory there is always
 * whole; `done` is the file whose presence says so. A concurrent build of the same key that
 * renamed first wins (its result is this one's). The directories of other keys are removed once
 * this one is in place (builds under way elsewhere, *.tmp-<pid>, are left alone).
 */
export function cachedDir(area: string, key: string, done: string, build: (tmp: string) => void): string {
  const parent = join(cacheRoot(), area);
  const dir = join(parent, key);
  if (existsSync(join(dir, done))) return dir;
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
  for (const old of readdirSync(parent)) {
    if (/^[0-9a-f]{16}$/.test(old) && old !== key) rmSync(join(parent, old), { recursive: true, force: true });
  }
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
