// hack/lib/pinned.ts reads hack/lib/common.sh: its binary paths are the ones bin_path prints, in
// the same cache, and the environment overrides a version and the cache as it does there. And
// common.sh's module_versions_check holds hack/go's modules to the pinned versions.
import test from "ava";
import { execFileSync, spawnSync } from "node:child_process";
import { cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { binPath, cacheRoot, goModuleKey, pinned } from "../../../hack/lib/pinned.ts";

const root = join(import.meta.dirname, "../../..");
const binPathSh = (name: string, env: NodeJS.ProcessEnv = process.env) =>
  execFileSync("bash", ["-c", 'source hack/lib/common.sh && bin_path "$1"', "bin_path", name], { cwd: root, env, encoding: "utf8" }).trim();

test("binPath is bin_path of hack/lib/common.sh, for one name of each kind of line", (t) => {
  for (const name of ["kubectl", "containerd-shim-runc-v2", "runc", "cni", "registry", "buildctl", "helm", "acmesolver", "etcd"])
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
  t.is(binPath("buildctl"), `/tmp/berth-cache-test/bin/buildctl-v0.0.1-${goModuleKey("runtime")}`);
  t.is(binPath("buildctl"), binPathSh("buildctl", process.env));
  t.throws(() => pinned("NO_SUCH_VERSION"), { message: /not pinned/ });
});

test("a binary of a module is keyed by its module's files, so a changed dependency rebuilds it", (t) => {
  t.regex(binPath("kubectl"), new RegExp(`/kubectl-${pinned("K8S_VERSION")}-[0-9a-f]{8}$`));
  t.not(goModuleKey("kube"), goModuleKey("runtime"));
  t.is(binPath("runc"), join(cacheRoot(), "bin", `runc-${pinned("RUNC_VERSION")}`)); // go install, no module of ours
});

// In a copy of hack/lib and of one module with one of its files edited (go.mod by default): a
// command of common.sh (the versions check by default), its exit status, stdout and stderr.
function checkIn(
  module: string,
  edit: (text: string) => string,
  env: NodeJS.ProcessEnv = {},
  { file = "go.mod", command = 'module_versions_check "$1"' } = {},
) {
  const dir = mkdtempSync(join(tmpdir(), "berth-modcheck-"));
  try {
    cpSync(join(root, "hack/lib"), join(dir, "hack/lib"), { recursive: true });
    cpSync(join(root, "hack/go", module), join(dir, "hack/go", module), { recursive: true });
    const path = join(dir, "hack/go", module, file);
    writeFileSync(path, edit(readFileSync(path, "utf8")));
    const r = spawnSync("bash", ["-c", `source hack/lib/common.sh && ${command}`, "check", module], {
      cwd: dir,
      env: { ...process.env, ...env },
      encoding: "utf8",
    });
    return { status: r.status, stdout: r.stdout.trim(), stderr: r.stderr };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

test("a changed dependency (a go.sum line) gives the module's binaries another path, so they are rebuilt", (t) => {
  const kubectl = (edit: (s: string) => string) => checkIn("kube", edit, {}, { file: "go.sum", command: "bin_path kubectl" }).stdout;
  const same = kubectl((s) => s);
  t.regex(same, new RegExp(`/kubectl-${pinned("K8S_VERSION")}-[0-9a-f]{8}$`));
  t.not(
    kubectl((s) => s.replace(/^(\S+) v\S+/, "$1 v0.0.1")),
    same,
  );
});

test("hack/go's modules select exactly the versions common.sh pins, and the check refuses a difference", (t) => {
  for (const module of ["kube", "runtime"]) t.is(checkIn(module, (s) => s).status, 0, module);
  const kwok = checkIn("kube", (s) => s, { KWOK_VERSION: "v0.0.1" });
  t.not(kwok.status, 0);
  t.regex(kwok.stderr, /selects sigs\.k8s\.io\/kwok v\S+, but KWOK_VERSION is v0\.0\.1: change both/);
  const containerd = checkIn("runtime", (s) => s.replace(/(github\.com\/containerd\/containerd\/v2) v\S+/, "$1 v2.0.0"));
  t.not(containerd.status, 0);
  t.regex(containerd.stderr, /selects github\.com\/containerd\/containerd\/v2 v2\.0\.0, but CONTAINERD_VERSION is/);
});

test("the kube module's Kubernetes staging modules are at the pinned Kubernetes version", (t) => {
  const staging = `v0.${pinned("K8S_VERSION").slice("v1.".length)}`;
  const gomod = readFileSync(join(root, "hack/go/kube/go.mod"), "utf8");
  t.true(gomod.includes(`k8s.io/client-go => k8s.io/client-go ${staging}`));
  const r = checkIn("kube", (s) =>
    s.replace(`k8s.io/client-go => k8s.io/client-go ${staging}`, "k8s.io/client-go => k8s.io/client-go v0.35.0"),
  );
  t.not(r.status, 0);
  t.regex(r.stderr, /replaces Kubernetes' staging modules by another version than v0\.\S+: k8s\.io\/client-go v0\.35\.0/);
});
