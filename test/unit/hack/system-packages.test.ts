// The system packages of hack/ are declared once (hack/lib/system-packages.txt): every package a
// script names in a hint, and every tool it checks for with `command -v`, `pkg-config --exists` or
// need_system, is in that list, which ./hack/test and ./hack/up install first (hack/lib/system.sh).
import test from "ava";
import { execFileSync, spawnSync } from "node:child_process";
import { chmodSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, relative } from "node:path";
import { systemPackageHint, systemPackageOf, systemPackages, type SystemPackage } from "../../../hack/lib/system-packages.ts";

const root = join(import.meta.dirname, "../../..");

/**
 * Checked for in hack/ but not from the list: the prerequisites (Go, npm), what hack/lib/node.sh
 * fetches from npm, and the installer's own tools (without them it says what to install by hand).
 */
const NOT_FROM_DEBIAN = new Set(["go", "npm", "node", "apt-get", "dpkg-query"]);

/** What a script's text names that the list does not declare: hinted packages and checked-for tools. */
function undeclared(text: string, list: SystemPackage[]): string[] {
  const packages = new Set(list.map((p) => p.name));
  const tools = new Set(list.flatMap((p) => p.provides));
  const out: string[] = [];
  for (const m of text.matchAll(/apt-get install((?:\s+[-a-z0-9.+]+)+)/g)) {
    for (const word of m[1]!.trim().split(/\s+/)) if (!word.startsWith("-") && !packages.has(word)) out.push(`package ${word}`);
  }
  for (const m of text.matchAll(/systemPackageHint\("([^"]+)"\)/g)) if (!packages.has(m[1]!)) out.push(`package ${m[1]}`);
  for (const m of text.matchAll(/command -v ([A-Za-z][\w.+-]*)/g))
    if (!tools.has(m[1]!) && !NOT_FROM_DEBIAN.has(m[1]!)) out.push(`tool ${m[1]}`);
  for (const m of text.matchAll(/pkg-config --exists ([A-Za-z][\w.+-]*)/g)) if (!tools.has(`pc:${m[1]}`)) out.push(`tool pc:${m[1]}`);
  for (const m of text.matchAll(/need_system ([A-Za-z][\w.+:-]*)/g)) if (!tools.has(m[1]!)) out.push(`tool ${m[1]}`);
  return out;
}

/** hack/'s scripts and programs: shell (with or without .sh), TypeScript and Python. */
function hackSources(dir = join(root, "hack")): string[] {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) return hackSources(path);
    return /\.(sh|ts|py)$/.test(name) || !name.includes(".") ? [path] : [];
  });
}

test("every package hinted and every tool checked for in hack/ is in hack/lib/system-packages.txt", (t) => {
  const list = systemPackages();
  const found = hackSources().flatMap((f) => undeclared(readFileSync(f, "utf8"), list).map((u) => `${relative(root, f)}: ${u}`));
  t.deepEqual(found, []);
  // the scan sees what it looks for: a script with a hint and checks the list lacks is caught
  t.deepEqual(
    undeclared('command -v zstd >/dev/null || die "x (apt-get install zstd libfoo-dev)"\npkg-config --exists libfoo\nneed_system jq', list),
    ["package zstd", "package libfoo-dev", "tool zstd", "tool pc:libfoo", "tool jq"],
  );
  t.true(hackSources().some((f) => f.endsWith("hack/binaries")) && hackSources().some((f) => f.endsWith("hack/images.ts")));
});

test("the list: four columns, a known when, each package and tool once; TypeScript and bash read it alike", (t) => {
  const list = systemPackages();
  t.true(list.some((p) => p.name === "libseccomp-dev" && p.when === "real-node" && p.provides.includes("pc:libseccomp")));
  t.throws(() => systemPackages("git any git\n"), { message: /four columns/ });
  t.throws(() => systemPackages("git sometimes git the Git server\n"), { message: /any or real-node/ });
  t.throws(() => systemPackages("git any git a\ngit2 any git b\n"), { message: /command git is listed twice/ });
  const sh = (fn: string, arg: string) =>
    execFileSync("bash", ["-c", `source hack/lib/common.sh && ${fn} "$1"`, fn, arg], { cwd: root, encoding: "utf8" }).trim();
  for (const tool of list.flatMap((p) => p.provides)) t.is(sh("system_package_of", tool), systemPackageOf(tool)!, tool);
  t.is(systemPackageOf("no-such-tool"), undefined);
  t.regex(systemPackageHint("debootstrap"), /Debian package debootstrap, which \.\/hack\/test and \.\/hack\/up install/);
  t.throws(() => systemPackageHint("no-such-package"), { message: /not in hack\/lib\/system-packages\.txt/ });
});

test("./hack/test and ./hack/up install the system packages before anything is built", (t) => {
  for (const script of ["hack/test", "hack/up"]) {
    const lines = readFileSync(join(root, script), "utf8")
      .split("\n")
      .filter((l) => !/^\s*#/.test(l));
    const at = (re: RegExp) => lines.findIndex((l) => re.test(l));
    const ensure = at(/^ensure_system_packages\b/);
    t.true(ensure >= 0, `${script} calls ensure_system_packages`);
    // the steps both run, and the Go build hack/test runs itself (hack/up leaves it to cluster up)
    for (const step of [/\bensure_deps\b/, /guard-model\.ts/, /hack\/cluster" up/])
      t.true(at(step) > ensure, `${script}: ${step} after ensure_system_packages`);
    const binaries = at(/hack\/binaries"/);
    t.true(binaries === -1 || binaries > ensure, `${script}: hack/binaries after ensure_system_packages`);
  }
});

/** Runs a function of hack/lib/system.sh over a list of its own, with an apt-get that records its arguments. */
function withFakeApt(t: { teardown: (fn: () => void) => void }, list: string) {
  const dir = mkdtempSync(join(tmpdir(), "berth-system-"));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  writeFileSync(join(dir, "list.txt"), list);
  writeFileSync(join(dir, "apt-get"), `#!/bin/sh\necho "$*" >> ${dir}/apt.log\n`);
  chmodSync(join(dir, "apt-get"), 0o755);
  return (script: string, env: NodeJS.ProcessEnv = {}) => {
    const r = spawnSync("bash", ["-c", `source hack/lib/common.sh && ${script}`], {
      cwd: root,
      encoding: "utf8",
      env: {
        ...process.env,
        PATH: `${dir}:${process.env.PATH}`,
        SYSTEM_PACKAGES_FILE: join(dir, "list.txt"),
        BERTH_REAL_NODE: "1",
        ...env,
      },
    });
    let apt = "";
    try {
      apt = readFileSync(join(dir, "apt.log"), "utf8");
      rmSync(join(dir, "apt.log"));
    } catch {
      /* not called */
    }
    return { status: r.status, stderr: r.stderr, apt };
  };
}

test("ensure_system_packages installs only what is missing, with one apt-get update, and says what", (t) => {
  t.timeout(30_000);
  const run = withFakeApt(
    t,
    [
      "# a list of this test's",
      "bash                    any        bash                     present everywhere",
      "berth-test-absent       any        berth-test-absent-cmd    missing everywhere",
      "berth-test-node-only    real-node  berth-test-node-cmd      missing, for the real node only",
    ].join("\n"),
  );
  const both = run("ensure_system_packages");
  t.is(both.status, 0, both.stderr);
  t.is(both.apt, "update -qq\ninstall -y -qq berth-test-absent berth-test-node-only\n");
  t.regex(both.stderr, /installing from Debian: berth-test-absent berth-test-node-only \(.*list\.txt says what needs each\)/);
  // without the real node, its packages are not needed
  const kwokOnly = run("ensure_system_packages", { BERTH_REAL_NODE: "0" });
  t.is(kwokOnly.apt, "update -qq\ninstall -y -qq berth-test-absent\n");
  // nothing missing: no apt-get at all
  const none = withFakeApt(t, "bash any bash present everywhere\n")("ensure_system_packages");
  t.is(none.status, 0, none.stderr);
  t.is(none.apt, "");
});

test("need_system names the package to install, and refuses a tool the list does not declare", (t) => {
  const run = withFakeApt(
    t,
    "berth-test-absent any berth-test-absent-cmd,pc:berth-test-module missing everywhere\nbash any bash present\n",
  );
  const missing = run("need_system berth-test-absent-cmd");
  t.is(missing.status, 1);
  t.regex(
    missing.stderr,
    /berth-test-absent-cmd is missing: it comes from the Debian package berth-test-absent, which \.\/hack\/test and \.\/hack\/up install/,
  );
  t.regex(
    run("need_system pc:berth-test-module").stderr,
    /pc:berth-test-module is missing: it comes from the Debian package berth-test-absent/,
  );
  t.is(run("need_system bash").status, 0);
  const unlisted = run("need_system zstd");
  t.is(unlisted.status, 1);
  t.regex(unlisted.stderr, /no package of .*list\.txt provides zstd: add it there/);
});
