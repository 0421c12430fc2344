// Each workspace's capacity (docs/security.md "Capacity"): the API keeps a ResourceQuota and a
// LimitRange in every workspace namespace. Past the quota of services the API answers 409
// quota_exceeded naming the limit, kubectl is refused by the API server alike, and another
// workspace keeps its own room.
import test from "ava";
import { API_VERSION } from "../../crds/schemas.ts";
import { KubeClient, type KubeObject } from "../../kube/client.ts";
import { CAPACITY_OBJECT } from "../../api/workspaces/namespaces.ts";
import { startApi, type TestApi, type TestWorkspace } from "../helpers/api.ts";
import { eventually, kube } from "../helpers/kube.ts";

const k = kube();
const client = new KubeClient(k.kc);
let api: TestApi;
let B: TestWorkspace;

test.before(async () => {
  api = await startApi({ env: { BERTH_WORKSPACE_QUOTA: JSON.stringify({ "count/apps.berth.dev": "2", pods: "10" }) } });
  B = await api.createWorkspace("Bravo");
});
test.after.always(async () => {
  await api?.stop();
});

const create = (w: TestWorkspace, slug: string) =>
  api.fetchJson("POST", `/workspaces/${w.workspaceId}/apps`, { key: w.apiKey, body: { name: slug, slug, image: "registry.invalid/x:1" } });

test.serial("a workspace namespace holds its ResourceQuota and LimitRange", async (t) => {
  const quota = await client.get<KubeObject & { spec: { hard: Record<string, string> }; status?: { hard?: Record<string, string> } }>({
    apiVersion: "v1",
    kind: "ResourceQuota",
    namespace: api.namespace,
    name: CAPACITY_OBJECT,
  });
  t.deepEqual(quota?.spec.hard, { "count/apps.berth.dev": "2", pods: "10" });
  t.truthy(quota?.status?.hard, "counted by the quota controller before the workspace was handed out");
  const limits = await client.get<KubeObject & { spec: { limits: Record<string, unknown>[] } }>({
    apiVersion: "v1",
    kind: "LimitRange",
    namespace: api.namespace,
    name: CAPACITY_OBJECT,
  });
  t.like(limits?.spec.limits[0], {
    type: "Container",
    default: { cpu: "500m", memory: "512Mi" },
    defaultRequest: { cpu: "50m", memory: "64Mi" },
  });
});

test.serial(
  "past its quota of services a workspace gets 409 quota_exceeded, kubectl is refused too, and another workspace is unaffected",
  async (t) => {
    t.is((await create(api, "one")).status, 201);
    t.is((await create(api, "two")).status, 201);
    const over = await create(api, "three");
    t.is(over.status, 409, over.text);
    t.is(over.body.code, "quota_exceeded");
    t.regex(over.body.detail, /limit of services \(count\/apps\.berth\.dev=2/);
    const kubectl = await client
      .create(
        {
          apiVersion: API_VERSION,
          kind: "App",
          metadata: { name: "sneaky", namespace: api.namespace },
          spec: { name: "s", slug: "sneaky" },
        },
        "kubectl",
      )
      .then(
        () => undefined,
        (e: unknown) => e as { code?: number },
      );
    t.is(kubectl?.code, 403, "the API server applies the same quota to kubectl");
    t.is((await create(B, "bravo")).status, 201, "another workspace has its own room");
    // room again once a service goes
    t.is((await api.fetchJson("DELETE", `/workspaces/${api.workspaceId}/apps/one/permanent`)).status, 204);
    const again = await eventually(
      "room for a service",
      async () => {
        const r = await create(api, "three");
        return r.status === 201 ? r : undefined;
      },
      30_000,
      500,
    );
    t.is(again.body.id, "three");
  },
);
