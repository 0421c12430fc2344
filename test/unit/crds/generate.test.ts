// The CRD YAML is derived from the zod schemas: committed files must match, and the output must be
// a structural schema the API server accepts (no additionalProperties: false, RE2 patterns only).
import test from "ava";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { generateCrds } from "../../../crds/generate.ts";
import { AppSpec } from "../../../crds/schemas.ts";

const root = join(import.meta.dirname, "../../..");

for (const [file, text] of generateCrds()) {
  for (const dir of ["crds/generated", "charts/berth/crds"]) {
    test(`${dir}/${file} matches crds/schemas.ts (run node hack/gen.ts when this fails)`, (t) => {
      t.is(readFileSync(join(root, dir, file), "utf8"), text);
    });
  }
  test(`${file} is structural and uses RE2-compatible patterns`, (t) => {
    t.false(text.includes("additionalProperties: false"));
    t.false(/pattern: .*\(\?[=!<]/.test(text), "lookarounds are not RE2");
  });
}

test("the zod schema applies the same defaults as the CRD", (t) => {
  const spec = AppSpec.parse({ name: "Shop", slug: "shop" });
  t.like(spec, {
    type: "web",
    gitBranch: "main",
    visibility: "private",
    autoDeploy: false,
    minReplicas: 1,
    cpuLimitMillicores: 500,
    memoryLimitMi: 512,
    port: 8080,
    suspended: false,
  });
});

const bad: [string, Record<string, unknown>, string][] = [
  ["cpu 49", { cpuLimitMillicores: 49 }, "cpuLimitMillicores"],
  ["cpu 32001", { cpuLimitMillicores: 32001 }, "cpuLimitMillicores"],
  ["memory 63", { memoryLimitMi: 63 }, "memoryLimitMi"],
  ["memory 131073", { memoryLimitMi: 131073 }, "memoryLimitMi"],
  ["minReplicas 0", { minReplicas: 0 }, "minReplicas"],
  ["cpuTargetUtilization 101", { cpuTargetUtilization: 101 }, "cpuTargetUtilization"],
  ["unknown type", { type: "batch" }, "type"],
  ["dockerfile path with ..", { dockerfilePath: "a/../../Dockerfile" }, "dockerfilePath"],
  ["absolute dockerfile path", { dockerfilePath: "/Dockerfile" }, "dockerfilePath"],
  ["unknown field", { bogus: 1 }, ""],
];
for (const [what, patch, field] of bad) {
  test(`the zod schema refuses ${what}`, (t) => {
    const r = AppSpec.safeParse({ name: "Shop", slug: "shop", ...patch });
    t.false(r.success);
    if (field)
      t.true(
        r.error!.issues.some((i) => i.path.join(".") === field),
        JSON.stringify(r.error!.issues),
      );
  });
}

test("the zod schema accepts nested dockerfile paths with dots in names", (t) => {
  t.true(AppSpec.safeParse({ name: "S", slug: "s", dockerfilePath: "deploy/..hidden/Dockerfile.prod" }).success);
});
