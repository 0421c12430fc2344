// hack/lib/pinned.ts reads hack/lib/common.sh: its binary paths are the ones bin_path prints, in
// the same cache, and the environment overrides a version and the cache as it does there.
import test from "ava";
import { execFileSync } from "node:child_process";
import { join } from "node:path";
import { binPath, cacheRoot, pinned } from "../../../hack/lib/pinned.ts";

const root = join(import.meta.dirname, "../../..");
const binPathSh = (name: string, env: NodeJS.ProcessEnv = process.env) =>
  execFileSync("bash", ["-c", 'source hack/lib/common.sh && bin_path "$1"', "bin_path", name], { cwd: root, env, encoding: "utf8" }).trim();

test("binPath is bin_path of hack/lib/common.sh, for one name of each kind of line", (t) => {
  for (const name of ["kubectl", "containerd-shim-runc-v2", "runc", "cni", "registry", "buildctl", "helm"])
    t.is(binPath(name), binPathSh(name), name);
  t.throws(() => binPath("nope"), { message: /knows no binary nope/ });
});

test("the environment overrides a pinned version and the cache, as in common.sh", (t) => {
  const saved = { ...process.env };
  t.teardown(() => {
    process.env = saved;
  });
  process.env.BERTH_CACHE = "/tmp/berth-cache-test";
  process.env.BUILDKIT_VERSION = "v0.0.1";
  t.is(cacheRoot(), "/tmp/berth-cache-test");
  t.is(pinned("BUILDKIT_VERSION"), "v0.0.1");
  t.is(binPath("buildctl"), "/tmp/berth-cache-test/bin/buildctl-v0.0.1");
  t.is(binPath("buildctl"), binPathSh("buildctl", process.env));
  t.throws(() => pinned("NO_SUCH_VERSION"), { message: /not pinned/ });
});
