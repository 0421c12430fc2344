// The Helm chart (charts/berth) against real parts: `helm lint --strict` and `helm template` with
// the pinned helm binary, every rendered object accepted by the real API server (server-side
// dry-run, in a namespace enforcing the "restricted" Pod Security Standard), values.schema.json
// refusing bad values, the rendered environment parsed by the code's own config schemas, and the
// RBAC applied for real and checked with `kubectl auth can-i` as the chart's ServiceAccounts.
import { TokenServiceConfigSchema } from "../../api/registry/config.ts";
import test from "ava";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import * as yaml from "js-yaml";
import type * as k8s from "@kubernetes/client-node";
import { loadOperatorConfig, OperatorConfigSchema } from "../../operator/config.ts";
import { buildSettings } from "../../operator/release/controller.ts";
import { BUILDKIT_CLIENT_SECRET } from "../../operator/release/builders.ts";
import { ConfigSchema, loadConfig } from "../../api/config.ts";
import { rulesOf } from "../../kube/rbac.ts";
import { OPERATOR_ACCESS } from "../../operator/rbac.ts";
import { API_ACCESS } from "../../api/rbac.ts";
import { KINDS } from "../../crds/schemas.ts";
import { deleteNamespace, eventually, kube, uniqueName } from "../helpers/kube.ts";
import { freshDatabase, query } from "../helpers/db.ts";
import { K8S_VERSION, helm, kubectl, root, run, type Run } from "../helpers/binaries.ts";

const chartDir = join(root, "charts/berth");

// ---- rendering ----

type Obj = k8s.KubernetesObject & { metadata: k8s.V1ObjectMeta; [k: string]: unknown };

const appVersion = (yaml.load(readFileSync(join(chartDir, "Chart.yaml"), "utf8")) as { appVersion: string }).appVersion;

let tmp = "";
let secondValuesFile = "";
/** The second values set: an existing database Secret, the API Ingress with TLS, 2 operator replicas. */
const secondValues = {
  database: { existingSecret: "berth-db", existingSecretKey: "url" },
  operator: {
    replicas: 2,
    config: { ingressClassName: "nginx", defaultTlsSecret: "wildcard-tls", watchNamespace: "team-a", concurrency: 4 },
  },
  api: {
    replicas: 3,
    ingress: {
      enabled: true,
      className: "nginx",
      host: "berth.example.com",
      annotations: { "cert-manager.io/cluster-issuer": "letsencrypt" },
      tls: { enabled: true },
    },
    config: { host: "::", outbound: { allow: ["10.20.0.15/32", "fd00:1::/64"], deny: ["203.0.113.0/24"] } },
    oidc: {
      issuerUrl: "https://login.example.com/realms/acme",
      clientId: "berth",
      clientSecret: { existingSecret: "berth-oidc", key: "secret" },
      redirectUrl: "https://berth.example.com/api/v1/auth/oidc/callback",
    },
  },
};

async function template(release: string, namespace: string, args: string[] = []): Promise<Run> {
  return helm(["template", release, chartDir, "--namespace", namespace, "--kube-version", K8S_VERSION, ...args]);
}

async function render(release: string, namespace: string, args: string[] = []): Promise<{ yaml: string; objects: Obj[] }> {
  const r = await template(release, namespace, args);
  if (r.code !== 0) throw new Error(`helm template failed (${r.code}):\n${r.stderr}`);
  return { yaml: r.stdout, objects: (yaml.loadAll(r.stdout) as (Obj | null)[]).filter((o): o is Obj => o !== null) };
}

function find<T extends object = Obj>(objects: Obj[], kind: string, name: string): T & { metadata: k8s.V1ObjectMeta } {
  const o = objects.find((x) => x.kind === kind && x.metadata.name === name);
  if (!o) throw new Error(`no ${kind} ${name} rendered; got ${objects.map((x) => `${x.kind}/${x.metadata.name}`).join(", ")}`);
  return o as unknown as T & { metadata: k8s.V1ObjectMeta };
}
const kinds = (objects: Obj[]) => objects.map((o) => `${o.kind}/${o.metadata.name}`).sort();

function container(d: k8s.V1Deployment | k8s.V1Job, name: string): k8s.V1Container {
  const c = d.spec?.template.spec?.containers.find((x) => x.name === name);
  if (!c) throw new Error(`no container ${name}`);
  return c;
}

/** The container's environment as the process would see it; fieldRefs and secretKeyRefs resolved by `resolve`. */
function envOf(c: k8s.V1Container, resolve: (e: k8s.V1EnvVar) => string): Record<string, string> {
  return Object.fromEntries((c.env ?? []).map((e) => [e.name, e.value ?? resolve(e)]));
}

const NS = "berth-system";

test.before(() => {
  tmp = mkdtempSync(join(tmpdir(), "berth-chart-"));
  secondValuesFile = join(tmp, "second.yaml");
  writeFileSync(secondValuesFile, yaml.dump(secondValues));
});
test.after.always(() => {
  if (tmp) rmSync(tmp, { recursive: true, force: true });
});

// ---- lint and render ----

test("helm lint --strict passes with every value set", async (t) => {
  for (const [label, values] of valueSets) {
    const r = await helm(["lint", "--strict", chartDir, "--kube-version", K8S_VERSION, ...values()]);
    t.is(r.code, 0, `helm lint (${label}):\n${r.stdout}${r.stderr}`);
    t.regex(r.stdout, /1 chart\(s\) linted, 0 chart\(s\) failed/);
  }
});

test("network: Berth's pods closed but for the port each serves; workspaces' policies name DNS and this release's API pods, checked by the API's own schema", async (t) => {
  const { objects } = await render("berth", NS);
  type Policy = {
    spec: { podSelector: { matchLabels: Record<string, string> }; policyTypes: string[]; ingress?: { ports?: { port: string }[] }[] };
  };
  const deny = find<Policy>(objects, "NetworkPolicy", "berth-default-deny");
  t.deepEqual(deny.spec.podSelector.matchLabels, { "app.kubernetes.io/name": "berth", "app.kubernetes.io/instance": "berth" });
  t.deepEqual(deny.spec.policyTypes, ["Ingress"]);
  t.is(deny.spec.ingress, undefined, "no ingress rule: every connection in refused");
  const api = find<Policy>(objects, "NetworkPolicy", "berth-api");
  t.is(api.spec.podSelector.matchLabels["app.kubernetes.io/component"], "api");
  t.deepEqual(
    api.spec.ingress?.[0]?.ports?.map((p) => p.port),
    ["http"],
  );
  const deployment = find<k8s.V1Deployment>(objects, "Deployment", "berth-api");
  t.true(
    container(deployment, "api").ports?.some((p) => p.name === "http"),
    "the port the policy names exists",
  );
  t.deepEqual(
    find<Policy>(objects, "NetworkPolicy", "berth-operator").spec.ingress?.[0]?.ports?.map((p) => p.port),
    ["health"],
  );

  // the API's BERTH_WORKSPACE_NETWORK: parsed by the API's own configuration, as its pod would
  const env = envOf(container(deployment, "api"), () => "");
  const network = loadConfig({
    DATABASE_URL: "postgres://u:p@db/berth",
    BERTH_WORKSPACE_NETWORK: env.BERTH_WORKSPACE_NETWORK,
  }).BERTH_WORKSPACE_NETWORK;
  t.true(network.enabled);
  t.deepEqual(network.ingressFrom, [{ namespaceSelector: { matchLabels: { "kubernetes.io/metadata.name": "kube-system" } } }]);
  t.deepEqual(network.egressTo[1], {
    to: [
      {
        namespaceSelector: { matchLabels: { "kubernetes.io/metadata.name": NS } },
        podSelector: {
          matchLabels: { "app.kubernetes.io/name": "berth", "app.kubernetes.io/instance": "berth", "app.kubernetes.io/component": "api" },
        },
      },
    ],
    ports: [{ protocol: "TCP", port: 8080 }],
  });
  t.deepEqual(network.egressTo[0]?.ports, [
    { protocol: "UDP", port: 53 },
    { protocol: "TCP", port: 53 },
  ]);

  const off = await render("berth", NS, ["--set", "networkPolicy.enabled=false", "--set", "workspaces.network.enabled=false"]);
  t.false(off.objects.some((o) => o.kind === "NetworkPolicy"));
  const offEnv = envOf(container(find<k8s.V1Deployment>(off.objects, "Deployment", "berth-api"), "api"), () => "");
  t.false(
    loadConfig({ DATABASE_URL: "postgres://u:p@db/berth", BERTH_WORKSPACE_NETWORK: offEnv.BERTH_WORKSPACE_NETWORK }).BERTH_WORKSPACE_NETWORK
      .enabled,
  );
});

test("the default values render the operator, the API, their RBAC and the migration hook", async (t) => {
  const { objects } = await render("berth", NS);
  t.deepEqual(kinds(objects), [
    "ClusterRole/berth-api",
    "ClusterRole/berth-api-workspace",
    "ClusterRole/berth-operator",
    "ClusterRole/berth-operator-workspace",
    "ClusterRoleBinding/berth-api",
    "ClusterRoleBinding/berth-operator",
    "Deployment/berth-api",
    "Deployment/berth-operator",
    "Job/berth-migrations",
    "NetworkPolicy/berth-api",
    "NetworkPolicy/berth-default-deny",
    "NetworkPolicy/berth-operator",
    "PodDisruptionBudget/berth-api",
    "Role/berth-api-release",
    "Role/berth-operator-release",
    "RoleBinding/berth-api-release",
    "RoleBinding/berth-operator-release",
    "Secret/berth-database",
    "Secret/berth-migrations-db",
    "Service/berth-api",
    "Service/berth-operator-metrics",
    "ServiceAccount/berth-api",
    "ServiceAccount/berth-operator",
    "ValidatingAdmissionPolicy/berth-api-workspace",
    "ValidatingAdmissionPolicyBinding/berth-api-workspace",
  ]);
  for (const o of objects) {
    if (!["ClusterRole", "ClusterRoleBinding", "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"].includes(o.kind!))
      t.is(o.metadata.namespace, NS, `${o.kind}/${o.metadata.name} is not in the release namespace`);
  }

  const op = find<k8s.V1Deployment>(objects, "Deployment", "berth-operator");
  t.is(op.spec?.replicas, 1);
  t.is(op.spec?.template.spec?.serviceAccountName, "berth-operator");
  const opc = container(op, "operator");
  t.is(opc.image, `ghcr.io/berth-dev/berth-operator:${appVersion}`);
  t.is(opc.imagePullPolicy, "IfNotPresent");
  t.deepEqual(opc.command, ["node", "--max-semi-space-size=1", "--optimize-for-size", "--v8-pool-size=1", "operator/main.ts"]);
  t.like(
    envOf(opc, () => "pod"),
    { BERTH_LEADER_ELECTION: "true", BERTH_LEADER_ELECTION_NAMESPACE: NS, BERTH_OPERATOR_HEALTH_HOST: "0.0.0.0" },
  );

  const api = find<k8s.V1Deployment>(objects, "Deployment", "berth-api");
  t.is(api.spec?.replicas, 2);
  t.is(api.spec?.template.spec?.serviceAccountName, "berth-api");
  const apic = container(api, "api");
  t.is(apic.image, `ghcr.io/berth-dev/berth-api:${appVersion}`);
  t.deepEqual(apic.command, ["node", "api/main.ts"]);
  t.deepEqual(apic.env?.find((e) => e.name === "DATABASE_URL")?.valueFrom?.secretKeyRef, { name: "berth-database", key: "DATABASE_URL" });
  t.is(apic.env?.find((e) => e.name === "BERTH_API_HOST")?.value, "0.0.0.0");
  // terminationGracePeriodSeconds covers the preStop sleep and the shutdown drain.
  t.true((api.spec?.template.spec?.terminationGracePeriodSeconds ?? 0) >= 5 + 10);
  t.deepEqual(apic.lifecycle?.preStop?.sleep, { seconds: 5 });

  const svc = find<k8s.V1Service>(objects, "Service", "berth-api");
  t.deepEqual(svc.spec?.ports, [{ name: "http", port: 80, targetPort: "http", protocol: "TCP" }]);
  t.deepEqual(svc.spec?.selector, api.spec?.selector.matchLabels);
  const pdb = find<k8s.V1PodDisruptionBudget>(objects, "PodDisruptionBudget", "berth-api");
  t.is(pdb.spec?.maxUnavailable, 1);
  t.deepEqual(pdb.spec?.selector?.matchLabels, api.spec?.selector.matchLabels);

  const job = find<k8s.V1Job>(objects, "Job", "berth-migrations");
  t.like(job.metadata.annotations, { "helm.sh/hook": "pre-install,pre-upgrade" });
  const jobc = container(job, "migrations");
  t.is(jobc.image, apic.image);
  t.deepEqual(jobc.command, ["node", "api/main.ts", "--migrate-only"]);
  t.false(job.spec?.template.spec?.automountServiceAccountToken, "the migration pod needs no Kubernetes credentials");
  // The hook runs before the release's Secret exists: it reads a hook Secret created just before it.
  const hookSecret = find<k8s.V1Secret>(objects, "Secret", "berth-migrations-db");
  t.is(jobc.env?.find((e) => e.name === "DATABASE_URL")?.valueFrom?.secretKeyRef?.name, "berth-migrations-db");
  t.like(hookSecret.metadata.annotations, { "helm.sh/hook": "pre-install,pre-upgrade", "helm.sh/hook-weight": "-10" });
  t.true(Number(hookSecret.metadata.annotations?.["helm.sh/hook-weight"]) < Number(job.metadata.annotations?.["helm.sh/hook-weight"]));
});

test("the second values set renders: existing database Secret, API Ingress with TLS, 2 operator replicas", async (t) => {
  const { objects } = await render("berth", NS, ["--values", secondValuesFile]);
  t.deepEqual(
    objects.filter((o) => o.kind === "Secret"),
    [],
    "no Secret is rendered when database.existingSecret is set",
  );
  const op = find<k8s.V1Deployment>(objects, "Deployment", "berth-operator");
  t.is(op.spec?.replicas, 2);
  t.like(
    envOf(container(op, "operator"), () => "pod"),
    {
      BERTH_INGRESS_CLASS: "nginx",
      BERTH_DEFAULT_TLS_SECRET: "wildcard-tls",
      BERTH_WATCH_NAMESPACE: "team-a",
      BERTH_OPERATOR_CONCURRENCY: "4",
    },
  );
  const api = find<k8s.V1Deployment>(objects, "Deployment", "berth-api");
  t.is(api.spec?.replicas, 3);
  const ref = { name: "berth-db", key: "url" };
  t.deepEqual(container(api, "api").env?.find((e) => e.name === "DATABASE_URL")?.valueFrom?.secretKeyRef, ref);
  t.deepEqual(
    container(find<k8s.V1Job>(objects, "Job", "berth-migrations"), "migrations").env?.find((e) => e.name === "DATABASE_URL")?.valueFrom
      ?.secretKeyRef,
    ref,
  );
  const ing = find<k8s.V1Ingress>(objects, "Ingress", "berth-api");
  t.is(ing.spec?.ingressClassName, "nginx");
  t.like(ing.metadata.annotations, { "cert-manager.io/cluster-issuer": "letsencrypt" });
  t.deepEqual(ing.spec?.tls, [{ hosts: ["berth.example.com"], secretName: "berth-api-tls" }]);
  t.deepEqual(ing.spec?.rules, [
    {
      host: "berth.example.com",
      http: { paths: [{ path: "/", pathType: "Prefix", backend: { service: { name: "berth-api", port: { name: "http" } } } }] },
    },
  ]);
});

test("api.internalTls: cert-manager's CA chain and the certificate of the Service's names; the API serves it on its own port, the operator calls it there trusting that CA alone, and only the operator may connect", async (t) => {
  const { objects } = await render("berth", NS, ["--set", "api.internalTls.enabled=true"]);
  type Certificate = { spec: Record<string, unknown> & { issuerRef: { name: string; kind: string; group: string }; secretName: string } };
  // self-signed Issuer -> CA Certificate -> CA Issuer -> the serving Certificate
  t.deepEqual(find<{ spec: unknown }>(objects, "Issuer", "berth-api-internal-selfsigned").spec, { selfSigned: {} });
  const ca = find<Certificate>(objects, "Certificate", "berth-api-internal-ca");
  t.like(ca.spec, {
    isCA: true,
    secretName: "berth-api-internal-ca",
    issuerRef: { name: "berth-api-internal-selfsigned", kind: "Issuer", group: "cert-manager.io" },
  });
  t.deepEqual(find<{ spec: unknown }>(objects, "Issuer", "berth-api-internal-ca").spec, { ca: { secretName: "berth-api-internal-ca" } });
  const serving = find<Certificate>(objects, "Certificate", "berth-api-internal");
  t.like(serving.spec, {
    secretName: "berth-api-internal-tls",
    dnsNames: [`berth-api.${NS}.svc`, `berth-api.${NS}.svc.cluster.local`],
    usages: ["server auth", "digital signature"],
    privateKey: { rotationPolicy: "Always" },
    issuerRef: { name: "berth-api-internal-ca", kind: "Issuer", group: "cert-manager.io" },
  });
  for (const o of objects.filter((x) => x.apiVersion === "cert-manager.io/v1")) t.is(o.metadata.namespace, NS);

  // the API: the Secret's certificate and key (not its CA) where BERTH_INTERNAL_TLS_* point, the port, the Service
  const api = find<k8s.V1Deployment>(objects, "Deployment", "berth-api");
  const apic = container(api, "api");
  const apiEnv = envOf(apic, () => "");
  const apiMount = apic.volumeMounts?.find((m) => m.name === "internal-tls");
  t.like(apiMount, { mountPath: "/var/run/secrets/berth/api-tls", readOnly: true });
  const apiVolume = api.spec?.template.spec?.volumes?.find((v) => v.name === "internal-tls");
  t.is(apiVolume?.secret?.secretName, serving.spec.secretName);
  t.deepEqual(
    apiVolume?.secret?.items?.map((i) => `${apiMount?.mountPath}/${i.path}`),
    [apiEnv.BERTH_INTERNAL_TLS_CERT_FILE, apiEnv.BERTH_INTERNAL_TLS_KEY_FILE],
  );
  t.deepEqual(
    apic.ports?.map((p) => [p.name, p.containerPort]),
    [
      ["http", 8080],
      ["internal-https", 8443],
    ],
  );
  t.is(apiEnv.BERTH_INTERNAL_TLS_PORT, "8443");
  t.deepEqual(find<k8s.V1Service>(objects, "Service", "berth-api").spec?.ports, [
    { name: "http", port: 80, targetPort: "http", protocol: "TCP" },
    { name: "internal-https", port: 8443, targetPort: "internal-https", protocol: "TCP" },
  ]);
  // the probes stay on the plain port
  t.like(apic.readinessProbe?.httpGet, { port: "http" });

  // the operator: the https URL of a name the certificate holds, and the CA alone (never the key) where BERTH_OPERATOR_API_CA_FILE points
  const op = find<k8s.V1Deployment>(objects, "Deployment", "berth-operator");
  const opc = container(op, "operator");
  const opEnv = envOf(opc, () => "pod");
  const url = new URL(opEnv.BERTH_OPERATOR_API_URL!);
  t.is(url.protocol, "https:");
  t.true((serving.spec.dnsNames as string[]).includes(url.hostname));
  t.is(url.port, "8443");
  const opMount = opc.volumeMounts?.find((m) => m.name === "api-ca");
  t.like(opMount, { mountPath: "/var/run/secrets/berth-api-ca", readOnly: true });
  const opVolume = op.spec?.template.spec?.volumes?.find((v) => v.name === "api-ca");
  t.deepEqual(opVolume?.secret, { secretName: "berth-api-internal-tls", items: [{ key: "ca.crt", path: "ca.crt" }] });
  t.is(opEnv.BERTH_OPERATOR_API_CA_FILE, `${opMount?.mountPath}/ca.crt`);
  t.is(
    opEnv.BERTH_FORWARD_AUTH_URL,
    `http://berth-api.${NS}.svc:80/api/v1/forward-auth`,
    "the ingress controller's forward-auth stays plain",
  );

  // the network: the plain port open to all as before, the TLS port to the operator's pods only
  type Policy = { spec: { ingress: k8s.V1NetworkPolicyIngressRule[] } };
  const policy = find<Policy>(objects, "NetworkPolicy", "berth-api");
  t.deepEqual(policy.spec.ingress, [
    { ports: [{ protocol: "TCP", port: "http" }] },
    {
      from: [{ podSelector: { matchLabels: op.spec?.selector.matchLabels } }],
      ports: [{ protocol: "TCP", port: "internal-https" }],
    },
  ]);

  // Off (the default): none of it, and the objects are the default's
  const off = await render("berth", NS, ["--set", "api.internalTls.enabled=false"]);
  t.is((await render("berth", NS)).yaml, off.yaml);
  t.false(off.objects.some((o) => o.apiVersion === "cert-manager.io/v1"));
  t.false(off.yaml.includes("internal-https") || off.yaml.includes("BERTH_INTERNAL_TLS") || off.yaml.includes("api-ca"));

  // ports that collide are refused by the template
  for (const [value, message] of [
    ["api.internalTls.port=8080", /api.internalTls.port must differ from api.config.port/],
    ["api.internalTls.port=80", /api.internalTls.port must differ from api.service.port/],
  ] as const) {
    const r = await template("berth", NS, ["--set", "api.internalTls.enabled=true", "--set", value]);
    t.not(r.code, 0);
    t.regex(r.stderr, message);
  }
});

// ---- builds over mutual TLS to buildkitd (docs/builds.md "mTLS") ----

const BUILDS = [
  "--set",
  "builder.enabled=true",
  "--set",
  "builder.buildkitHost=tcp://10.0.0.1:1234",
  "--set",
  "builder.registry=reg.example.com:5000",
];
/** PEM-shaped texts (the chart and the API server do not parse them; the schema checks their shape). */
const CLIENT_PEM = {
  ca: "-----BEGIN CERTIFICATE-----\nMIIBca\n-----END CERTIFICATE-----\n",
  cert: "-----BEGIN CERTIFICATE-----\nMIIBclient\n-----END CERTIFICATE-----\n",
  key: "-----BEGIN PRIVATE KEY-----\nMIGHkey\n-----END PRIVATE KEY-----\n",
};
const TLS = ["--set", "builder.tls.enabled=true", "--set", "builder.tls.serverName=buildkitd.builds.svc"];
const TLS_CLIENT = ["--set-json", `builder.tls.client=${JSON.stringify(CLIENT_PEM)}`];
/** Per-namespace pull credentials with the chart's token service (docs/images.md "Pull credentials"). */
const REGISTRY_AUTH = [
  "--set",
  "builder.registryAuth.enabled=true",
  "--set",
  `builder.registryAuth.key=${"0f".repeat(32)}`,
  "--set",
  "builder.registryAuth.tokenService.enabled=true",
];
const operatorEnv = (objects: Obj[]) =>
  envOf(container(find<k8s.V1Deployment>(objects, "Deployment", "berth-operator"), "operator"), () => "berth-operator-5d9c-x2x7q");
const clientSecret = (objects: Obj[]) => objects.find((o) => o.kind === "Secret" && o.metadata.name === BUILDKIT_CLIENT_SECRET);
const releaseRole = (objects: Obj[]) =>
  objects.find((o) => o.kind === "Role" && o.metadata.name === "berth-operator-release") as { rules: Rule[] } | undefined;

test("builds without mutual TLS: no TLS variable, no client Secret; the release Role only with leader election", async (t) => {
  const { objects } = await render("berth", NS, BUILDS);
  const env = operatorEnv(objects);
  for (const name of ["BERTH_BUILDKIT_TLS", "BERTH_BUILDKIT_TLS_SERVER_NAME", "BERTH_NAMESPACE"]) t.false(name in env, name);
  t.is(buildSettings(loadOperatorConfig(env))?.tls, undefined);
  t.is(clientSecret(objects), undefined);
  const noLeader = await render("berth", NS, [...BUILDS, "--set", "operator.config.leaderElection=false"]);
  t.is(releaseRole(noLeader.objects), undefined);
  // PEM texts without builder.tls.enabled write nothing either
  t.is(clientSecret((await render("berth", NS, [...BUILDS, ...TLS_CLIENT])).objects), undefined);
});

test("builds with mutual TLS: the operator's variables parse into settings naming the release namespace and the server name; the Role reads the client Secret by name", async (t) => {
  const { objects } = await render("berth", NS, [...BUILDS, ...TLS]);
  const env = operatorEnv(objects);
  t.like(env, { BERTH_BUILDKIT_TLS: "true", BERTH_NAMESPACE: NS, BERTH_BUILDKIT_TLS_SERVER_NAME: "buildkitd.builds.svc" });
  const operatorVars = Object.keys(OperatorConfigSchema.shape);
  for (const name of Object.keys(env)) t.true(operatorVars.includes(name), `operator env ${name} is not read by operator/config.ts`);
  t.deepEqual(buildSettings(loadOperatorConfig(env))?.tls, { secretNamespace: NS, serverName: "buildkitd.builds.svc" });
  t.is(clientSecret(objects), undefined, "without builder.tls.client the Secret is the platform team's to create");
  for (const values of [[], ["--set", "operator.config.leaderElection=false"]]) {
    const role = releaseRole((await render("berth", NS, [...BUILDS, ...TLS, ...values])).objects);
    t.truthy(role, `the release Role with ${values.join(" ") || "leader election"}`);
    t.true(
      role!.rules.some(
        (r) => r.resources?.includes("secrets") && r.resourceNames?.join() === BUILDKIT_CLIENT_SECRET && r.verbs.join() === "get",
      ),
    );
  }
});

test("builds with mutual TLS and builder.tls.client: the chart writes the client Secret, Opaque, in the release namespace, with the keys the operator reads", async (t) => {
  const { objects } = await render("berth", NS, [...BUILDS, ...TLS, ...TLS_CLIENT]);
  const secret = clientSecret(objects);
  t.truthy(secret);
  t.is(secret?.metadata.namespace, NS);
  t.is(secret?.type, "Opaque");
  t.deepEqual(secret?.stringData, { "ca.crt": CLIENT_PEM.ca, "tls.crt": CLIENT_PEM.cert, "tls.key": CLIENT_PEM.key });
  t.is(secret?.metadata.labels?.["app.kubernetes.io/component"], "buildkit-client");
});

test("builds with mutual TLS: the template wants the whole client certificate, the schema PEM texts and a host name", async (t) => {
  const caOnly = await template("berth", NS, [...BUILDS, ...TLS, "--set-json", `builder.tls.client.ca=${JSON.stringify(CLIENT_PEM.ca)}`]);
  t.not(caOnly.code, 0);
  t.regex(caOnly.stderr, /builder\.tls\.client\.cert is required/);
  for (const [args, path] of [
    [["--set", "builder.tls.client.key=not-a-key"], "/builder/tls/client/key"],
    [["--set-json", `builder.tls.client.cert=${JSON.stringify(CLIENT_PEM.key)}`], "/builder/tls/client/cert"],
    [["--set", "builder.tls.serverName=a b"], "/builder/tls/serverName"],
    [["--set", "builder.tls.verify=false"], "/builder/tls"],
  ] as const) {
    const r = await template("berth", NS, [...BUILDS, ...TLS, ...args]);
    t.not(r.code, 0, path);
    t.true(r.stderr.includes(`at '${path}'`), r.stderr);
  }
});

test("every pod is locked down: non-root, read-only root filesystem, no capabilities, RuntimeDefault seccomp, no service links", async (t) => {
  for (const [, values] of valueSets) {
    const { objects } = await render("berth", NS, values());
    const workloads = objects.filter((o) => o.kind === "Deployment" || o.kind === "Job") as (k8s.V1Deployment | k8s.V1Job)[];
    t.is(workloads.length, 3);
    for (const w of workloads) {
      const pod = w.spec!.template.spec!;
      const what = `${w.kind}/${w.metadata?.name}`;
      t.like(pod.securityContext, { runAsNonRoot: true, seccompProfile: { type: "RuntimeDefault" } }, what);
      t.true((pod.securityContext?.runAsUser ?? 0) > 0, what);
      t.false(pod.enableServiceLinks, what);
      t.false(pod.hostNetwork ?? false, what);
      for (const c of [...pod.containers, ...(pod.initContainers ?? [])]) {
        t.like(
          c.securityContext,
          {
            runAsNonRoot: true,
            allowPrivilegeEscalation: false,
            privileged: false,
            readOnlyRootFilesystem: true,
            capabilities: { drop: ["ALL"] },
            seccompProfile: { type: "RuntimeDefault" },
          },
          `${what} ${c.name}`,
        );
        t.truthy(c.resources?.requests?.memory, `${what} ${c.name} has no memory request`);
        t.truthy(c.resources?.limits?.memory, `${what} ${c.name} has no memory limit`);
        t.truthy(
          c.volumeMounts?.find((m) => m.mountPath === "/tmp"),
          `${what} ${c.name}: a writable /tmp`,
        );
      }
    }
  }
});

test("probes hit /healthz and /readyz on the port the code listens on", async (t) => {
  const { objects } = await render("berth", NS, ["--set", "operator.config.healthPort=9440", "--set", "api.config.port=9080"]);
  for (const [name, portVar, port] of [
    ["operator", "BERTH_OPERATOR_HEALTH_PORT", 9440],
    ["api", "BERTH_API_PORT", 9080],
  ] as const) {
    const c = container(find<k8s.V1Deployment>(objects, "Deployment", `berth-${name}`), name);
    t.is(c.env?.find((e) => e.name === portVar)?.value, String(port));
    t.is(c.ports?.length, 1);
    const portName = c.ports![0]!.name;
    t.is(c.ports![0]!.containerPort, port);
    t.like(c.livenessProbe?.httpGet, { path: "/healthz", port: portName });
    t.like(c.startupProbe?.httpGet, { path: "/healthz", port: portName });
    t.like(c.readinessProbe?.httpGet, { path: "/readyz", port: portName });
  }
  const metrics = find<k8s.V1Service>(objects, "Service", "berth-operator-metrics");
  t.deepEqual(metrics.spec?.ports, [{ name: "metrics", port: 9440, targetPort: "health", protocol: "TCP" }]);
});

// ---- the environment contract with operator/config.ts and api/config.ts ----

/** The value sets every render-level test runs with. */
const valueSets = [
  ["default values", () => []],
  ["second values set", () => ["--values", secondValuesFile]],
  ["internal TLS", () => ["--set", "api.internalTls.enabled=true"]],
] as const;

for (const [label, values] of valueSets) {
  test(`operator and API environments (${label}) hold only variables the code reads, and parse`, async (t) => {
    const { objects } = await render("berth", NS, values());
    const opc = container(find<k8s.V1Deployment>(objects, "Deployment", "berth-operator"), "operator");
    const opEnv = envOf(opc, (e) => {
      t.is(e.valueFrom?.fieldRef?.fieldPath, "metadata.name");
      return "berth-operator-5d9c-x2x7q";
    });
    const operatorVars = Object.keys(OperatorConfigSchema.shape);
    for (const name of Object.keys(opEnv)) t.true(operatorVars.includes(name), `operator env ${name} is not read by operator/config.ts`);
    const opCfg = loadOperatorConfig(opEnv);
    t.is(opCfg.BERTH_LEADER_ELECTION_NAMESPACE, NS, "the Lease lives in the release namespace");
    t.is(opCfg.identity, "berth-operator-5d9c-x2x7q", "the leader identity is the pod name");
    t.true(opCfg.BERTH_LEADER_ELECTION);
    t.is(opCfg.KUBECONFIG, undefined, "in-cluster configuration");
    // the operator presents a projected token for the API's audience, and the API asks for that audience
    t.is(opCfg.BERTH_OPERATOR_TOKEN_FILE, "/var/run/secrets/berth/api-token");
    const opPod = find<k8s.V1Deployment>(objects, "Deployment", "berth-operator").spec!.template.spec!;
    const projected = opPod.volumes?.find((v) => v.name === "api-token")?.projected?.sources?.[0]?.serviceAccountToken;
    t.like(projected, { audience: "berth-api", path: "api-token" });
    t.true(opc.volumeMounts?.some((m) => m.name === "api-token" && m.mountPath === "/var/run/secrets/berth" && m.readOnly === true));
    // the API's address: its Service's plain port, or its internal TLS listener with the CA the chart mounts
    if (label === "internal TLS") {
      t.like(opCfg, {
        BERTH_OPERATOR_API_URL: `https://berth-api.${NS}.svc:8443`,
        BERTH_OPERATOR_API_CA_FILE: "/var/run/secrets/berth-api-ca/ca.crt",
        BERTH_FORWARD_AUTH_URL: `http://berth-api.${NS}.svc:80/api/v1/forward-auth`,
      });
    } else {
      t.is(opCfg.BERTH_OPERATOR_API_URL, `http://berth-api.${NS}.svc:80`);
      t.is(opCfg.BERTH_OPERATOR_API_CA_FILE, undefined);
      t.is(opCfg.BERTH_FORWARD_AUTH_URL, undefined, "derived from the API URL");
    }

    const apiVars = Object.keys(ConfigSchema.shape);
    const dbUrl = "postgresql://berth:secret@db.example.com:5432/berth";
    const apic = container(find<k8s.V1Deployment>(objects, "Deployment", "berth-api"), "api");
    const apiEnv = envOf(apic, (e) => {
      if (e.valueFrom?.fieldRef) {
        t.is(e.valueFrom.fieldRef.fieldPath, "metadata.namespace");
        return NS;
      }
      t.truthy(e.valueFrom?.secretKeyRef);
      return e.name === "BERTH_OIDC_CLIENT_SECRET" ? "an-oidc-client-secret" : dbUrl;
    });
    // Besides its own variables, the API's container sets what the C library reads (docs/operating.md "API memory").
    t.is(apiEnv.MALLOC_ARENA_MAX, "2");
    delete apiEnv.MALLOC_ARENA_MAX;
    for (const name of Object.keys(apiEnv)) t.true(apiVars.includes(name), `API env ${name} is not read by api/config.ts`);
    const apiCfg = loadConfig(apiEnv);
    t.not(apiCfg.BERTH_API_HOST, "127.0.0.1", "the API must listen on every address inside the pod");
    t.true(["0.0.0.0", "::"].includes(apiCfg.BERTH_API_HOST));
    t.is(apiCfg.BERTH_API_PORT, apic.ports?.[0]?.containerPort ?? -1);
    t.is(apiCfg.DATABASE_URL, dbUrl);
    t.is(apiCfg.BERTH_NAMESPACE, NS, "the share cookie key's Secret lives in the release namespace");
    t.is(apiCfg.BERTH_SHARE_COOKIE_KEY, undefined, "the key never passes through Helm values");
    t.is(apiCfg.BERTH_OPERATOR_TOKEN_AUDIENCE, "berth-api");
    if (label === "internal TLS") {
      t.like(apiCfg, {
        BERTH_INTERNAL_TLS_PORT: 8443,
        BERTH_INTERNAL_TLS_CERT_FILE: "/var/run/secrets/berth/api-tls/tls.crt",
        BERTH_INTERNAL_TLS_KEY_FILE: "/var/run/secrets/berth/api-tls/tls.key",
      });
      t.is(apic.ports?.find((p) => p.name === "internal-https")?.containerPort, apiCfg.BERTH_INTERNAL_TLS_PORT);
    } else {
      t.is(apiCfg.BERTH_INTERNAL_TLS_PORT, undefined, "no internal listener unless asked for");
    }
    if (label === "second values set") {
      t.is(apiCfg.BERTH_PUBLIC_URL, "https://berth.example.com", "the public URL from the API's Ingress, https with its TLS");
      t.deepEqual([apiCfg.BERTH_OUTBOUND_ALLOW, apiCfg.BERTH_OUTBOUND_DENY], [["10.20.0.15/32", "fd00:1::/64"], ["203.0.113.0/24"]]);
      t.like(apiCfg, {
        BERTH_OIDC_ISSUER_URL: "https://login.example.com/realms/acme",
        BERTH_OIDC_CLIENT_ID: "berth",
        BERTH_OIDC_CLIENT_SECRET: "an-oidc-client-secret",
        BERTH_OIDC_SCOPES: "openid email profile",
      });
      t.deepEqual(apic.env?.find((e) => e.name === "BERTH_OIDC_CLIENT_SECRET")?.valueFrom?.secretKeyRef, {
        name: "berth-oidc",
        key: "secret",
      });
    } else {
      t.is(apiCfg.BERTH_OIDC_ISSUER_URL, undefined, "sign-in is off by default");
      t.is(apiCfg.BERTH_PUBLIC_URL, undefined, "no Ingress, no public URL: webhook URLs are paths");
      t.deepEqual([apiCfg.BERTH_OUTBOUND_ALLOW, apiCfg.BERTH_OUTBOUND_DENY], [[], []], "only public addresses by default");
    }

    const jobc = container(find<k8s.V1Job>(objects, "Job", "berth-migrations"), "migrations");
    const jobEnv = envOf(jobc, () => dbUrl);
    for (const name of Object.keys(jobEnv)) t.true(apiVars.includes(name), `migration Job env ${name} is not read by api/config.ts`);
    t.notThrows(() => loadConfig(jobEnv));
  });
}

// The hook Job runs `node api/main.ts --migrate-only` (migrate, then exit). This test runs the
// Job's exact command with the Job's exact environment (no KUBECONFIG, no ServiceAccount) against
// an empty database.
test("the migration Job's command migrates an empty database and exits 0", async (t) => {
  const { objects } = await render("berth", NS);
  const jobc = container(find<k8s.V1Job>(objects, "Job", "berth-migrations"), "migrations");
  const db = await freshDatabase({ empty: true });
  try {
    const env = { ...envOf(jobc, () => db.url), BERTH_API_PORT: "0" }; // no KUBECONFIG, no ServiceAccount: like the Job's pod
    const [cmd, ...args] = jobc.command!;
    t.is(cmd, "node");
    const r = await run(process.execPath, args, { env, timeoutMs: 30_000 });
    t.is(r.code, 0, `exit ${r.code}\n${r.stderr}`);
    const rows = await query<{ n: string }>(db.url, "select count(*)::text as n from berth_migrations");
    t.true(Number(rows[0]?.n) > 0);
  } finally {
    await db.drop();
  }
});

// ---- values.schema.json ----

const refusals: [string, string[], string, RegExp][] = [
  ["operator.replicas: -1", ["--set", "operator.replicas=-1"], "/operator/replicas", /minimum/],
  ["api.replicas: -1", ["--set", "api.replicas=-1"], "/api/replicas", /minimum/],
  ["a non-string image tag", ["--set-json", "operator.image.tag=1.2"], "/operator/image/tag", /want string/],
  ["an image digest that is not sha256", ["--set", "api.image.digest=latest"], "/api/image/digest", /does not match pattern/],
  ["a loopback API host", ["--set", "api.config.host=127.0.0.1"], "/api/config/host", /one of '0\.0\.0\.0', '::'/],
  ["a loopback health host", ["--set", "operator.config.healthHost=127.0.0.1"], "/operator/config/healthHost", /one of/],
  ["a database URL that is not PostgreSQL", ["--set", "database.url=mysql://db/berth"], "/database/url", /does not match pattern/],
  [
    "2 operator replicas without leader election",
    ["--set", "operator.replicas=2", "--set", "operator.config.leaderElection=false"],
    "/operator/config/leaderElection",
    /must be true/,
  ],
  ["an Ingress without a host", ["--set", "api.ingress.enabled=true"], "/api/ingress/host", /minLength/],
  ["operator concurrency 65", ["--set", "operator.config.concurrency=65"], "/operator/config/concurrency", /maximum/],
  ["an unknown value", ["--set", "api.replica=3"], "/api", /additional properties 'replica' not allowed/],
  ["an unknown log level", ["--set", "config.logLevel=verbose"], "/config/logLevel", /one of/],
  ["a build cache that is neither local nor registry", ["--set", "builder.cache=s3"], "/builder/cache", /one of 'local', 'registry'/],
  ["an internal TLS port of 0", ["--set", "api.internalTls.port=0"], "/api/internalTls/port", /minimum/],
];
for (const [what, args, path, message] of refusals) {
  test(`the values schema refuses ${what}, naming ${path}`, async (t) => {
    const r = await template("berth", NS, args);
    t.not(r.code, 0);
    t.true(r.stderr.includes("values don't meet the specifications of the schema"), r.stderr);
    t.true(r.stderr.includes(`at '${path}'`), r.stderr);
    t.regex(r.stderr, message);
  });
}

test("sign-in needs the whole OIDC client: the template names the value that is missing", async (t) => {
  const base = [
    "--set",
    "api.oidc.issuerUrl=https://login.example.com",
    "--set",
    "api.oidc.clientId=berth",
    "--set",
    "api.oidc.redirectUrl=https://b.example.com/api/v1/auth/oidc/callback",
  ];
  const r = await template("berth", NS, base);
  t.not(r.code, 0);
  t.regex(r.stderr, /api\.oidc\.clientSecret\.existingSecret is required with api\.oidc\.issuerUrl/);
  const bad = await template("berth", NS, [
    ...base,
    "--set",
    "api.oidc.clientSecret.existingSecret=s",
    "--set",
    "api.oidc.redirectUrl=https://b.example.com/callback",
  ]);
  t.not(bad.code, 0);
  t.true(bad.stderr.includes("at '/api/oidc/redirectUrl'"), bad.stderr);
});

test("the template refuses both minAvailable and maxUnavailable for the API's PodDisruptionBudget", async (t) => {
  const r = await template("berth", NS, ["--set", "api.podDisruptionBudget.minAvailable=1"]);
  t.not(r.code, 0);
  t.regex(r.stderr, /set either maxUnavailable or minAvailable, not both/);
  const ok = await render("berth", NS, [
    "--set",
    "api.podDisruptionBudget.minAvailable=50%",
    "--set",
    "api.podDisruptionBudget.maxUnavailable=null",
  ]);
  t.like(find<k8s.V1PodDisruptionBudget>(ok.objects, "PodDisruptionBudget", "berth-api").spec, { minAvailable: "50%" });
});

// ---- the RBAC, statically ----

type Rule = { apiGroups?: string[]; resources?: string[]; resourceNames?: string[]; verbs: string[] };
/** The rules as the chart renders them for release "berth": a chart-given name (kube/rbac.ts chartName) as its value. */
const plain = (rules: { rule: Rule }[]) =>
  rules.map((r) => ({
    ...r.rule,
    ...(r.rule.resourceNames ? { resourceNames: r.rule.resourceNames.map((n) => n.replace(/^<chart:(.+)>$/, "berth-$1")) } : {}),
  }));

test("the Roles grant exactly what the code declares: no wildcard, no escalation verbs, no built-in roles", async (t) => {
  const { objects } = await render("berth", NS);
  t.deepEqual(find<{ rules: Rule[] }>(objects, "ClusterRole", "berth-operator").rules, plain(rulesOf(OPERATOR_ACCESS, "cluster")));
  t.deepEqual(find<{ rules: Rule[] }>(objects, "Role", "berth-operator-release").rules, plain(rulesOf(OPERATOR_ACCESS, "release")));
  t.deepEqual(find<{ rules: Rule[] }>(objects, "ClusterRole", "berth-api").rules, plain(rulesOf(API_ACCESS, "cluster")));
  t.deepEqual(find<{ rules: Rule[] }>(objects, "Role", "berth-api-release").rules, plain(rulesOf(API_ACCESS, "release")));
  // Unbound: the API binds it in each workspace namespace (test/integration/api-workspace-access.test.ts).
  t.deepEqual(find<{ rules: Rule[] }>(objects, "ClusterRole", "berth-api-workspace").rules, plain(rulesOf(API_ACCESS, "workspace")));
  t.false(objects.some((o) => (o as unknown as k8s.V1RoleBinding).roleRef?.name === "berth-api-workspace"));
  // Unbound too: the API binds it to the operator in each workspace namespace.
  t.deepEqual(
    find<{ rules: Rule[] }>(objects, "ClusterRole", "berth-operator-workspace").rules,
    plain(rulesOf(OPERATOR_ACCESS, "workspace")),
  );
  t.false(objects.some((o) => (o as unknown as k8s.V1RoleBinding).roleRef?.name === "berth-operator-workspace"));
  t.deepEqual(
    objects
      .filter((o) => o.kind === "Role")
      .map((o) => o.metadata.name)
      .sort(),
    ["berth-api-release", "berth-operator-release"],
  );
  for (const o of objects.filter((x) => x.kind === "ClusterRole" || x.kind === "Role") as unknown as {
    metadata: { name: string };
    rules: Rule[];
  }[]) {
    for (const r of o.rules) {
      const values = [...(r.apiGroups ?? []), ...(r.resources ?? []), ...r.verbs];
      t.false(
        values.some((v) => v.includes("*")),
        `${o.metadata.name}: wildcard in ${JSON.stringify(r)}`,
      );
      t.false(
        r.verbs.some((v) => ["escalate", "impersonate", "deletecollection"].includes(v)),
        `${o.metadata.name}: ${JSON.stringify(r)}`,
      );
      // bind: the API's, of its own and the operator's workspace ClusterRoles only
      if (r.verbs.includes("bind"))
        t.deepEqual(
          { role: o.metadata.name, rule: r },
          {
            role: "berth-api",
            rule: {
              apiGroups: ["rbac.authorization.k8s.io"],
              resources: ["clusterroles"],
              resourceNames: ["berth-api-workspace", "berth-operator-workspace"],
              verbs: ["bind"],
            },
          },
        );
    }
  }
  for (const b of objects.filter((x) => x.kind === "ClusterRoleBinding" || x.kind === "RoleBinding") as unknown as k8s.V1RoleBinding[]) {
    t.true(b.roleRef.name.startsWith("berth-"), `${b.metadata?.name} binds ${b.roleRef.name}`);
    t.deepEqual(
      b.subjects?.map((s) => `${s.kind}:${s.namespace}:${s.name}`),
      [`ServiceAccount:${NS}:${b.roleRef.name.startsWith("berth-api") ? "berth-api" : "berth-operator"}`],
    );
  }
  // Without leader election there is no Lease to write: no operator Role.
  const single = await render("berth", NS, ["--set", "operator.config.leaderElection=false"]);
  t.deepEqual(
    single.objects
      .filter((o) => o.kind === "Role" || o.kind === "RoleBinding")
      .map((o) => `${o.kind}/${o.metadata.name}`)
      .sort(),
    ["Role/berth-api-release", "RoleBinding/berth-api-release"],
  );
});

test("the registry's token service: the API's image, configured as its schema reads it, locked down, with only its two keys mounted", async (t) => {
  const { objects } = await render("berth", NS, [...BUILDS, ...REGISTRY_AUTH]);
  const d = find<k8s.V1Deployment>(objects, "Deployment", "berth-registry-auth");
  const pod = d.spec!.template.spec!;
  const c = container(d, "registry-auth");
  t.is(c.image, container(find<k8s.V1Deployment>(objects, "Deployment", "berth-api"), "api").image);
  t.deepEqual(c.command, ["node", "api/registry/main.ts"]);
  const config = TokenServiceConfigSchema.parse(envOf(c, () => ""));
  t.like(config, {
    BERTH_REGISTRY_AUTH_LISTEN: { host: "0.0.0.0", port: 5001 },
    BERTH_BUILD_REPOSITORY_PREFIX: "apps",
    BERTH_REGISTRY_AUTH_SERVICE: "berth-registry",
  });
  t.false(pod.automountServiceAccountToken, "it reads nothing of the Kubernetes API");
  t.like(c.securityContext, { runAsNonRoot: true, readOnlyRootFilesystem: true, allowPrivilegeEscalation: false });
  t.deepEqual(
    pod.volumes?.filter((v) => v.secret).map((v) => [v.secret!.secretName, v.secret!.items?.map((i) => i.key)]),
    [
      ["berth-registry-auth", ["registry.key"]],
      ["berth-registry-signing", ["signing.pem"]],
    ],
  );
  t.like(c.readinessProbe?.httpGet, { path: "/healthz", port: "token" });
  const svc = find<k8s.V1Service>(objects, "Service", "berth-registry-auth");
  t.deepEqual(
    svc.spec?.ports?.map((p) => [p.port, p.targetPort]),
    [[5001, "token"]],
  );
  t.truthy(objects.find((o) => o.kind === "NetworkPolicy" && o.metadata.name === "berth-registry-auth"));
  // off unless asked for, and only with the credentials
  const off = await render("berth", NS, [...BUILDS, "--set", "builder.registryAuth.tokenService.enabled=true"]);
  t.false(off.objects.some((o) => o.metadata.name === "berth-registry-auth"));
});

// ---- the real API server: dry-run of everything, and the RBAC applied for real ----

const k = kube();
const release = uniqueName("berth-t"); // cluster-scoped names (ClusterRoles) are unique per run
/** The chart's ServiceAccount names: the release name contains "berth", so it is the name prefix. */
const saOf = (sa: "operator" | "api") => `system:serviceaccount:${rbacNs}:${release}-${sa}`;
let dryRunNs = "";
let rbacNs = "";
let rbacYaml = "";

test.before(async () => {
  dryRunNs = uniqueName("chart-dry");
  rbacNs = uniqueName("chart-rbac");
  // Both enforce the "restricted" Pod Security Standard; for workload objects the API server
  // answers with warnings, which the dry-run test asserts are absent.
  const pss = { "pod-security.kubernetes.io/enforce": "restricted", "pod-security.kubernetes.io/warn": "restricted" };
  await k.core.createNamespace({ body: { metadata: { name: dryRunNs, labels: pss } } });
  await k.core.createNamespace({ body: { metadata: { name: rbacNs, labels: pss } } });
});

test.after.always(async () => {
  if (rbacYaml) await kubectl(["delete", "--ignore-not-found", "--wait=false", "-f", "-"], rbacYaml);
  await Promise.all([dryRunNs, rbacNs].filter(Boolean).map((ns) => deleteNamespace(k, ns)));
});

for (const [label, values] of [
  ...valueSets,
  ["builds over mutual TLS, the client Secret from values", () => [...BUILDS, ...TLS, ...TLS_CLIENT]],
  ["builds with the registry's pull credentials and its token service", () => [...BUILDS, ...REGISTRY_AUTH]],
] as const) {
  test(`every rendered object (${label}, CRDs included) is accepted by the API server, with no Pod Security warning`, async (t) => {
    const { yaml: out, objects } = await render(uniqueName("berth-d"), dryRunNs, ["--include-crds", ...values()]);
    t.true(objects.some((o) => o.kind === "CustomResourceDefinition"));
    const r = await kubectl(["apply", "--dry-run=server", "-f", "-"], out);
    t.is(r.code, 0, r.stderr);
    t.false(/PodSecurity/.test(r.stderr), r.stderr);
    const accepted = r.stdout.split("\n").filter((l) => l.endsWith("(server dry run)"));
    t.is(accepted.length, objects.length, r.stdout);
  });
}

test("the documented CRD upgrade (server-side apply, --force-conflicts) takes over CRDs that Helm created", async (t) => {
  // Helm creates crds/ on the first install with the field manager "helm" and never updates them.
  // A copy of the Share CRD in a throwaway group stands in for one it created.
  type Crd = {
    metadata: { name: string };
    spec: { group: string; names: Record<string, unknown>; versions: { additionalPrinterColumns: unknown[] }[] };
  };
  const crd = yaml.load(readFileSync(join(chartDir, "crds/berth.dev_shares.yaml"), "utf8")) as Crd;
  const group = `${uniqueName("t")}.chart.berth.dev`;
  crd.metadata.name = `shares.${group}`;
  crd.spec.group = group;
  delete crd.spec.names.shortNames;
  delete crd.spec.names.categories;
  const created = await kubectl(["create", "--field-manager=helm", "-f", "-"], yaml.dump(crd));
  t.is(created.code, 0, created.stderr);
  try {
    // The next chart version changes a field that Helm owns.
    const next = structuredClone(crd);
    next.spec.versions[0]!.additionalPrinterColumns.push({ name: "Age", type: "date", jsonPath: ".metadata.creationTimestamp" });
    const plain = await kubectl(["apply", "--server-side", "-f", "-"], yaml.dump(next));
    t.not(plain.code, 0, "a plain server-side apply conflicts with Helm's ownership");
    t.regex(plain.stderr, /conflict with "helm"/);
    const forced = await kubectl(["apply", "--server-side", "--force-conflicts", "-f", "-"], yaml.dump(next));
    t.is(forced.code, 0, forced.stderr);
  } finally {
    await kubectl(["delete", "customresourcedefinition", crd.metadata.name, "--wait=false"]);
  }
  // The documented command itself, against the installed CRDs.
  const real = await kubectl(["apply", "--server-side", "--force-conflicts", "--dry-run=server", "-f", join(chartDir, "crds")]);
  t.is(real.code, 0, real.stderr);
  t.is(real.stdout.split("\n").filter((l) => l.endsWith("(server dry run)")).length, KINDS.length, real.stdout);
});

/** `kubectl auth can-i` as a ServiceAccount of the chart. */
async function can(
  sa: "operator" | "api",
  verb: string,
  resource: string,
  opts: { ns?: string; subresource?: string } = {},
): Promise<boolean> {
  const args = ["auth", "can-i", verb, resource, `--as=${saOf(sa)}`];
  if (opts.ns === "*") args.push("--all-namespaces");
  else args.push("-n", opts.ns ?? "team-a");
  if (opts.subresource) args.push(`--subresource=${opts.subresource}`);
  const r = await kubectl(args);
  if (r.code > 1) throw new Error(`kubectl auth can-i failed: ${r.stderr}`);
  return r.code === 0;
}

let rbacApplied: Promise<void> | undefined;
/** Renders with a unique release name and applies the ServiceAccounts and RBAC for real, once. */
function applyRbac(): Promise<void> {
  rbacApplied ??= (async () => {
    const { objects } = await render(release, rbacNs);
    const rbac = objects.filter((o) => ["ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding"].includes(o.kind!));
    rbacYaml = rbac.map((o) => yaml.dump(o)).join("---\n");
    const r = await kubectl(["apply", "-f", "-"], rbacYaml);
    if (r.code !== 0) throw new Error(`kubectl apply of the RBAC failed:\n${r.stderr}`);
    // The authorizer's caches follow the new bindings within moments.
    await eventually("the operator's ClusterRoleBinding to take effect", () => can("operator", "watch", "deployments.apps"), 15_000);
    await eventually("the API's ClusterRoleBinding to take effect", () => can("api", "create", "namespaces"), 15_000);
    await eventually(
      "the release-namespace RoleBinding to take effect",
      () => can("operator", "create", "leases.coordination.k8s.io", { ns: rbacNs }),
      15_000,
    );
  })();
  return rbacApplied;
}

type Check = [sa: "operator" | "api", verb: string, resource: string, opts?: { ns?: string; subresource?: string }];
const allowed: Check[] = [
  // Reads of the operator's children everywhere (its informers); their writes only where the API
  // binds its workspace ClusterRole (test/integration/api-workspace-access.test.ts)
  ["operator", "get", "deployments.apps"],
  ["operator", "list", "jobs.batch", { ns: "*" }],
  ["operator", "watch", "certificates.cert-manager.io", { ns: "*" }],
  ["operator", "watch", "deployments.apps", { ns: "*" }],
  ["operator", "list", "apps.berth.dev", { ns: "*" }],
  ["operator", "patch", "apps.berth.dev", { subresource: "status" }],
  ["operator", "patch", "apps.berth.dev"], // its finalizer (metadata.finalizers)
  ["operator", "update", "apps.berth.dev", { subresource: "finalizers" }],
  ["operator", "patch", "releases.berth.dev", { subresource: "status" }],
  ["operator", "get", "secrets/berth-buildkit-client", { ns: "<release>" }], // its original, by name, in the release namespace
  ["operator", "watch", "namespaces"], // the workspace namespaces it follows (their Secrets, where the API binds its workspace role)
  ["operator", "create", "events"],
  ["operator", "create", "leases.coordination.k8s.io", { ns: "<release>" }],
  ["operator", "update", "leases.coordination.k8s.io/berth-operator", { ns: "<release>" }],
  ["operator", "get", "leases.coordination.k8s.io/berth-operator", { ns: "<release>" }],
  ["api", "create", "namespaces"],
  ["api", "patch", "namespaces"],
  ["api", "create", "apps.berth.dev"],
  ["api", "delete", "apps.berth.dev"],
  ["api", "create", "releases.berth.dev"], // deployments: webhooks, manual deploys, rollbacks
  ["api", "watch", "apps.berth.dev", { ns: "*" }],
  ["api", "create", "tokenreviews.authentication.k8s.io"],
  ["api", "create", "rolebindings.rbac.authorization.k8s.io"], // its workspace ClusterRole, bound in each workspace namespace
  ["api", "patch", "rolebindings.rbac.authorization.k8s.io/berth-api"],
  ["api", "get", "domains.berth.dev"], // custom domains: created, read, annotated (verify now) and deleted
  ["api", "list", "domains.berth.dev", { ns: "*" }], // one service per domain cluster-wide: other workspaces' claims
  ["operator", "watch", "domains.berth.dev", { ns: "*" }],
  ["operator", "patch", "domains.berth.dev", { subresource: "status" }],
  ["operator", "watch", "ingresses.networking.k8s.io", { ns: "*" }], // every Ingress: a domain is not routed onto a host another serves
  ["api", "list", "ingresses.networking.k8s.io", { ns: "*" }], // a domain another Ingress serves is refused (domain_served)
];
const denied: Check[] = [
  ["operator", "delete", "namespaces"],
  ["operator", "create", "namespaces"],
  ["operator", "create", "clusterroles.rbac.authorization.k8s.io"],
  ["operator", "create", "rolebindings.rbac.authorization.k8s.io"],
  ["operator", "*", "*"],
  ["operator", "*", "deployments.apps"],
  ["operator", "update", "apps.berth.dev"], // the spec belongs to the user and the API: only merge patches of its finalizer
  ["operator", "delete", "apps.berth.dev"],
  ["operator", "create", "apps.berth.dev"],
  ["operator", "update", "releases.berth.dev"], // a release's spec is the API's record: the operator writes status only
  ["operator", "get", "domains.berth.dev"],
  ["operator", "create", "pods"],
  ["operator", "create", "pods", { subresource: "exec" }],
  ["operator", "get", "configmaps"],
  ["operator", "list", "nodes"],
  // Secrets (the <app>-governance ones, the env ones it watches, Domains' certificates, the build
  // client certificate's copies): only where the API binds its workspace ClusterRole
  // (test/integration/api-workspace-access.test.ts)
  ["operator", "create", "secrets"],
  ["operator", "get", "secrets"],
  ["operator", "patch", "secrets"],
  ["operator", "list", "secrets", { ns: "*" }],
  ["operator", "deletecollection", "secrets"],
  ["operator", "update", "secrets"], // Secrets are applied (patch), never replaced
  ["operator", "patch", "namespaces"],
  ["operator", "patch", "deployments.apps"],
  ["operator", "delete", "deployments.apps"],
  ["operator", "create", "services"],
  ["operator", "patch", "ingresses.networking.k8s.io"],
  ["operator", "patch", "horizontalpodautoscalers.autoscaling"],
  ["operator", "create", "cronjobs.batch"],
  ["operator", "create", "jobs.batch"],
  ["operator", "get", "pods", { subresource: "log" }],
  ["operator", "create", "certificates.cert-manager.io"],
  ["operator", "impersonate", "serviceaccounts"],
  ["operator", "create", "tokenreviews.authentication.k8s.io"],
  ["operator", "update", "leases.coordination.k8s.io/kube-controller-manager", { ns: "<release>" }],
  ["operator", "delete", "leases.coordination.k8s.io/berth-operator", { ns: "<release>" }],
  ["operator", "update", "leases.coordination.k8s.io/berth-operator", { ns: "kube-system" }],
  ["api", "get", "deployments.apps"],
  ["api", "patch", "deployments.apps"],
  ["api", "create", "deployments.apps"],
  // Secrets (a service's variables, its webhook secret), Job pods and their logs: only where the API
  // has bound its workspace ClusterRole (test/integration/api-workspace-access.test.ts)
  ["api", "get", "secrets"],
  ["api", "create", "secrets"],
  ["api", "patch", "secrets"],
  ["api", "list", "pods"],
  ["api", "get", "pods", { subresource: "log" }],
  ["api", "patch", "rolebindings.rbac.authorization.k8s.io/admin"],
  ["api", "bind", "clusterroles.rbac.authorization.k8s.io/cluster-admin"],
  ["api", "list", "secrets", { ns: "*" }], // the variables are read one Secret at a time, never listed or watched
  ["api", "watch", "secrets", { ns: "*" }],
  ["api", "delete", "secrets"], // they go with their App (owner reference)
  ["api", "delete", "namespaces"],
  ["api", "list", "namespaces"],
  ["api", "patch", "domains.berth.dev", { subresource: "status" }], // a Domain's status is the operator's
  ["api", "create", "certificates.cert-manager.io"],
  ["api", "create", "ingresses.networking.k8s.io"], // of Ingresses the API only lists
  ["api", "get", "ingresses.networking.k8s.io"],
  ["api", "watch", "ingresses.networking.k8s.io", { ns: "*" }],
  ["api", "delete", "ingresses.networking.k8s.io"],
  ["api", "patch", "apps.berth.dev", { subresource: "status" }],
  ["api", "create", "leases.coordination.k8s.io", { ns: "<release>" }],
  ["api", "create", "pods"],
  ["api", "create", "clusterrolebindings.rbac.authorization.k8s.io"],
  ["api", "*", "*"],
];

const describe = ([sa, verb, resource, opts]: Check) =>
  `${sa} ${verb} ${resource}${opts?.subresource ? `/${opts.subresource}` : ""}${opts?.ns === "*" ? " in all namespaces" : opts?.ns === "<release>" ? " in the release namespace" : opts?.ns ? ` in ${opts.ns}` : ""}`;
const nsOf = (opts?: { ns?: string; subresource?: string }) =>
  opts ? { ...opts, ...(opts.ns === "<release>" ? { ns: rbacNs } : {}) } : {};

for (const check of allowed) {
  test(`RBAC (applied): the ${describe(check)} is allowed`, async (t) => {
    await applyRbac();
    t.true(await can(check[0], check[1], check[2], nsOf(check[3])));
  });
}
for (const check of denied) {
  test(`RBAC (applied): the ${describe(check)} is denied`, async (t) => {
    await applyRbac();
    t.false(await can(check[0], check[1], check[2], nsOf(check[3])));
  });
}

test("RBAC (applied): neither ServiceAccount holds a wildcard rule anywhere", async (t) => {
  await applyRbac();
  for (const sa of ["operator", "api"] as const) {
    for (const ns of ["team-a", rbacNs]) {
      const r = await kubectl(["auth", "can-i", "--list", "-n", ns, `--as=${saOf(sa)}`]);
      t.is(r.code, 0, r.stderr);
      // Rows: "Resources  Non-Resource URLs  Resource Names  Verbs"; non-resource rows start blank.
      const rows = r.stdout
        .split("\n")
        .slice(1)
        .filter((l) => l.trim() && !/^\s/.test(l));
      t.true(rows.length > 0);
      for (const row of rows) {
        const resource = row.split(/\s+/)[0]!;
        const verbs = /\[([^\]]*)\]\s*$/.exec(row)?.[1] ?? "";
        t.false(resource.includes("*") || verbs.includes("*"), `${sa} in ${ns}: ${row}`);
      }
    }
  }
});
