// Code generation: writes the CRD YAML derived from the zod schemas (crds/generated/ and the
// Helm chart's crds/). Run `node hack/gen.ts`; `node hack/gen.ts --check` fails on drift.
import { mkdirSync, readFileSync, writeFileSync, existsSync } from "node:fs";
import { join } from "node:path";
import { generateCrds } from "../crds/generate.ts";

const root = join(import.meta.dirname, "..");
export const CRD_DIRS = [join(root, "crds/generated"), join(root, "charts/berth/crds")];

const check = process.argv.includes("--check");
let drift = 0;
for (const dir of CRD_DIRS) {
  if (!check) mkdirSync(dir, { recursive: true });
  for (const [name, text] of generateCrds()) {
    const file = join(dir, name);
    const current = existsSync(file) ? readFileSync(file, "utf8") : "";
    if (current === text) continue;
    if (check) { console.error(`drift: ${file} differs from crds/schemas.ts; run node hack/gen.ts`); drift++; }
    else { writeFileSync(file, text); console.log(`wrote ${file}`); }
  }
}
process.exit(drift ? 1 : 0);
