// What hack/lib/common.sh defines, for TypeScript: the cache root, the pinned versions and the
// paths of the cached binaries (its bin_path). Pure reads of common.sh and the environment, which
// overrides a version as it does there.
import { readFileSync } from "node:fs";
import { homedir } from "node:os";
import { join } from "node:path";

const commonSh = readFileSync(join(import.meta.dirname, "common.sh"), "utf8");

/** $BERTH_CACHE, else ~/.cache/berth (common.sh's BERTH_CACHE): everything built or downloaded. */
export function cacheRoot(): string {
  return process.env.BERTH_CACHE || join(homedir(), ".cache/berth");
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
 * The cached binary of the pinned version, as common.sh's bin_path prints it: its case lines
 * (`a|b) echo "$BERTH_BIN/$1-$VERSION" ;;` or a fixed name) are read, not copied.
 */
export function binPath(name: string): string {
  const body = /^bin_path\(\) \{[^\n]*\n([\s\S]*?)\n\}/m.exec(commonSh)?.[1] ?? "";
  for (const m of body.matchAll(/^\s*([\w|-]+)\) echo "\$BERTH_BIN\/(\$1|[\w-]+)-\$(\w+)" ;;/gm)) {
    if (m[1]!.split("|").includes(name)) return join(cacheRoot(), "bin", `${m[2] === "$1" ? name : m[2]}-${pinned(m[3]!)}`);
  }
  throw new Error(`hack/lib/common.sh's bin_path knows no binary ${name}`);
}
