// A host <slug>.<baseDomain> belongs to one service in the whole platform (crds/app.ts "Hosts"):
// workspace B cannot create or rename a service onto the host of A's, nor take the platform's own
// hosts; A keeps its host and its service. Real API server and PostgreSQL, the API under its chart
// ServiceAccount.
import test from "ava";
import { API_VERSION } from "../../crds/schemas.ts";
import { KubeClient } from "../../kube/client.ts";
import { startApi, type TestApi, type TestWorkspace } from "../helpers/api.ts";
import { deleteNamespace, eventually, kube, testNamespace } from "../helpers/kube.ts";

const k = kube();
const client = new KubeClient(k.kc);
let api: TestApi;
let B: TestWorkspace;

test.before(async () => {
  api = await startApi({ env: { BERTH_BASE_DOMAIN: "apps.hosts.test", BERTH_PUBLIC_URL: "https://console.apps.hosts.test" } });
  B = await api.createWorkspace("Bravo");
});
test.after.always(async () => {
  await api?.stop();
});

const create = (w: TestWorkspace, slug: string) =>
  api.fetchJson("POST", `/workspaces/${w.workspaceId}/apps`, {
    key: w.apiKey,
    body: { name: slug, slug, image: "registry.invalid/site:1" },
  });

test.serial("B cannot create a service on A's host, nor rename one onto it; A's service is untouched", async (t) => {
  const a = await create(api, "storefront");
  t.is(a.status, 201, a.text);
  t.is(a.body.url, "https://storefront.apps.hosts.test");
  const stolen = await create(B, "storefront");
  t.is(stolen.status, 409, stolen.text);
  t.is(stolen.body.code, "host_taken");
  t.regex(stolen.body.detail, /storefront\.apps\.hosts\.test is held by a service of another workspace/);
  t.deepEqual(
    (await api.fetchJson("GET", `/workspaces/${B.workspaceId}/apps`, { key: B.apiKey })).body.data,
    [],
    "nothing was created in B",
  );
  // a service of B's own, renamed onto A's host
  t.is((await create(B, "bravo-site")).status, 201);
  const renamed = await api.fetchJson("PATCH", `/workspaces/${B.workspaceId}/apps/bravo-site`, {
    key: B.apiKey,
    body: { slug: "storefront" },
  });
  t.is(renamed.status, 409, renamed.text);
  t.is(renamed.body.code, "host_taken");
  t.is((await api.fetchJson("GET", `/workspaces/${B.workspaceId}/apps/bravo-site`, { key: B.apiKey })).body.slug, "bravo-site");
  // A's own rename of other fields, and of its slug to a free one, still works
  t.is((await api.fetchJson("PATCH", `/workspaces/${api.workspaceId}/apps/storefront`, { body: { name: "Store front" } })).status, 200);
  const own = await api.fetchJson("GET", `/workspaces/${api.workspaceId}/apps/storefront`);
  t.like(own.body, { slug: "storefront", name: "Store front", url: "https://storefront.apps.hosts.test" });
});

test.serial("once A's service is deleted, its host is free for B: the refusal is about who holds it", async (t) => {
  t.is((await create(api, "popup")).status, 201);
  t.is((await create(B, "popup")).body?.code, "host_taken");
  t.is((await api.fetchJson("DELETE", `/workspaces/${api.workspaceId}/apps/popup/permanent`)).status, 204);
  await eventually(
    "A's popup to be gone",
    async () => !(await client.get({ apiVersion: API_VERSION, kind: "App", namespace: api.namespace, name: "popup" })),
  );
  const taken = await create(B, "popup");
  t.is(taken.status, 201, taken.text);
  t.is(taken.body.url, "https://popup.apps.hosts.test");
});

test.serial("the platform's hosts are refused: reserved slugs and the API's own host (422 on slug)", async (t) => {
  for (const slug of ["api", "www", "admin", "auth", "console"]) {
    const r = await create(B, slug);
    t.is(r.status, 422, `${slug}: ${r.text}`);
    t.is(r.body.errors?.[0]?.field, "slug", slug);
  }
  t.is(
    (await api.fetchJson("PATCH", `/workspaces/${B.workspaceId}/apps/bravo-site`, { key: B.apiKey, body: { slug: "www" } })).status,
    422,
  );
});

test.serial("an App in a namespace that is no workspace of this installation holds no host here", async (t) => {
  const ns = await testNamespace(k, "foreign");
  t.teardown(() => deleteNamespace(k, ns));
  await client.create(
    {
      apiVersion: API_VERSION,
      kind: "App",
      metadata: { name: "kiosk", namespace: ns },
      spec: { name: "Kiosk", slug: "kiosk", image: "registry.invalid/k:1" },
    },
    "test",
  );
  await eventually("the API's cache to see the foreign App", () => Promise.resolve(api.services.appCache.list(ns).length > 0));
  t.is((await create(B, "kiosk")).status, 201);
});
