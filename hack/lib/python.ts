// Python tools the hack scripts run (the accuracy bench's candidates, the guard classifier's
// build): each in its own virtualenv under the cache, made once from pinned packages, never in
// the repository.
import { execFileSync } from "node:child_process";
import { createHash } from "node:crypto";
import { existsSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { cacheRoot } from "./pinned.ts";

/** The python of a virtualenv under the cache named `name` with `packages` installed (made once). */
export function pythonVenv(name: string, packages: readonly string[]): string {
  const dir = join(cacheRoot(), name);
  if (!existsSync(join(dir, ".berth-installed"))) {
    console.error(`installing ${packages.join(" ")} into ${dir}`);
    execFileSync("python3", ["-m", "venv", "--clear", dir], { stdio: ["ignore", 2, 2] });
    execFileSync(join(dir, "bin/pip"), ["install", "--quiet", "--disable-pip-version-check", ...packages], { stdio: ["ignore", 2, 2] });
    writeFileSync(join(dir, ".berth-installed"), "");
  }
  return join(dir, "bin/python");
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
  const key = createHash("sha256").update(TOOLKIT_PYTHON_PACKAGES.join(" ")).digest("hex").slice(0, 12);
  return pythonVenv(`toolkit-python-${key}`, TOOLKIT_PYTHON_PACKAGES);
}

// `node hack/lib/python.ts toolkit`: makes the toolkit's virtualenv and prints its python
if (import.meta.main) {
  if (process.argv[2] !== "toolkit") throw new Error("usage: node hack/lib/python.ts toolkit");
  console.log(toolkitPython());
}
