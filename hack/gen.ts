// Code generation: writes the CRD YAML derived from the zod schemas (crds/generated/ and the
// Helm chart's crds/) and the chart's RBAC templates derived from the code's declarations
// (hack/lib/chart-rbac.ts). Run `node hack/gen.ts`; `node hack/gen.ts --check` fails on drift.
import { mkdirSync, readFileSync, writeFileSync, existsSync } from "node:fs";
import { join } from "node:path";
import { generateCrds } from "../crds/generate.ts";
import { generateChartRbac } from "./lib/chart-rbac.ts";

const root = join(import.meta.dirname, "..");
export const CRD_DIRS = [join(root, "crds/generated"), join(root, "charts/berth/crds")];
export const CHART_TEMPLATES = join(root, "charts/berth/templates");

const outputs: [dir: string, files: Map<string, string>][] = [
  ...CRD_DIRS.map((d): [string, Map<string, string>] => [d, generateCrds()]),
  [CHART_TEMPLATES, generateChartRbac()],
];

const check = process.argv.includes("--check");
let drift = 0;
for (const [dir, files] of outputs) {
  if (!check) mkdirSync(dir, { recursive: true });
  for (const [name, text] of files) {
    const file = join(dir, name);
    const current = existsSync(file) ? readFileSync(file, "utf8") : "";
    if (current === text) continue;
    if (check) {
      console.error(`drift: ${file} differs from the code it is generated from; run node hack/gen.ts`);
      drift++;
    } else {
      writeFileSync(file, text);
      console.log(`wrote ${file}`);
    }
  }
}
process.exit(drift ? 1 : 0);
