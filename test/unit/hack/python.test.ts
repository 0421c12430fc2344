// hack/lib/python.ts's wheel set of samples/python-chat: made for the Python of the base image the
// sample is built on, keyed by everything the set is made from and nothing else.
import test from "ava";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, relative } from "node:path";
import { DEBIAN_SUITE } from "../../../hack/images.ts";
import { basePythonVersion, langchainCorePin, TOOLKIT_PYTHON_PACKAGES, toolkitSourceFiles } from "../../../hack/lib/python.ts";

test("the wheels are for the python3 of the Debian suite berth/python is built on", (t) => {
  t.is(basePythonVersion("bookworm"), "3.11");
  t.regex(basePythonVersion(DEBIAN_SUITE), /^3\.\d+$/);
  t.throws(() => basePythonVersion("sid"), { message: /knows no python3 version of Debian sid/ });
});

test("langchain-core at the version the toolkit is tested with", (t) => {
  t.regex(langchainCorePin(), /^langchain-core==1\.\d+\.\d+$/);
  t.true((TOOLKIT_PYTHON_PACKAGES as readonly string[]).includes(langchainCorePin()));
  t.throws(() => langchainCorePin(["pytest==1"]), { message: /pins no langchain-core/ });
});

test("the key reads the toolkit's wheel inputs: sources, pyproject.toml, README.md, without caches or tests", (t) => {
  const dir = mkdtempSync(join(tmpdir(), "berth-pysrc-"));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  for (const f of [
    "pyproject.toml",
    "README.md",
    "src/pkg/b.py",
    "src/pkg/a.py",
    "src/pkg/sub/c.py",
    "src/pkg/__pycache__/a.cpython-311.pyc",
    "src/x.egg-info/PKG-INFO",
    "tests/test_a.py",
  ]) {
    mkdirSync(join(dir, f, ".."), { recursive: true });
    writeFileSync(join(dir, f), f);
  }
  t.deepEqual(
    toolkitSourceFiles(dir).map((f) => relative(dir, f)),
    ["pyproject.toml", "README.md", "src/pkg/a.py", "src/pkg/b.py", "src/pkg/sub/c.py"],
  );
});
