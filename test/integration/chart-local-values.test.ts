// The values ./hack/up installs the chart with (hack/lib/local-values.ts) render with the pinned
// helm: the local images, every pod of the chart on the real node (its label and taint as
// hack/lib/realnode.sh registers them), Apps' pods placed there by the operator's configuration
// (parsed by the operator's own config schema), the database URL from the Secret hack/up creates,
// the pods running as the images' user, the operator calling the API over its internal TLS
// listener. The rendered objects are accepted by the API server.
import test from "ava";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import * as yaml from "js-yaml";
import type * as k8s from "@kubernetes/client-node";
import { loadOperatorConfig } from "../../operator/config.ts";
import { loadConfig } from "../../api/config.ts";
import {
  API_INGRESS_HOST,
  DATABASE_SECRET,
  localValues,
  parseReference,
  REAL_NODE_SELECTOR,
  REAL_NODE_TOLERATIONS,
} from "../../hack/lib/local-values.ts";
import { NODE_UID } from "../../hack/images.ts";
import { BUILDKIT_CLIENT_SECRET } from "../../operator/release/builders.ts";
import { K8S_VERSION, helm, kubectl, root } from "../helpers/binaries.ts";
import { deleteNamespace, kube, uniqueName } from "../helpers/kube.ts";

type Obj = k8s.KubernetesObject & { metadata: k8s.V1ObjectMeta; spec?: { template?: { spec?: k8s.V1PodSpec } } };

const API = "127.0.0.1:5000/berth/berth-api:0123456789ab";
const OPERATOR = "127.0.0.1:5000/berth/berth-operator:ba9876543210";
let dir = "";
let rendered: Obj[] = [];

test.before(async () => {
  dir = mkdtempSync(join(tmpdir(), "berth-local-values-"));
  const file = join(dir, "values.json");
  writeFileSync(file, JSON.stringify(localValues({ api: parseReference(API), operator: parseReference(OPERATOR) })));
  const r = await helm([
    "template",
    "berth",
    join(root, "charts/berth"),
    "--namespace",
    "berth-system",
    "--kube-version",
    K8S_VERSION,
    "-f",
    file,
  ]);
  if (r.code !== 0) throw new Error(`helm template failed (${r.code}):\n${r.stderr}`);
  rendered = (yaml.loadAll(r.stdout) as (Obj | null)[]).filter((o): o is Obj => o !== null);
});
test.after.always(() => {
  if (dir) rmSync(dir, { recursive: true, force: true });
});

const find = (kind: string, name: string): Obj => {
  const o = rendered.find((x) => x.kind === kind && x.metadata.name === name);
  if (!o) throw new Error(`no ${kind}/${name} rendered`);
  return o;
};
const podSpec = (o: Obj): k8s.V1PodSpec => o.spec!.template!.spec!;

test("an image reference splits into repository and tag (a registry's port is not a tag)", (t) => {
  t.deepEqual(parseReference(API), { repository: "127.0.0.1:5000/berth/berth-api", tag: "0123456789ab" });
  t.throws(() => parseReference("127.0.0.1:5000/berth/berth-api"), { message: /with a tag/ });
  t.throws(() => parseReference("127.0.0.1:5000/berth/berth-api@sha256:00"), { message: /with a tag/ });
});

test("the real node's label and taint are the ones hack/lib/realnode.sh registers", (t) => {
  const realnode = readFileSync(join(root, "hack/lib/realnode.sh"), "utf8");
  const [key, value] = Object.entries(REAL_NODE_SELECTOR)[0]!;
  t.true(realnode.includes(`--node-labels "${key}=${value}"`), "the kubelet registers the label");
  t.true(realnode.includes(`REAL_NODE_TAINT="${REAL_NODE_TOLERATIONS[0].key}"`), "the kubelet registers the taint");
  t.true(realnode.includes(`effect: ${REAL_NODE_TOLERATIONS[0].effect}`));
});

test("the chart's pods run the local images on the real node as the images' user", (t) => {
  const workloads = [find("Deployment", "berth-api"), find("Deployment", "berth-operator"), find("Job", "berth-migrations")];
  for (const w of workloads) {
    const spec = podSpec(w);
    t.deepEqual(spec.nodeSelector, { ...REAL_NODE_SELECTOR }, `${w.kind}/${w.metadata.name}`);
    t.deepEqual(
      spec.tolerations,
      REAL_NODE_TOLERATIONS.map((x) => ({ ...x })),
      `${w.kind}/${w.metadata.name}`,
    );
    t.like(spec.securityContext, { runAsNonRoot: true, runAsUser: NODE_UID, runAsGroup: NODE_UID });
  }
  t.is(podSpec(find("Deployment", "berth-api")).containers[0]!.image, API);
  t.is(podSpec(find("Job", "berth-migrations")).containers[0]!.image, API, "the migration hook runs the API image");
  t.is(podSpec(find("Deployment", "berth-operator")).containers[0]!.image, OPERATOR);
  t.is((find("Deployment", "berth-api").spec as { replicas?: number }).replicas, 1);
});

test("the operator places Apps' pods on the real node, and the database URL comes from hack/up's Secret", (t) => {
  const env = podSpec(find("Deployment", "berth-operator")).containers[0]!.env ?? [];
  const config = loadOperatorConfig(Object.fromEntries(env.filter((e) => e.value !== undefined).map((e) => [e.name, e.value])));
  t.deepEqual(config.BERTH_WORKLOAD_NODE_SELECTOR, { ...REAL_NODE_SELECTOR });
  t.deepEqual(
    config.BERTH_WORKLOAD_TOLERATIONS,
    REAL_NODE_TOLERATIONS.map((x) => ({ ...x })),
  );
  for (const w of [find("Deployment", "berth-api"), find("Job", "berth-migrations")]) {
    const db = podSpec(w).containers[0]!.env?.find((e) => e.name === "DATABASE_URL");
    t.deepEqual(db?.valueFrom?.secretKeyRef, { name: DATABASE_SECRET, key: "DATABASE_URL" });
  }
  t.false(
    rendered.some((o) => o.kind === "Secret"),
    "no Secret of the chart's own: the URL never passes through Helm values",
  );
  const ingress = find("Ingress", "berth-api") as Obj & { spec: k8s.V1IngressSpec };
  t.is(ingress.spec.rules?.[0]?.host, API_INGRESS_HOST);
});

test("the operator calls the API over its internal TLS listener, trusting the release's own CA; forward-auth stays plain", (t) => {
  const op = podSpec(find("Deployment", "berth-operator")).containers[0]!;
  const config = loadOperatorConfig(Object.fromEntries((op.env ?? []).filter((e) => e.value !== undefined).map((e) => [e.name, e.value])));
  t.like(config, {
    BERTH_OPERATOR_API_URL: "https://berth-api.berth-system.svc:8443",
    BERTH_OPERATOR_API_CA_FILE: "/var/run/secrets/berth-api-ca/ca.crt",
    BERTH_FORWARD_AUTH_URL: "http://berth-api.berth-system.svc:80/api/v1/forward-auth",
  });
  const api = podSpec(find("Deployment", "berth-api")).containers[0]!;
  const env = Object.fromEntries((api.env ?? []).filter((e) => e.value !== undefined).map((e) => [e.name, e.value!]));
  t.is(loadConfig({ ...env, DATABASE_URL: "postgres://u:p@db:5432/berth" }).BERTH_INTERNAL_TLS_PORT, 8443);
  t.truthy(find("Certificate", "berth-api-internal"), "cert-manager issues the API's certificate");
});

test("the API server accepts every rendered object (server-side dry run), with no Pod Security warning", async (t) => {
  const k = kube();
  const ns = uniqueName("local-values");
  const pss = { "pod-security.kubernetes.io/enforce": "restricted", "pod-security.kubernetes.io/warn": "restricted" };
  await k.core.createNamespace({ body: { metadata: { name: ns, labels: pss } } });
  t.teardown(() => deleteNamespace(k, ns));
  // cluster-scoped names (ClusterRoles) follow the release: one of its own
  const r = await helm([
    "template",
    uniqueName("berth-lv"),
    join(root, "charts/berth"),
    "--namespace",
    ns,
    "--kube-version",
    K8S_VERSION,
    "-f",
    join(dir, "values.json"),
  ]);
  t.is(r.code, 0, r.stderr);
  const applied = await kubectl(["apply", "--dry-run=server", "-f", "-"], r.stdout);
  t.is(applied.code, 0, applied.stderr);
  t.false(/PodSecurity/.test(applied.stderr), applied.stderr);
  t.is(applied.stdout.split("\n").filter((l) => l.endsWith("(server dry run)")).length, rendered.length, applied.stdout);
});

test("with a builder, the operator's build configuration comes from the values and parses", async (t) => {
  const file = join(dir, "values-builder.json");
  writeFileSync(
    file,
    JSON.stringify(
      localValues({
        api: parseReference(API),
        operator: parseReference(OPERATOR),
        builder: {
          image: parseReference("127.0.0.1:5000/berth/berth-builder:0123"),
          buildkitHost: "tcp://10.201.0.1:26552",
          registry: "127.0.0.1:5000",
          baseImages: { node: "127.0.0.1:5000/berth/node:v1" },
        },
      }),
    ),
  );
  const r = await helm([
    "template",
    "berth",
    join(root, "charts/berth"),
    "--namespace",
    "berth-system",
    "--kube-version",
    K8S_VERSION,
    "-f",
    file,
  ]);
  t.is(r.code, 0, r.stderr);
  const op = (yaml.loadAll(r.stdout) as (Obj | null)[]).find((o) => o?.kind === "Deployment" && o.metadata.name === "berth-operator")!;
  const env = podSpec(op).containers[0]!.env ?? [];
  const config = loadOperatorConfig(Object.fromEntries(env.filter((e) => e.value !== undefined).map((e) => [e.name, e.value])));
  t.like(config, {
    BERTH_BUILDER_IMAGE: "127.0.0.1:5000/berth/berth-builder:0123",
    BERTH_BUILDKIT_HOST: "tcp://10.201.0.1:26552",
    BERTH_BUILD_REGISTRY: "127.0.0.1:5000",
    BERTH_BUILD_REGISTRY_INSECURE: true,
    BERTH_BUILD_BASE_IMAGES: { node: "127.0.0.1:5000/berth/node:v1" },
    BERTH_BUILD_CACHE: "local",
  });
  const registryCache = await helm([
    "template",
    "berth",
    join(root, "charts/berth"),
    "--namespace",
    "berth-system",
    "--kube-version",
    K8S_VERSION,
    "-f",
    file,
    "--set",
    "builder.cache=registry",
  ]);
  t.is(registryCache.code, 0, registryCache.stderr);
  const op2 = (yaml.loadAll(registryCache.stdout) as (Obj | null)[]).find(
    (o) => o?.kind === "Deployment" && o.metadata.name === "berth-operator",
  )!;
  const env2 = podSpec(op2).containers[0]!.env ?? [];
  t.is(
    loadOperatorConfig(Object.fromEntries(env2.filter((e) => e.value !== undefined).map((e) => [e.name, e.value]))).BERTH_BUILD_CACHE,
    "registry",
  );
  const without = podSpec(find("Deployment", "berth-operator")).containers[0]!.env ?? [];
  t.false(
    without.some((e) => e.name.startsWith("BERTH_BUILD")),
    "builds are off unless configured",
  );
});

test("with a builder and hack's client certificate for buildkitd: mutual TLS on, the chart writes the Secret the operator reads", async (t) => {
  const client = {
    ca: "-----BEGIN CERTIFICATE-----\nMIIBca\n-----END CERTIFICATE-----\n",
    cert: "-----BEGIN CERTIFICATE-----\nMIIBclient\n-----END CERTIFICATE-----\n",
    key: "-----BEGIN PRIVATE KEY-----\nMIGHkey\n-----END PRIVATE KEY-----\n",
  };
  const file = join(dir, "values-builder-tls.json");
  writeFileSync(
    file,
    JSON.stringify(
      localValues({
        api: parseReference(API),
        operator: parseReference(OPERATOR),
        builder: {
          image: parseReference("127.0.0.1:5000/berth/berth-builder:0123"),
          buildkitHost: "tcp://10.201.0.1:26552",
          registry: "127.0.0.1:5000",
          baseImages: {},
          tls: client,
        },
      }),
    ),
  );
  const r = await helm([
    "template",
    "berth",
    join(root, "charts/berth"),
    "--namespace",
    "berth-system",
    "--kube-version",
    K8S_VERSION,
    "-f",
    file,
  ]);
  t.is(r.code, 0, r.stderr);
  const objects = (yaml.loadAll(r.stdout) as (Obj | null)[]).filter((o): o is Obj => o !== null);
  const op = objects.find((o) => o.kind === "Deployment" && o.metadata.name === "berth-operator")!;
  const env = podSpec(op).containers[0]!.env ?? [];
  const config = loadOperatorConfig(Object.fromEntries(env.filter((e) => e.value !== undefined).map((e) => [e.name, e.value])));
  t.like(config, { BERTH_BUILDKIT_TLS: true, BERTH_NAMESPACE: "berth-system", BERTH_BUILDKIT_TLS_SERVER_NAME: undefined });
  const secret = objects.find<Obj & { stringData?: Record<string, string> }>(
    (o): o is Obj & { stringData?: Record<string, string> } => o.kind === "Secret" && o.metadata.name === BUILDKIT_CLIENT_SECRET,
  );
  t.deepEqual(secret?.stringData, { "ca.crt": client.ca, "tls.crt": client.cert, "tls.key": client.key });
  t.is(secret?.metadata.namespace, "berth-system");
});

test("the API may read branch heads from the local Git server on the node's private address, and from nothing else private", async (t) => {
  const file = join(dir, "values-git.json");
  writeFileSync(
    file,
    JSON.stringify(localValues({ api: parseReference(API), operator: parseReference(OPERATOR), gitUrl: "http://10.201.0.1:26553" })),
  );
  const r = await helm([
    "template",
    "berth",
    join(root, "charts/berth"),
    "--namespace",
    "berth-system",
    "--kube-version",
    K8S_VERSION,
    "-f",
    file,
  ]);
  t.is(r.code, 0, r.stderr);
  const api = (yaml.loadAll(r.stdout) as (Obj | null)[]).find((o) => o?.kind === "Deployment" && o.metadata.name === "berth-api")!;
  const env = Object.fromEntries(
    (podSpec(api).containers[0]!.env ?? []).filter((e) => e.value !== undefined).map((e) => [e.name, e.value!]),
  );
  const config = loadConfig({ ...env, DATABASE_URL: "postgres://u:p@db:5432/berth" });
  t.deepEqual(config.BERTH_OUTBOUND_ALLOW, ["10.201.0.1/32"]);
  t.deepEqual(config.BERTH_OUTBOUND_DENY, []);
});
