// The TypeScript toolkit as its npm package: `npm pack` of toolkit/ (its prepack builds dist/ with
// the repository's TypeScript), made once per content of what the pack reads and kept in the cache,
// never in the repository. What installs the toolkit as a user does takes this tarball: the sample
// service's node_modules (hack/images.ts sampleDeps) and the package's own test
// (test/integration/toolkit-package.test.ts).
//
// The pack runs in a copy of toolkit/ (beside a copy of the root tsconfig.json it extends and a
// link to the root node_modules, for tsc and the types), not in toolkit/ itself: prepack empties
// and rewrites dist/, and two packs at once in one directory (tests run in parallel) would read
// each other's half-written dist/.
//
//   node hack/lib/toolkit-package.ts    packs when the cache lacks this content; prints the tarball's path
import { execFileSync } from "node:child_process";
import { createHash } from "node:crypto";
import { copyFileSync, mkdirSync, readdirSync, readFileSync, rmSync, statSync, symlinkSync, writeFileSync } from "node:fs";
import { dirname, join, relative } from "node:path";
import { cachedDir } from "./pinned.ts";

const root = join(import.meta.dirname, "../..");
const toolkitDir = join(root, "toolkit");

/** Bump when the way the package is made changes without a change to what the key hashes. */
const RECIPE = 1;
/** Under toolkit/ but not read by the pack: its output, installed packages, the Python toolkit. */
const NOT_PACKED = new Set(["dist", "node_modules", "python"]);

export interface PackedToolkit {
  /** the .tgz `npm pack` wrote */
  tarball: string;
  /** its sha256, hex: the package's content (npm pack writes the same bytes for the same files) */
  sha256: string;
  version: string;
  /** `npm pack --json`'s: the files in the tarball (under package/), its size and unpacked size */
  files: string[];
  size: number;
  unpackedSize: number;
}

/** The files the pack reads, sorted: toolkit/ but its output and the Python toolkit, and the root tsconfig.json its build extends. */
export function toolkitPackInputs(): string[] {
  const out: string[] = [];
  const walk = (dir: string): void => {
    for (const name of readdirSync(dir).sort()) {
      const p = join(dir, name);
      if (dir === toolkitDir && NOT_PACKED.has(name)) continue;
      if (statSync(p).isDirectory()) walk(p);
      else out.push(p);
    }
  };
  walk(toolkitDir);
  return [join(root, "tsconfig.json"), ...out];
}

/** The key of the package: the bytes of what the pack reads and the TypeScript that compiles it. */
export function toolkitPackKey(): string {
  const typescript = (JSON.parse(readFileSync(join(root, "node_modules/typescript/package.json"), "utf8")) as { version: string }).version;
  const h = createHash("sha256").update(JSON.stringify({ recipe: RECIPE, typescript }));
  for (const f of toolkitPackInputs()) h.update(`\0${relative(root, f)}\0`).update(readFileSync(f));
  return h.digest("hex").slice(0, 16);
}

/** The toolkit's npm package: `npm pack` of a copy of toolkit/, made once per toolkitPackKey under the cache. */
export function packedToolkit(): PackedToolkit {
  const dir = cachedDir("toolkit-package", toolkitPackKey(), "pack.json", (tmp) => {
    const work = join(tmp, "work");
    for (const f of toolkitPackInputs()) {
      const to = join(work, relative(root, f));
      mkdirSync(dirname(to), { recursive: true });
      copyFileSync(f, to);
    }
    symlinkSync(join(root, "node_modules"), join(work, "node_modules"));
    const out = execFileSync("npm", ["pack", "--json", "--pack-destination", tmp], {
      cwd: join(work, "toolkit"),
      encoding: "utf8",
      stdio: ["ignore", "pipe", "pipe"],
      env: { ...process.env, npm_config_update_notifier: "false", npm_config_fund: "false", npm_config_audit: "false" },
      maxBuffer: 64 << 20,
    });
    // the JSON follows what prepack's build printed
    const [packed] = JSON.parse(out.slice(out.indexOf("["))) as {
      filename: string;
      version: string;
      size: number;
      unpackedSize: number;
      files: { path: string }[];
    }[];
    if (!packed) throw new Error(`npm pack printed no package: ${out}`);
    rmSync(work, { recursive: true, force: true });
    const record = {
      filename: packed.filename,
      sha256: createHash("sha256")
        .update(readFileSync(join(tmp, packed.filename)))
        .digest("hex"),
      version: packed.version,
      files: packed.files.map((f) => f.path).sort(),
      size: packed.size,
      unpackedSize: packed.unpackedSize,
    };
    writeFileSync(join(tmp, "pack.json"), JSON.stringify(record, null, 2) + "\n");
  });
  const { filename, ...record } = JSON.parse(readFileSync(join(dir, "pack.json"), "utf8")) as Omit<PackedToolkit, "tarball"> & {
    filename: string;
  };
  return { tarball: join(dir, filename), ...record };
}

if (import.meta.main) console.log(packedToolkit().tarball);
