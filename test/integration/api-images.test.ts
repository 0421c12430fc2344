// A workspace's builds are its own (crds/app.ts "Built images"): builds push to
// <registry>/<prefix>/<namespace>/<app>, a predictable path, so workspace B names A's build as its
// service's image: the API refuses it (create, PATCH), and the operator refuses it for an App
// applied with kubectl. The platform's other images in that registry stay open to all.
import test from "ava";
import { API_VERSION } from "../../crds/schemas.ts";
import { KubeClient, type KubeObject } from "../../kube/client.ts";
import type { RunningOperator } from "../../operator/main.ts";
import { startApi, type TestApi, type TestWorkspace } from "../helpers/api.ts";
import { startTestOperator } from "../helpers/operator.ts";
import { eventually, kube } from "../helpers/kube.ts";

const REGISTRY = "registry.walls.test:5000";
const k = kube();
const client = new KubeClient(k.kc);
let api: TestApi;
let B: TestWorkspace;
let op: RunningOperator | undefined;

test.before(async () => {
  api = await startApi({ env: { BERTH_BUILD_REGISTRY: REGISTRY } });
  B = await api.createWorkspace("Bravo");
});
test.after.always(async () => {
  await op?.stop();
  await api?.stop();
});

const create = (w: TestWorkspace, slug: string, image: string) =>
  api.fetchJson("POST", `/workspaces/${w.workspaceId}/apps`, { key: w.apiKey, body: { name: slug, slug, image } });

test.serial("B cannot run A's build by naming it; its own builds and the platform's base images are fine", async (t) => {
  const aBuild = `${REGISTRY}/apps/${api.namespace}/shop:0123456789ab`;
  const stolen = await create(B, "copycat", aBuild);
  t.is(stolen.status, 422, stolen.text);
  t.is(stolen.body.errors[0].field, "body.image");
  t.regex(stolen.body.errors[0].message, /another workspace's build/);
  t.is((await create(api, "shop-a", aBuild)).status, 201, "A runs its own build");
  t.is((await create(B, "own", `${REGISTRY}/apps/${B.namespace}/own:1`)).status, 201);
  t.is((await create(B, "base", `${REGISTRY}/berth/node:v1`)).status, 201);
  const patched = await api.fetchJson("PATCH", `/workspaces/${B.workspaceId}/apps/own`, { key: B.apiKey, body: { image: aBuild } });
  t.is(patched.status, 422, patched.text);
  t.regex(patched.body.errors[0].message, /another workspace's build/);
  t.is(
    (await api.fetchJson("GET", `/workspaces/${B.workspaceId}/apps/own`, { key: B.apiKey })).body.image,
    `${REGISTRY}/apps/${B.namespace}/own:1`,
    "nothing stored changed",
  );
});

test.serial(
  "an App applied with kubectl naming another namespace's build is refused by the operator (ImageNotAllowed) and runs nothing",
  async (t) => {
    op = await startTestOperator({ namespace: B.namespace, env: { BERTH_BUILD_REGISTRY: REGISTRY } });
    await client.create(
      {
        apiVersion: API_VERSION,
        kind: "App",
        metadata: { name: "kubectl-copy", namespace: B.namespace },
        spec: { name: "Copy", slug: "kubectl-copy", image: `${REGISTRY}/apps/${api.namespace}/shop:0123456789ab` },
      },
      "kubectl",
    );
    const refused = await eventually("the App refused", async () => {
      const a = await client.get<
        KubeObject & { status?: { phase?: string; conditions?: { type: string; reason: string; message: string }[] } }
      >({ apiVersion: API_VERSION, kind: "App", namespace: B.namespace, name: "kubectl-copy" });
      return a?.status?.phase === "failed" ? a : undefined;
    });
    t.like(
      refused.status?.conditions?.find((c) => c.type === "Ready"),
      { reason: "ImageNotAllowed" },
    );
    t.is(await client.get({ apiVersion: "apps/v1", kind: "Deployment", namespace: B.namespace, name: "kubectl-copy" }), undefined);
    // the same App with its own build is deployed: the refusal is about whose build it is
    await client.mergePatch(
      { apiVersion: API_VERSION, kind: "App", namespace: B.namespace, name: "kubectl-copy" },
      { spec: { image: `${REGISTRY}/apps/${B.namespace}/copy:1` } },
      "kubectl",
    );
    await eventually("its Deployment", () =>
      client.get({ apiVersion: "apps/v1", kind: "Deployment", namespace: B.namespace, name: "kubectl-copy" }),
    );
    t.pass();
  },
);
