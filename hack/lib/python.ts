// Python tools the hack scripts run (the accuracy bench's candidates, the guard classifier's
// build): each in its own virtualenv under the cache, made once from pinned packages, never in
// the repository.
import { execFileSync } from "node:child_process";
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
