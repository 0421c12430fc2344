// Desired state of an App's children: table tests of the pure builders.
import test from "ava";
import type * as k8s from "@kubernetes/client-node";
import { AppSpec, type AppSpecInput } from "../../../crds/schemas.ts";
import { ENV_HASH_ANNOTATION, OPERATOR_ENV_NAMES, governanceDisabled, governanceGeneration, reservedEnvName } from "../../../crds/app.ts";
import { buildChildren, buildGovernanceSecret, childKinds, type BuildConfig } from "../../../operator/app/builders.ts";
import { contains, HASH_ANNOTATION, upToDate } from "../../../operator/kit/apply.ts";
import { cpuQuantity, envHash, memoryQuantity, STARTUP_SECONDS } from "../../../operator/kit/pod.ts";
import { desiredReplicas } from "../../../operator/kit/rollout.ts";
import type { KubeObject } from "../../../kube/client.ts";

const ref = { name: "shop", namespace: "ws1", uid: "u-1" };
const cfg = { baseDomain: "apps.example.com" };
const spec = (s: Partial<AppSpecInput> = {}) => AppSpec.parse({ name: "Shop", slug: "shop", image: "registry.example.com/shop:1", ...s });
const kinds = (s: Partial<AppSpecInput>) => buildChildren(ref, spec(s), {}, cfg).map((o) => o.kind);

const table: [string, Partial<AppSpecInput>, string[]][] = [
  ["web", { type: "web" }, ["Deployment", "HorizontalPodAutoscaler", "Service", "Ingress"]],
  ["api", { type: "api" }, ["Deployment", "HorizontalPodAutoscaler", "Service", "Ingress"]],
  ["worker", { type: "worker" }, ["Deployment", "HorizontalPodAutoscaler"]],
  ["cron", { type: "cron", schedule: "*/5 * * * *" }, ["CronJob"]],
  ["suspended web: no routing, no autoscaler", { type: "web", suspended: true }, ["Deployment"]],
  ["suspended cron", { type: "cron", schedule: "@daily", suspended: true }, ["CronJob"]],
  ["no image yet", { image: undefined, gitRepoUrl: "https://git.example.com/a.git" }, []],
];
for (const [what, s, want] of table) {
  test(`children of ${what}`, (t) => t.deepEqual(kinds(s), want));
}

test("every child is owned by the App as its controller and labelled", (t) => {
  for (const c of buildChildren(ref, spec(), {}, cfg)) {
    t.deepEqual(c.metadata.ownerReferences, [
      { apiVersion: "berth.dev/v1alpha1", kind: "App", name: "shop", uid: "u-1", controller: true, blockOwnerDeletion: true },
    ]);
    t.is(c.metadata.name, "shop");
    t.is(c.metadata.labels?.["berth.dev/app"], "shop");
    t.regex(c.metadata.annotations?.[HASH_ANNOTATION] ?? "", /^[a-f0-9]{16}$/);
  }
});

test("the Deployment carries limits, requests and secure pod defaults", (t) => {
  const d = buildChildren(ref, spec({ cpuLimitMillicores: 1500, memoryLimitMi: 2048, port: 3000 }), {}, cfg)[0] as k8s.V1Deployment;
  const pod = d.spec!.template.spec!;
  const c = pod.containers[0]!;
  t.deepEqual(c.resources?.limits, { cpu: "1500m", memory: "2Gi" });
  t.deepEqual(c.resources?.requests, c.resources?.limits);
  t.deepEqual(c.ports, [{ name: "http", containerPort: 3000, protocol: "TCP" }]);
  t.true(pod.securityContext?.runAsNonRoot);
  t.false(c.securityContext?.allowPrivilegeEscalation);
  t.true(c.securityContext?.readOnlyRootFilesystem);
  t.deepEqual(c.securityContext?.capabilities?.drop, ["ALL"]);
  t.false(pod.automountServiceAccountToken);
});

test("a served container is probed on its port: every second until it opens (startup), then every 10 s (readiness); a worker is not probed", (t) => {
  const container = (s: Partial<AppSpecInput>) =>
    (buildChildren(ref, spec(s), {}, cfg)[0] as k8s.V1Deployment).spec!.template.spec!.containers[0]!;
  for (const type of ["web", "api"] as const) {
    const c = container({ type });
    t.deepEqual(c.startupProbe, { tcpSocket: { port: "http" }, periodSeconds: 1, failureThreshold: STARTUP_SECONDS }, type);
    t.deepEqual(c.readinessProbe, { tcpSocket: { port: "http" }, periodSeconds: 10 }, type);
  }
  const d = buildChildren(ref, spec(), {}, cfg)[0] as k8s.V1Deployment;
  t.is(d.spec?.progressDeadlineSeconds, STARTUP_SECONDS, "a server gets as long to open its port as the rollout has to progress");
  const w = container({ type: "worker" });
  t.is(w.startupProbe, undefined);
  t.is(w.readinessProbe, undefined);
});

test("the Ingress routes <slug>.<baseDomain> to the Service", (t) => {
  const ing = buildChildren(ref, spec({ slug: "storefront" }), {}, { ...cfg, ingressClassName: "nginx" }).find(
    (o) => o.kind === "Ingress",
  ) as k8s.V1Ingress;
  t.is(ing.spec?.ingressClassName, "nginx");
  t.is(ing.spec?.rules?.[0]?.host, "storefront.apps.example.com");
  t.is(ing.spec?.rules?.[0]?.http?.paths[0]?.backend.service?.name, "shop");
});

test("the HPA takes min, max and CPU target; max defaults to min and the target to 80%", (t) => {
  const hpa = (s: Partial<AppSpecInput>) =>
    buildChildren(ref, spec(s), {}, cfg).find((o) => o.kind === "HorizontalPodAutoscaler") as k8s.V2HorizontalPodAutoscaler;
  t.like(hpa({ minReplicas: 2, maxReplicas: 7, cpuTargetUtilization: 65 }).spec, { minReplicas: 2, maxReplicas: 7 });
  t.is(hpa({ cpuTargetUtilization: 65 }).spec?.metrics?.[0]?.resource?.target.averageUtilization, 65);
  t.like(hpa({ minReplicas: 3 }).spec, { minReplicas: 3, maxReplicas: 3 });
  t.is(hpa({}).spec?.metrics?.[0]?.resource?.target.averageUtilization, 80);
});

const replicaTable: [string, Partial<AppSpecInput>, number | undefined, number][] = [
  ["new app starts at min", { minReplicas: 2, maxReplicas: 5 }, undefined, 2],
  ["keeps the autoscaler's choice", { minReplicas: 2, maxReplicas: 5 }, 4, 4],
  ["raised min lifts it", { minReplicas: 3, maxReplicas: 5 }, 2, 3],
  ["lowered max caps it", { minReplicas: 1, maxReplicas: 2 }, 4, 2],
  ["suspended is zero", { minReplicas: 2, suspended: true }, 2, 0],
];
for (const [what, s, current, want] of replicaTable) {
  test(`replicas: ${what}`, (t) => t.is(desiredReplicas(spec(s), { deploymentReplicas: current }), want));
}

test("cron apps get a CronJob with the schedule, suspended with the App", (t) => {
  const cj = buildChildren(ref, spec({ type: "cron", schedule: "0 3 * * *", suspended: true }), {}, cfg)[0] as k8s.V1CronJob;
  t.is(cj.spec?.schedule, "0 3 * * *");
  t.true(cj.spec?.suspend);
  t.is(cj.spec?.concurrencyPolicy, "Forbid");
  t.is(cj.spec?.jobTemplate.spec?.template.spec?.restartPolicy, "Never");
});

test("quantities are in the API server's canonical form", (t) => {
  t.is(cpuQuantity(50), "50m");
  t.is(cpuQuantity(1000), "1");
  t.is(cpuQuantity(32000), "32");
  t.is(cpuQuantity(1500), "1500m");
  t.is(memoryQuantity(64), "64Mi");
  t.is(memoryQuantity(1024), "1Gi");
  t.is(memoryQuantity(1536), "1536Mi");
});

test("builders are deterministic: same input, same hash", (t) => {
  t.deepEqual(buildChildren(ref, spec(), {}, cfg), buildChildren(ref, spec(), {}, cfg));
  const a = buildChildren(ref, spec(), {}, cfg)[0]!.metadata.annotations?.[HASH_ANNOTATION];
  const b = buildChildren(ref, spec({ image: "registry.example.com/shop:2" }), {}, cfg)[0]!.metadata.annotations?.[HASH_ANNOTATION];
  t.not(a, b);
});

test("upToDate: live objects with server defaults match; hand edits and new hashes do not", (t) => {
  const [d] = buildChildren(ref, spec(), {}, cfg) as [k8s.V1Deployment];
  const live = structuredClone(d) as k8s.V1Deployment & { metadata: k8s.V1ObjectMeta };
  delete (live as { apiVersion?: string }).apiVersion; // list items carry none
  live.metadata.uid = "x";
  live.metadata.resourceVersion = "9";
  live.spec!.template.spec!.dnsPolicy = "ClusterFirst";
  live.status = { replicas: 1 };
  t.true(upToDate(d as never, live));
  const edited = structuredClone(live);
  edited.spec!.template.spec!.containers[0]!.image = "evil:1";
  t.false(upToDate(d as never, edited));
  const rehashed = structuredClone(live);
  rehashed.metadata.annotations![HASH_ANNOTATION] = "0000000000000000";
  t.false(upToDate(d as never, rehashed));
  t.false(upToDate(d as never, undefined));
});

test("contains compares arrays by position and length", (t) => {
  t.true(contains({ a: [1, { b: 2 }] }, { a: [1, { b: 2, c: 3 }], d: 4 }));
  t.false(contains({ a: [1] }, { a: [1, 2] }));
  t.false(contains({ a: { b: 1 } }, { a: [1] }));
});

test("with governance, containers get the Secret as envFrom and the template carries its generation", (t) => {
  const gov = { secretName: "shop-governance", generation: 3 };
  const [d] = buildChildren(ref, spec(), {}, cfg, gov) as [k8s.V1Deployment];
  t.deepEqual(d.spec?.template.spec?.containers[0]?.envFrom, [{ secretRef: { name: "shop-governance" } }]);
  t.is(d.spec?.template.metadata?.annotations?.["berth.dev/governance-generation"], "3");
  const [cj] = buildChildren(ref, spec({ type: "cron", schedule: "@daily" }), {}, cfg, gov) as [k8s.V1CronJob];
  t.deepEqual(cj.spec?.jobTemplate.spec?.template.spec?.containers[0]?.envFrom, [{ secretRef: { name: "shop-governance" } }]);
  const [plain] = buildChildren(ref, spec(), {}, cfg) as [k8s.V1Deployment];
  t.is(plain.spec?.template.spec?.containers[0]?.envFrom, undefined);
  const next = buildChildren(ref, spec(), {}, cfg, { ...gov, generation: 4 })[0]!;
  t.not(next.metadata.annotations?.[HASH_ANNOTATION], d.metadata?.annotations?.[HASH_ANNOTATION], "a new key generation rolls the pods");
});

test("the governance Secret holds both variables, owned by the App", (t) => {
  const s = buildGovernanceSecret(ref, { connectionString: "govdb://gov_sk_x@api:8080/gov_abc", project: "shop", generation: 2 });
  t.is(s.metadata?.name, "shop-governance");
  t.is(s.metadata?.annotations?.["berth.dev/governance-generation"], "2");
  t.is(Buffer.from(s.data!.GOVDB_CONNECTION!, "base64").toString(), "govdb://gov_sk_x@api:8080/gov_abc");
  t.is(Buffer.from(s.data!.GOVERNANCE_PROJECT!, "base64").toString(), "shop");
  t.is(s.metadata?.ownerReferences?.[0]?.uid, "u-1");
});

test('governance annotations: generation defaults to 1, disabled only when "true"', (t) => {
  t.is(governanceGeneration(undefined), 1);
  t.is(governanceGeneration({ "berth.dev/governance-generation": "7" }), 7);
  t.is(governanceGeneration({ "berth.dev/governance-generation": "x" }), 1);
  t.false(governanceDisabled({}));
  t.true(governanceDisabled({ "berth.dev/governance-disabled": "true" }));
});

test("pods go where the configuration places them: nodeSelector and tolerations on Deployments and CronJobs, none by default", (t) => {
  const placed = {
    ...cfg,
    nodeSelector: { "berth.dev/node": "real" },
    tolerations: [{ key: "berth.dev/real-node", operator: "Exists", effect: "NoSchedule" }],
  };
  const d = buildChildren(ref, spec(), {}, placed)[0] as k8s.V1Deployment;
  t.deepEqual(d.spec!.template.spec!.nodeSelector, { "berth.dev/node": "real" });
  t.deepEqual(d.spec!.template.spec!.tolerations, placed.tolerations);
  const cj = buildChildren(ref, spec({ type: "cron", schedule: "@daily" }), {}, placed)[0] as k8s.V1CronJob;
  t.deepEqual(cj.spec.jobTemplate.spec!.template.spec!.nodeSelector, { "berth.dev/node": "real" });
  const plain = buildChildren(ref, spec(), {}, cfg)[0] as k8s.V1Deployment;
  t.false("nodeSelector" in plain.spec!.template.spec! || "tolerations" in plain.spec!.template.spec!);
});

test("the service's variables: envFrom of <app>-env (optional) before the governance Secret, so that the governance variables win; the hash of its data on the template", (t) => {
  const gov = { secretName: "shop-governance", generation: 1 };
  const env = { secretName: "shop-env", hash: envHash({ GREETING: Buffer.from("hej").toString("base64") }) };
  for (const s of [spec(), spec({ type: "cron", schedule: "@daily" })]) {
    const [w] = buildChildren(ref, s, {}, cfg, gov, env) as [k8s.V1Deployment | k8s.V1CronJob];
    const template = w.kind === "CronJob" ? (w as k8s.V1CronJob).spec.jobTemplate.spec!.template : (w as k8s.V1Deployment).spec!.template;
    const c = template.spec!.containers[0]!;
    // Kubernetes: env wins over envFrom, and among envFrom sources the later one wins.
    t.deepEqual(c.envFrom, [{ secretRef: { name: "shop-env", optional: true } }, { secretRef: { name: "shop-governance" } }]);
    t.deepEqual(c.env, [{ name: "PORT", value: "8080" }]);
    t.is(template.metadata?.annotations?.[ENV_HASH_ANNOTATION], env.hash);
    t.is(template.metadata?.annotations?.["berth.dev/governance-generation"], "1");
  }
  const [alone] = buildChildren(ref, spec(), {}, cfg, undefined, env) as [k8s.V1Deployment];
  t.deepEqual(alone.spec!.template.spec!.containers[0]!.envFrom, [{ secretRef: { name: "shop-env", optional: true } }]);
});

test("a change of a variable changes the pod template (a rollout); the same data, in any order, does not; no env Secret changes nothing", (t) => {
  const template = (env?: { secretName: string; hash: string }) =>
    (buildChildren(ref, spec(), {}, cfg, undefined, env)[0] as k8s.V1Deployment).spec!.template;
  const b64 = (s: string) => Buffer.from(s).toString("base64");
  const a = envHash({ A: b64("1"), B: b64("2") });
  t.regex(a, /^[a-f0-9]{16}$/);
  t.is(envHash({ B: b64("2"), A: b64("1") }), a, "key order does not matter");
  t.not(envHash({ A: b64("1"), B: b64("3") }), a);
  t.not(envHash({ A: b64("1") }), a);
  t.is(envHash(undefined), envHash({}));
  t.notDeepEqual(template({ secretName: "shop-env", hash: a }), template({ secretName: "shop-env", hash: envHash({ A: b64("1") }) }));
  t.deepEqual(
    template({ secretName: "shop-env", hash: a }),
    template({ secretName: "shop-env", hash: envHash({ B: b64("2"), A: b64("1") }) }),
  );
  const plain = template();
  t.is(plain.metadata?.annotations, undefined, "an App without variables keeps the template it had: upgrading the operator rolls nothing");
  t.is(plain.spec!.containers[0]!.envFrom, undefined);
});

test("every variable the operator sets is reserved: the API refuses to set it", (t) => {
  const gov = buildGovernanceSecret(ref, { connectionString: "govdb://k@h/d", project: "shop", generation: 1 });
  const [d] = buildChildren(ref, spec(), {}, cfg) as [k8s.V1Deployment];
  const set = [...Object.keys(gov.data!), ...d.spec!.template.spec!.containers[0]!.env!.map((e) => e.name)];
  for (const name of set) {
    t.true(OPERATOR_ENV_NAMES.includes(name), name);
    t.truthy(reservedEnvName(name), name);
  }
  t.truthy(reservedEnvName("BERTH_GOVERNANCE"), "the toolkit's switch");
  t.is(reservedEnvName("GREETING"), undefined);
});

// ---- private Apps at the edge (docs/shares.md) ----------------------------------------------

const traefik: BuildConfig = {
  ...cfg,
  edge: { controller: "traefik", forwardAuthUrl: "http://berth-api.berth-system.svc/api/v1/forward-auth/" },
};
const nginx: BuildConfig = {
  ...cfg,
  ingressClassName: "nginx",
  edge: {
    controller: "nginx",
    forwardAuthUrl: "http://berth-api.berth-system.svc/api/v1/forward-auth",
    signInUrl: "https://api.example.com/api/v1/auth/oidc/login",
  },
};

test("a private App behind Traefik gets a ForwardAuth Middleware for it, named by its Ingress", (t) => {
  const children = buildChildren(ref, spec({ visibility: "private" }), {}, traefik);
  t.deepEqual(
    children.map((c) => c.kind),
    ["Deployment", "HorizontalPodAutoscaler", "Middleware", "Service", "Ingress"],
  );
  const mw = children.find((c) => c.kind === "Middleware") as KubeObject & { spec: { forwardAuth: Record<string, unknown> } };
  t.is(mw.apiVersion, "traefik.io/v1alpha1");
  t.like(mw.metadata, { name: "shop", namespace: "ws1" });
  t.is(mw.metadata.ownerReferences?.[0]?.uid, ref.uid);
  t.deepEqual(mw.spec.forwardAuth, {
    address: "http://berth-api.berth-system.svc/api/v1/forward-auth/ws1/shop",
    trustForwardHeader: false,
    authRequestHeaders: ["Cookie"],
    authResponseHeaders: ["X-Berth-Share", "X-Berth-User"],
    addAuthCookiesToResponse: ["berth_share", "__Host-berth_share"],
    maxResponseBodySize: 65536,
  });
  const ing = children.find((c) => c.kind === "Ingress")!;
  t.is(ing.metadata.annotations?.["traefik.ingress.kubernetes.io/router.middlewares"], "ws1-shop@kubernetescrd");
});

test("a public App passes without any check, but clients' own X-Berth-* headers are removed (Traefik)", (t) => {
  const children = buildChildren(ref, spec({ visibility: "public" }), {}, traefik);
  t.deepEqual(
    children.map((c) => c.kind),
    ["Deployment", "HorizontalPodAutoscaler", "Middleware", "Service", "Ingress"],
  );
  const mw = children.find((c) => c.kind === "Middleware") as KubeObject & { spec: Record<string, unknown> };
  t.deepEqual(mw.spec, { headers: { customRequestHeaders: { "X-Berth-Share": "", "X-Berth-User": "" } } });
  const annotations = children.find((o) => o.kind === "Ingress")!.metadata.annotations ?? {};
  t.is(annotations["traefik.ingress.kubernetes.io/router.middlewares"], "ws1-shop@kubernetescrd");
  t.deepEqual(
    Object.keys(annotations).filter((k) => k.includes("auth")),
    [],
  );
  const viaNginx = buildChildren(ref, spec({ visibility: "public" }), {}, nginx);
  t.false(viaNginx.some((o) => o.kind === "Middleware"));
  t.deepEqual(
    Object.keys(viaNginx.find((o) => o.kind === "Ingress")!.metadata.annotations ?? {}).filter((k) => k.includes("auth")),
    [],
  );
});

test("a private App behind ingress-nginx gets auth-url, auth-signin and the response headers", (t) => {
  const children = buildChildren(ref, spec({ visibility: "private" }), {}, nginx);
  t.false(children.some((o) => o.kind === "Middleware"));
  t.like(children.find((o) => o.kind === "Ingress")!.metadata.annotations, {
    "nginx.ingress.kubernetes.io/auth-url": "http://berth-api.berth-system.svc/api/v1/forward-auth/ws1/shop",
    "nginx.ingress.kubernetes.io/auth-signin": "https://api.example.com/api/v1/auth/oidc/login",
    "nginx.ingress.kubernetes.io/auth-signin-redirect-param": "rd",
    "nginx.ingress.kubernetes.io/auth-response-headers": "X-Berth-Share,X-Berth-User",
  });
});

test("the Middleware is a managed kind only where Traefik guards private Apps", (t) => {
  t.true(childKinds(traefik).includes("Middleware"));
  t.false(childKinds(nginx).includes("Middleware"));
  t.false(childKinds(cfg).includes("Middleware"));
});
