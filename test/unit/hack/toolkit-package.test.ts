// The key of the toolkit's packed npm package (hack/lib/toolkit-package.ts): it hashes what the
// pack reads (toolkit/ but its output and the Python toolkit, and the root tsconfig.json the build
// extends), so that a change to any of it packs again and a change elsewhere does not.
import test from "ava";
import { join, relative } from "node:path";
import { toolkitPackInputs, toolkitPackKey } from "../../../hack/lib/toolkit-package.ts";

const root = join(import.meta.dirname, "../../..");

test("the pack's inputs: the toolkit's sources, manifest, README and build configs, and the root tsconfig; not dist/ or python/", (t) => {
  const inputs = toolkitPackInputs().map((f) => relative(root, f));
  for (const f of [
    "tsconfig.json",
    "toolkit/package.json",
    "toolkit/README.md",
    "toolkit/tsconfig.build.json",
    "toolkit/tsconfig.cjs.json",
    "toolkit/src/index.ts",
    "toolkit/src/langchain/index.ts",
  ])
    t.true(inputs.includes(f), f);
  t.deepEqual(
    inputs.filter((f) => !/^toolkit\/(src\/|[^/]+$)/.test(f) && f !== "tsconfig.json"),
    [],
    "nothing outside toolkit/src and toolkit's own files",
  );
  t.regex(toolkitPackKey(), /^[0-9a-f]{16}$/);
  t.is(toolkitPackKey(), toolkitPackKey());
});
