// The generated CRDs install on a real API server and the API server itself refuses bad Apps,
// naming the field (docs/design.md §3: constraints live in the CRD schema).
import test from "ava";
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import * as yaml from "js-yaml";
import * as k8s from "@kubernetes/client-node";
import { API_VERSION, KINDS, AppSpec } from "../../crds/schemas.ts";
import { apiError, deleteNamespace, kube, testNamespace } from "../helpers/kube.ts";

const k = kube();
let ns = "";
test.before(async () => {
  ns = await testNamespace(k, "crds");
});
test.after.always(async () => {
  await deleteNamespace(k, ns);
});

const validSpec = { name: "Shop", slug: "shop", gitRepoUrl: "https://git.example.com/acme/shop.git" };
let n = 0;
const app = (spec: Record<string, unknown>) => ({
  apiVersion: API_VERSION,
  kind: "App",
  metadata: { name: `app-${++n}`, namespace: ns },
  spec,
});

test("every generated CRD is Established and serves its kind", async (t) => {
  const ext = k.kc.makeApiClient(k8s.ApiextensionsV1Api);
  const dir = join(import.meta.dirname, "../../crds/generated");
  const files = readdirSync(dir).filter((f) => f.endsWith(".yaml"));
  t.is(files.length, KINDS.length);
  for (const f of files) {
    const doc = yaml.load(readFileSync(join(dir, f), "utf8")) as { metadata: { name: string } };
    const crd = await ext.readCustomResourceDefinition({ name: doc.metadata.name });
    const established = crd.status?.conditions?.find((c) => c.type === "Established");
    t.is(established?.status, "True", `${doc.metadata.name} is not established`);
    t.deepEqual(
      crd.spec.versions.map((v) => v.name),
      ["v1alpha1"],
    );
  }
});

test("a valid App is accepted and the schema applies its defaults", async (t) => {
  const created = (await k.objects.create(app(validSpec))) as { spec: Record<string, unknown> };
  t.like(created.spec, { type: "web", gitBranch: "main", visibility: "private", autoDeploy: false, minReplicas: 1, suspended: false });
});

const refused: [string, Record<string, unknown>, string][] = [
  ["cpu 49", { cpuLimitMillicores: 49 }, "spec.cpuLimitMillicores"],
  ["cpu 32001", { cpuLimitMillicores: 32001 }, "spec.cpuLimitMillicores"],
  ["memory 63", { memoryLimitMi: 63 }, "spec.memoryLimitMi"],
  ["memory 131073", { memoryLimitMi: 131073 }, "spec.memoryLimitMi"],
  ["minReplicas 0", { minReplicas: 0 }, "spec.minReplicas"],
  ["maxReplicas < minReplicas", { minReplicas: 3, maxReplicas: 2 }, "spec.maxReplicas"],
  ["cpuTargetUtilization 0", { cpuTargetUtilization: 0 }, "spec.cpuTargetUtilization"],
  ["cpuTargetUtilization 101", { cpuTargetUtilization: 101 }, "spec.cpuTargetUtilization"],
  ["an unknown type", { type: "batch" }, "spec.type"],
  ["a slug that is not a DNS label", { slug: "Shop_1" }, "spec.slug"],
  ["a git URL that is not http(s)", { gitRepoUrl: "git@github.com:acme/shop.git" }, "spec.gitRepoUrl"],
  ["an ssh git URL", { gitRepoUrl: "ssh://git.example.com/x.git" }, "spec.gitRepoUrl"],
  ["a cron app without schedule", { type: "cron" }, "spec.schedule"],
  ["a dockerfile path escaping the repo", { dockerfilePath: "../Dockerfile" }, "spec.dockerfilePath"],
];

for (const [what, patch, field] of refused) {
  test(`the API server refuses ${what}, naming ${field}`, async (t) => {
    const err = await t.throwsAsync(k.objects.create(app({ ...validSpec, ...patch })));
    const { code, message } = apiError(err);
    t.is(code, 422, message);
    t.true(message.includes(field), message);
  });
}

for (const missing of ["name", "slug"]) {
  test(`the API server refuses an App without ${missing}`, async (t) => {
    const spec: Record<string, unknown> = { ...validSpec };
    delete spec[missing];
    const { code, message } = apiError(await t.throwsAsync(k.objects.create(app(spec))));
    t.is(code, 422);
    t.true(message.includes(`spec.${missing}: Required value`), message);
  });
}

test("maxReplicas equal to minReplicas is accepted", async (t) => {
  const created = (await k.objects.create(app({ ...validSpec, minReplicas: 2, maxReplicas: 2 }))) as unknown as {
    spec: { maxReplicas: number };
  };
  t.is(created.spec.maxReplicas, 2);
});

test("unknown spec fields are pruned, not stored", async (t) => {
  const created = (await k.objects.create(app({ ...validSpec, bogus: true }))) as { spec: Record<string, unknown> };
  t.false("bogus" in created.spec);
});

// Each cross-field rule is stated once (crds/schemas.ts APP_RULES): its CEL runs in the API
// server, its check in zod (the REST API and the operator). Both must give the same answer.
const ruleCases: Record<string, unknown>[] = [
  { minReplicas: 3, maxReplicas: 2 },
  { minReplicas: 2, maxReplicas: 2 },
  { minReplicas: 1 },
  { maxReplicas: 5 },
  { type: "cron" },
  { type: "cron", schedule: "0 3 * * *" },
  { type: "web", schedule: "0 3 * * *" },
  { type: "worker" },
  { type: "cron", schedule: "@daily", minReplicas: 2, maxReplicas: 1 },
];
for (const patch of ruleCases) {
  test(`zod and the API server agree on ${JSON.stringify(patch)}`, async (t) => {
    const spec = { ...validSpec, ...patch };
    const zod = AppSpec.safeParse(spec);
    const server = await k.objects.create(app(spec)).then(
      () => undefined,
      (err: unknown) => apiError(err),
    );
    t.is(zod.success, server === undefined, `zod: ${zod.success ? "accepts" : zod.error.message}; server: ${server?.message ?? "accepts"}`);
    if (!zod.success && server) {
      for (const issue of zod.error.issues)
        t.true(server.message.includes(issue.message), `the server names "${issue.message}": ${server.message}`);
    }
  });
}
