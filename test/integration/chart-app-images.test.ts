// The chart's admission policy for built images (charts/berth/templates/app-images-policy.yaml,
// docs/security.md "Built images"), rendered by the pinned helm and applied to the real API
// server: an App applied straight to the API server (kubectl, GitOps) that names another
// namespace's build is refused at admission; its own build and other images pass. Without the
// policy the same App is admitted (the operator would refuse it later).
import test from "ava";
import * as yaml from "js-yaml";
import { join } from "node:path";
import { API_VERSION } from "../../crds/schemas.ts";
import { KubeClient } from "../../kube/client.ts";
import { helm, K8S_VERSION, kubectl, root } from "../helpers/binaries.ts";
import { deleteNamespace, eventually, kube, testNamespace, uniqueName } from "../helpers/kube.ts";

const k = kube();
const client = new KubeClient(k.kc);
const REGISTRY = "registry.policy.test:5000";
const release = uniqueName("vap");
let ns = "";
let policyYaml = "";

test.before(async () => {
  ns = await testNamespace(k, "vap");
  const r = await helm([
    "template",
    release,
    join(root, "charts/berth"),
    "--namespace",
    "berth-system",
    "--kube-version",
    K8S_VERSION,
    "--set",
    "builder.enabled=true",
    "--set",
    `builder.registry=${REGISTRY}`,
    "--set",
    "builder.image.repository=reg/berth-builder",
    "--set",
    "builder.buildkitHost=tcp://10.0.0.1:1234",
  ]);
  if (r.code !== 0) throw new Error(r.stderr);
  // the image policy alone (the chart's other policy, the API's, is applied by the identities helper)
  const docs = (yaml.loadAll(r.stdout) as ({ kind?: string; metadata?: { name?: string } } | null)[]).filter(
    (d) => d?.kind?.startsWith("ValidatingAdmissionPolicy") && d.metadata?.name?.endsWith("-app-images"),
  );
  policyYaml = docs.map((d) => yaml.dump(d)).join("---\n");
});
test.after.always(async () => {
  if (policyYaml) await kubectl(["delete", "--ignore-not-found", "-f", "-"], policyYaml);
  await deleteNamespace(k, ns);
});

const app = (name: string, image: string) =>
  client
    .create({ apiVersion: API_VERSION, kind: "App", metadata: { name, namespace: ns }, spec: { name, slug: name, image } }, "kubectl")
    .then(
      () => undefined,
      (e: unknown) => e as { code?: number; body?: unknown },
    );

test.serial("another namespace's build is refused at admission; the App's own build and other images pass", async (t) => {
  const foreign = `${REGISTRY}/apps/berth-wsother/shop:0123456789ab`;
  // without the policy the API server admits it
  t.is(await app("before", foreign), undefined);
  t.is(policyYaml.match(/^kind: ValidatingAdmissionPolicy$/gm)?.length, 1);
  const applied = await kubectl(["apply", "-f", "-"], policyYaml);
  t.is(applied.code, 0, applied.stderr);
  const refused = await eventually(
    "the policy to take effect",
    async () => {
      const e = await app(`copy-${Date.now() % 100000}`, foreign);
      return e ? e : undefined;
    },
    30_000,
    500,
  );
  t.is(refused.code, 403);
  t.regex(JSON.stringify(refused.body), /spec\.image is another workspace's build: registry\.policy\.test:5000\/apps\/<namespace>\//);
  t.is(await app("own", `${REGISTRY}/apps/${ns}/own:1`), undefined, "its own namespace's build");
  t.is(await app("base", `${REGISTRY}/berth/node:v1`), undefined, "the platform's base images");
  t.is(await app("elsewhere", "ghcr.io/acme/shop:1"), undefined);
  // an update onto another's build is refused too
  const patched = await client
    .mergePatch({ apiVersion: API_VERSION, kind: "App", namespace: ns, name: "own" }, { spec: { image: foreign } }, "kubectl")
    .then(
      () => undefined,
      (e: unknown) => e as { code?: number },
    );
  t.is(patched?.code, 403);
});
