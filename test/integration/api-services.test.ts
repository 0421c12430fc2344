// Services end to end: REST API → App custom resource → operator → Deployment, Service,
// Ingress, HPA → pods Ready (kwok) → the API reports active. Real API server, real PostgreSQL.
import test from "ava";
import * as k8s from "@kubernetes/client-node";
import { API_VERSION } from "../../crds/schemas.ts";
import { KubeClient } from "../../kube/client.ts";
import type { RunningOperator } from "../../operator/main.ts";
import { startTestOperator } from "../helpers/operator.ts";
import { startApi, type TestApi } from "../helpers/api.ts";
import { eventually, kube } from "../helpers/kube.ts";

const k = kube();
const client = new KubeClient(k.kc);
let api: TestApi;
let op: RunningOperator;
const apps = () => `/workspaces/${api.workspaceId}/apps`;

test.before(async () => {
  api = await startApi({ env: { BERTH_BASE_DOMAIN: "apps.test.local" } });
  // As the chart runs it: the operator's ServiceAccount, governance provisioned through this API.
  op = await startTestOperator({ namespace: api.namespace, apiUrl: api.url, env: { BERTH_BASE_DOMAIN: "apps.test.local" } });
});
test.after.always(async () => {
  await op?.stop();
  await api?.stop();
});

const create = (body: Record<string, unknown>) => api.fetchJson("POST", apps(), { body });
const statusOf = async (id: string) => (await api.fetchJson("GET", `${apps()}/${id}`)).body?.status as string | undefined;
const until = (id: string, status: string) => eventually(`${id} to be ${status}`, async () => (await statusOf(id)) === status, 60_000);

test.serial("create returns 201 with exactly the create fields and status stopped", async (t) => {
  const r = await create({ name: "Web Shop", slug: "shop", gitRepoUrl: "https://git.example.com/acme/shop.git" });
  t.is(r.status, 201, r.text);
  t.is(r.headers.get("location"), `/api/v1${apps()}/shop`);
  t.deepEqual(
    Object.keys(r.body).sort(),
    [
      "autoDeploy",
      "cpuLimitMillicores",
      "createdAt",
      "gitBranch",
      "gitRepoUrl",
      "id",
      "maxReplicas",
      "memoryLimitMi",
      "minReplicas",
      "name",
      "slug",
      "status",
      "type",
      "updatedAt",
      "url",
    ].sort(),
  );
  t.like(r.body, {
    id: "shop",
    name: "Web Shop",
    slug: "shop",
    status: "stopped",
    type: "web",
    url: "https://shop.apps.test.local",
    gitBranch: "main",
    autoDeploy: false,
    minReplicas: 1,
    maxReplicas: 1,
  });
});

test.serial("a service with an image is deployed by the operator and reported active", async (t) => {
  const r = await create({
    name: "Storefront",
    slug: "storefront",
    image: "registry.invalid/store:1",
    minReplicas: 2,
    maxReplicas: 4,
    cpuLimitMillicores: 250,
    memoryLimitMi: 256,
  });
  t.is(r.status, 201, r.text);
  await until("storefront", "active");
  const d = await k.apps.readNamespacedDeployment({ name: "storefront", namespace: api.namespace });
  t.is(d.status?.readyReplicas, 2);
  t.deepEqual(d.spec?.template.spec?.containers[0]?.resources?.limits, { cpu: "250m", memory: "256Mi" });
  const got = await api.fetchJson("GET", `${apps()}/storefront`);
  t.is(got.status, 200);
  t.like(got.body, {
    status: "active",
    dockerfilePath: null,
    releaseCommand: null,
    cpuTargetUtilization: 80,
    image: "registry.invalid/store:1",
  });
  t.like(got.body.latestDeployment, { status: "succeeded", gitCommitSha: null });
  t.regex(got.body.latestDeployment.id, /^storefront-[a-f0-9]{10}$/);
});

test.serial("PATCH of replicas and limits reaches the children; unspecified fields are unchanged", async (t) => {
  const r = await api.fetchJson("PATCH", `${apps()}/storefront`, { body: { minReplicas: 3, maxReplicas: 6, cpuLimitMillicores: 500 } });
  t.is(r.status, 200, r.text);
  t.like(r.body, { minReplicas: 3, maxReplicas: 6, cpuLimitMillicores: 500, memoryLimitMi: 256, name: "Storefront" });
  const d = await eventually(
    "3 ready replicas at 500m",
    async () => {
      const d = await k.apps.readNamespacedDeployment({ name: "storefront", namespace: api.namespace });
      return d.status?.readyReplicas === 3 && d.spec?.template.spec?.containers[0]?.resources?.limits?.cpu === "500m" ? d : undefined;
    },
    60_000,
  );
  t.truthy(d);
  const hpa = await k.kc
    .makeApiClient(k8s.AutoscalingV2Api)
    .readNamespacedHorizontalPodAutoscaler({ name: "storefront", namespace: api.namespace });
  t.like(hpa.spec, { minReplicas: 3, maxReplicas: 6 });
  await until("storefront", "active");
});

test.serial("PATCH with null clears an optional field", async (t) => {
  await api.fetchJson("PATCH", `${apps()}/shop`, { body: { description: "Our shop", releaseCommand: "npm run migrate" } });
  const r = await api.fetchJson("PATCH", `${apps()}/shop`, { body: { description: null } });
  t.is(r.status, 200, r.text);
  t.is(r.body.description, null);
  t.is(r.body.releaseCommand, "npm run migrate");
});

const invalid: [string, Record<string, unknown>, string][] = [
  ["cpu 49", { cpuLimitMillicores: 49 }, "body.cpuLimitMillicores"],
  ["cpu 32001", { cpuLimitMillicores: 32001 }, "body.cpuLimitMillicores"],
  ["memory 63", { memoryLimitMi: 63 }, "body.memoryLimitMi"],
  ["memory 131073", { memoryLimitMi: 131073 }, "body.memoryLimitMi"],
  ["minReplicas 0", { minReplicas: 0 }, "body.minReplicas"],
  ["maxReplicas below minReplicas", { minReplicas: 3, maxReplicas: 2 }, "body.maxReplicas"],
  ["cpuTargetUtilization 0", { cpuTargetUtilization: 0 }, "body.cpuTargetUtilization"],
  ["cpuTargetUtilization 101", { cpuTargetUtilization: 101 }, "body.cpuTargetUtilization"],
  ["an unknown type", { type: "batch" }, "body.type"],
  ["a wrong type for a number", { minReplicas: "two" }, "body.minReplicas"],
  ["an unknown field", { replicas: 3 }, "body.replicas"],
  ["a bad slug", { slug: "Not A Slug" }, "body.slug"],
  ["cron without schedule", { type: "cron" }, "body.schedule"],
];
for (const [what, patch, field] of invalid) {
  test(`create refuses ${what} with 422 naming ${field}, and nothing reaches Kubernetes`, async (t) => {
    const slug = `bad-${what.replace(/[^a-z0-9]+/gi, "-").toLowerCase()}`.slice(0, 40).replace(/-$/, "");
    const r = await create({ name: "Bad", slug, ...patch });
    t.is(r.status, 422, r.text);
    t.regex(r.headers.get("content-type") ?? "", /^application\/problem\+json/);
    t.is(r.body.code, "validation_failed");
    t.true(
      r.body.errors.some((e: { field: string }) => e.field === field),
      JSON.stringify(r.body.errors),
    );
    t.falsy(await client.get({ apiVersion: API_VERSION, kind: "App", namespace: api.namespace, name: slug }));
  });
}

test("create requires name and slug", async (t) => {
  const r = await create({});
  t.is(r.status, 422);
  t.deepEqual(r.body.errors.map((e: { field: string }) => e.field).sort(), ["body.name", "body.slug"]);
});

test.serial("PATCH checks the merged spec: maxReplicas below the stored minReplicas is refused", async (t) => {
  const r = await api.fetchJson("PATCH", `${apps()}/storefront`, { body: { maxReplicas: 2 } });
  t.is(r.status, 422, r.text);
  t.true(r.body.errors.some((e: { field: string }) => e.field === "body.maxReplicas"));
  t.is((await api.fetchJson("GET", `${apps()}/storefront`)).body.maxReplicas, 6, "nothing stored changed");
});

test.serial("slugs are unique per workspace (409 slug_taken on create and on PATCH), and their hosts in the platform", async (t) => {
  const dup = await create({ name: "Again", slug: "shop" });
  t.is(dup.status, 409);
  t.is(dup.body.code, "slug_taken");
  const rename = await api.fetchJson("PATCH", `${apps()}/storefront`, { body: { slug: "shop" } });
  t.is(rename.status, 409);
  const other = await api.createWorkspace("other");
  const elsewhere = await api.fetchJson("POST", `/workspaces/${other.workspaceId}/apps`, {
    body: { name: "Shop", slug: "shop" },
    key: other.apiKey,
  });
  t.is(elsewhere.status, 409, 'another workspace cannot take the same host (docs/security.md "Hosts")');
  t.is(elsewhere.body.code, "host_taken");
});

test.serial("list: pagination, filters, search and meta", async (t) => {
  for (const [i, name] of ["Alpha Café", "Beta Worker", "Gamma Cron"].entries()) {
    const type = ["api", "worker", "cron"][i]!;
    const r = await create({ name, slug: `list-${i}`, type, ...(type === "cron" ? { schedule: "@daily" } : {}) });
    t.is(r.status, 201, r.text);
  }
  const all = await api.fetchJson("GET", `${apps()}?limit=2&page=1`);
  t.is(all.status, 200);
  t.is(all.body.data.length, 2);
  t.like(all.body.meta, { page: 1, limit: 2 });
  t.is(all.body.meta.totalPages, Math.ceil(all.body.meta.total / 2));
  t.deepEqual(
    Object.keys(all.body.data[0]).sort(),
    ["createdAt", "gitBranch", "gitRepoUrl", "id", "name", "slug", "status", "type", "url"].sort(),
  );
  const workers = await api.fetchJson("GET", `${apps()}?type=worker`);
  t.deepEqual(
    workers.body.data.map((a: { id: string }) => a.id),
    ["list-1"],
  );
  t.is(workers.body.data[0].url, null);
  const search = await api.fetchJson("GET", `${apps()}?search=cafe`);
  t.deepEqual(
    search.body.data.map((a: { id: string }) => a.id),
    ["list-0"],
    "accent-insensitive",
  );
  const active = await api.fetchJson("GET", `${apps()}?status=active`);
  t.deepEqual(
    active.body.data.map((a: { id: string }) => a.id),
    ["storefront"],
  );
  const page99 = await api.fetchJson("GET", `${apps()}?page=99`);
  t.deepEqual(page99.body.data, []);
  for (const bad of ["limit=101", "limit=0", "page=0", "type=batch", "status=running", "sort=name"]) {
    const r = await api.fetchJson("GET", `${apps()}?${bad}`);
    t.is(r.status, 422, `${bad}: ${r.text}`);
  }
});

test.serial("stats count services by status", async (t) => {
  const r = await api.fetchJson("GET", `${apps()}/stats`);
  t.is(r.status, 200);
  const list = await api.fetchJson("GET", `${apps()}?limit=100`);
  t.is(r.body.total, list.body.meta.total);
  t.is(r.body.active, list.body.data.filter((a: { status: string }) => a.status === "active").length);
  t.is(r.body.total, r.body.active + r.body.deploying + r.body.failed + r.body.stopped);
});

test.serial("pipeline state reports every stage, with the governance stage under `harbor`", async (t) => {
  const r = await api.fetchJson("GET", `${apps()}/storefront/pipeline-state`);
  t.is(r.status, 200, r.text);
  t.like(r.body, {
    overallStatus: "active",
    build: { status: "succeeded", buildpack: "prebuilt", imageTag: "registry.invalid/store:1" },
    runtime: { status: "healthy", readyReplicas: 3, totalReplicas: 3, cpuUsageMillicores: null },
  });
  t.is(r.body.deploy.status, "succeeded");
  t.truthy(r.body.deploy.deployedAt);
  // Provisioned on the first deployment, with the default observability config (guards on).
  t.like(r.body.harbor, { status: "active", guardsEnabled: true });
  const fromGit = await api.fetchJson("GET", `${apps()}/shop/pipeline-state`);
  t.like(fromGit.body, {
    overallStatus: "stopped",
    source: { status: "ok", gitRepo: "https://git.example.com/acme/shop.git", branch: "main" },
    build: { status: "pending" },
  });
});

test.serial("an App applied with kubectl shows up in the API", async (t) => {
  await client.create(
    {
      apiVersion: API_VERSION,
      kind: "App",
      metadata: { name: "gitops", namespace: api.namespace },
      spec: { name: "GitOps App", slug: "gitops", type: "worker", image: "registry.invalid/g:1" },
    },
    "kubectl",
  );
  await until("gitops", "active");
  const list = await api.fetchJson("GET", `${apps()}?search=gitops`);
  t.deepEqual(
    list.body.data.map((a: { id: string }) => a.id),
    ["gitops"],
  );
});

test.serial("soft delete stops the service and removes routing; resume brings it back", async (t) => {
  const del = await api.fetchJson("DELETE", `${apps()}/storefront`);
  t.is(del.status, 204);
  await until("storefront", "disabled");
  await eventually(
    "routing and pods gone",
    async () => {
      const ing = await client.get({ apiVersion: "networking.k8s.io/v1", kind: "Ingress", namespace: api.namespace, name: "storefront" });
      const d = await k.apps.readNamespacedDeployment({ name: "storefront", namespace: api.namespace });
      return !ing && (d.status?.replicas ?? 0) === 0;
    },
    60_000,
  );
  const kept = await api.fetchJson("GET", `${apps()}/storefront`);
  t.like(kept.body, { status: "disabled", minReplicas: 3, image: "registry.invalid/store:1" }, "configuration is retained");
  const resumed = await api.fetchJson("POST", `${apps()}/storefront/resume`);
  t.is(resumed.status, 200, resumed.text);
  await until("storefront", "active");
  t.truthy(await client.get({ apiVersion: "networking.k8s.io/v1", kind: "Ingress", namespace: api.namespace, name: "storefront" }));
});

test.serial("permanent delete removes the service and everything it owns", async (t) => {
  const del = await api.fetchJson("DELETE", `${apps()}/storefront/permanent`);
  t.is(del.status, 204);
  t.is((await api.fetchJson("GET", `${apps()}/storefront`)).status, 404);
  await eventually(
    "every child gone",
    async () => {
      const kinds: [string, string][] = [
        ["Deployment", "apps/v1"],
        ["Service", "v1"],
        ["Ingress", "networking.k8s.io/v1"],
        ["HorizontalPodAutoscaler", "autoscaling/v2"],
        ["App", API_VERSION],
      ];
      const left = await Promise.all(
        kinds.map(([kind, apiVersion]) => client.get({ apiVersion, kind, namespace: api.namespace, name: "storefront" })),
      );
      const pods = await k.core.listNamespacedPod({ namespace: api.namespace, labelSelector: "berth.dev/app=storefront" });
      return left.every((o) => !o) && pods.items.length === 0;
    },
    90_000,
  );
  t.is((await api.fetchJson("DELETE", `${apps()}/storefront/permanent`)).status, 404);
});

test.serial("another workspace's key gets 404 and no data for this workspace's services", async (t) => {
  const other = await api.createWorkspace("intruder");
  for (const [method, path] of [
    ["GET", apps()],
    ["GET", `${apps()}/shop`],
    ["PATCH", `${apps()}/shop`],
    ["DELETE", `${apps()}/shop`],
    ["GET", `${apps()}/stats`],
    ["GET", `${apps()}/shop/pipeline-state`],
  ] as const) {
    const r = await api.fetchJson(method, path, { key: other.apiKey, ...(method === "PATCH" ? { body: { name: "x" } } : {}) });
    t.is(r.status, 404, `${method} ${path}`);
    t.false(r.text.includes("Web Shop"));
  }
  const own = await api.fetchJson("GET", `/workspaces/${other.workspaceId}/apps`, { key: other.apiKey });
  t.false(own.body.data.some((a: { id: string }) => a.id === "shop"));
  t.is((await api.fetchJson("GET", `${apps()}/shop`)).body.name, "Web Shop", "untouched");
});

test("unknown services are 404 with a problem body", async (t) => {
  const r = await api.fetchJson("GET", `${apps()}/nope`);
  t.is(r.status, 404);
  t.is(r.body.code, "app_not_found");
});

test("requests without a key are 401", async (t) => {
  t.is((await api.fetchJson("GET", apps(), { key: null })).status, 401);
});

test("the OpenAPI document describes every services endpoint", async (t) => {
  const doc = (await api.fetchJson("GET", "/api/v1/openapi.json", { key: null })).body;
  for (const op of [
    "listServices",
    "createService",
    "getServiceStats",
    "getService",
    "updateService",
    "softDeleteService",
    "resumeService",
    "deleteService",
    "getPipelineState",
  ]) {
    t.true(JSON.stringify(doc.paths).includes(`"operationId":"${op}"`), op);
  }
  t.truthy(doc.components.schemas.Service);
});
