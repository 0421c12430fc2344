// Desired state of an App's children. Pure: no I/O, no clock, no randomness; table-tested.
// web, api → Deployment + Service + Ingress + HPA; worker → Deployment + HPA; cron → CronJob.
import { createHash } from "node:crypto";
import type * as k8s from "@kubernetes/client-node";
import { API_VERSION, APP_LABEL, type AppSpec } from "../../crds/schemas.ts";
import {
  ANNOTATIONS,
  DEFAULT_CPU_TARGET,
  ENV_HASH_ANNOTATION,
  FORWARD_AUTH,
  MANAGED_BY,
  appHost,
  forwardAuthAddress,
  isServed,
  type BuildArea,
} from "../../crds/app.ts";
import type { KubeObject } from "../../kube/client.ts";

export interface BuildConfig {
  baseDomain: string;
  ingressClassName?: string | undefined;
  /** Secret name holding a wildcard certificate for *.<baseDomain>; no TLS block when unset. */
  defaultTlsSecret?: string | undefined;
  /** Where App pods run: a nodeSelector and tolerations for every pod (configuration, never the App). */
  nodeSelector?: Record<string, string> | undefined;
  tolerations?: k8s.V1Toleration[] | undefined;
  /**
   * How private Apps are guarded at the edge (docs/shares.md): the ingress asks the API's
   * forward-auth endpoint before each request. `traefik`: a ForwardAuth Middleware per App,
   * referenced by the Ingress; `nginx`: ingress-nginx's auth-url annotations.
   */
  edge?: EdgeConfig | undefined;
  /** Where builds push: another namespace's builds are refused as an App's image (crds/app.ts "Built images"). */
  buildArea?: BuildArea | undefined;
  /** Slugs no App may take, and the platform's own hosts (crds/app.ts "Hosts"). */
  reservedSlugs?: readonly string[] | undefined;
  platformHosts?: readonly string[] | undefined;
}

export interface EdgeConfig {
  controller: "traefik" | "nginx";
  /** The API's forward-auth base URL as the ingress controller reaches it: <api>/api/v1/forward-auth. */
  forwardAuthUrl: string;
  /** nginx only: where a viewer who must sign in is sent (<API public URL>/api/v1/auth/oidc/login). */
  signInUrl?: string | undefined;
}

/** traefik.io/v1alpha1 Middleware: Traefik's own CRD, in the App's namespace. */
export const MIDDLEWARE_API_VERSION = "traefik.io/v1alpha1";
export const TRAEFIK_MIDDLEWARES_ANNOTATION = "traefik.ingress.kubernetes.io/router.middlewares";

export interface AppRef {
  name: string;
  namespace: string;
  uid: string;
}

/** What the builders need to know about the world: only the current replica count (owned by the HPA). */
export interface Observed {
  deploymentReplicas?: number | undefined;
}

/** The App's governance Secret, when provisioned: its name and the key generation it holds. */
export interface GovernanceRef {
  secretName: string;
  generation: number;
}

/** The App's own variables (`<app>-env`, written by the API), when that Secret exists: its name and a hash of its data. */
export interface EnvRef {
  secretName: string;
  hash: string;
}

/** The hash of an env Secret's data stamped on the pod template: a change of any variable rolls the pods. */
export function envHash(data: Readonly<Record<string, string>> | undefined): string {
  return createHash("sha256")
    .update(stableJson(data ?? {}))
    .digest("hex")
    .slice(0, 16);
}

export function governanceSecretName(app: string): string {
  return `${app}-governance`;
}

/** `<app>-governance`: GOVDB_CONNECTION and GOVERNANCE_PROJECT, mounted into every container. */
export function buildGovernanceSecret(app: AppRef, v: { connectionString: string; project: string; generation: number }): k8s.V1Secret {
  const b64 = (s: string) => Buffer.from(s, "utf8").toString("base64");
  return {
    apiVersion: "v1",
    kind: "Secret",
    type: "Opaque",
    metadata: {
      ...meta(app, { annotations: { [ANNOTATIONS.governanceGeneration]: String(v.generation) } }),
      name: governanceSecretName(app.name),
    },
    data: { GOVDB_CONNECTION: b64(v.connectionString), GOVERNANCE_PROJECT: b64(v.project) },
  };
}

export { MANAGED_BY };
export const HASH_ANNOTATION = "berth.dev/applied-hash";
export const CONTAINER = "app";

export type ChildKind = "Deployment" | "Service" | "Ingress" | "HorizontalPodAutoscaler" | "CronJob" | "Middleware";

export const CHILD_KINDS: Record<ChildKind, { apiVersion: string; plural: string }> = {
  Deployment: { apiVersion: "apps/v1", plural: "deployments" },
  Service: { apiVersion: "v1", plural: "services" },
  Ingress: { apiVersion: "networking.k8s.io/v1", plural: "ingresses" },
  HorizontalPodAutoscaler: { apiVersion: "autoscaling/v2", plural: "horizontalpodautoscalers" },
  CronJob: { apiVersion: "batch/v1", plural: "cronjobs" },
  Middleware: { apiVersion: MIDDLEWARE_API_VERSION, plural: "middlewares" },
};

/** The child kinds the operator manages with this configuration (Middlewares only where Traefik guards private Apps). */
export function childKinds(cfg: BuildConfig): ChildKind[] {
  return (Object.keys(CHILD_KINDS) as ChildKind[]).filter((k) => k !== "Middleware" || cfg.edge?.controller === "traefik");
}

/** How the App's Ingress refers to its ForwardAuth Middleware (named after the App, as every child): <namespace>-<name>@kubernetescrd. */
export function middlewareRef(app: AppRef): string {
  return `${app.namespace}-${app.name}@kubernetescrd`;
}

/**
 * The App's Middleware (Traefik), on every served App's route: X-Berth-Share and X-Berth-User
 * reach an App only as Berth sets them, so an App may trust them (docs/shares.md).
 * - private: ForwardAuth. Every request is first sent to the API's forward-auth endpoint for the
 *   App, with only the viewer's Cookie of the client's headers (plus Traefik's own X-Forwarded-*),
 *   so a client's X-Original-URL or X-Forwarded-* never reach the check; the cookie it sets is
 *   passed on to the viewer on a 2xx; the two headers are deleted from the request and set from
 *   the check's answer.
 * - public: the two headers are deleted from every request (a client sends its own otherwise).
 */
export function buildMiddleware(app: AppRef, spec: Pick<AppSpec, "visibility">, edge: EdgeConfig): KubeObject {
  return {
    apiVersion: MIDDLEWARE_API_VERSION,
    kind: "Middleware",
    metadata: meta(app),
    spec:
      spec.visibility === "private"
        ? {
            forwardAuth: {
              address: forwardAuthAddress(edge.forwardAuthUrl, app.namespace, app.name),
              trustForwardHeader: false,
              authRequestHeaders: [...FORWARD_AUTH.requestHeaders],
              authResponseHeaders: [...FORWARD_AUTH.responseHeaders],
              addAuthCookiesToResponse: [FORWARD_AUTH.cookie, FORWARD_AUTH.secureCookie],
              maxResponseBodySize: FORWARD_AUTH.maxResponseBytes,
            },
          }
        : // an empty value removes the header (Traefik's headers middleware)
          { headers: { customRequestHeaders: Object.fromEntries(FORWARD_AUTH.responseHeaders.map((h) => [h, ""])) } },
  };
}

/** The Ingress annotations that guard a private App, per ingress controller. */
export function edgeAnnotations(app: AppRef, spec: AppSpec, edge: EdgeConfig | undefined): Record<string, string> {
  if (!edge) return {};
  if (edge.controller === "traefik") return { [TRAEFIK_MIDDLEWARES_ANNOTATION]: middlewareRef(app) };
  if (spec.visibility !== "private") return {};
  return {
    "nginx.ingress.kubernetes.io/auth-url": forwardAuthAddress(edge.forwardAuthUrl, app.namespace, app.name),
    "nginx.ingress.kubernetes.io/auth-response-headers": FORWARD_AUTH.responseHeaders.join(","),
    ...(edge.signInUrl
      ? { "nginx.ingress.kubernetes.io/auth-signin": edge.signInUrl, "nginx.ingress.kubernetes.io/auth-signin-redirect-param": "rd" }
      : {}),
  };
}

/** CPU millicores in the API server's canonical form, so live and desired compare equal. */
export function cpuQuantity(millicores: number): string {
  return millicores % 1000 === 0 ? String(millicores / 1000) : `${millicores}m`;
}

/** Memory MiB in the API server's canonical form (1024Mi is stored as 1Gi). */
export function memoryQuantity(mi: number): string {
  return mi % 1024 === 0 ? `${mi / 1024}Gi` : `${mi}Mi`;
}

export function labels(app: AppRef): Record<string, string> {
  return { "app.kubernetes.io/name": app.name, ...MANAGED_BY, [APP_LABEL]: app.name };
}

function meta(app: AppRef, extra: Partial<k8s.V1ObjectMeta> = {}): k8s.V1ObjectMeta {
  return {
    name: app.name,
    namespace: app.namespace,
    labels: labels(app),
    ...extra,
    ownerReferences: [{ apiVersion: API_VERSION, kind: "App", name: app.name, uid: app.uid, controller: true, blockOwnerDeletion: true }],
  };
}

/** The desired replica count: the HPA's current choice kept within [min, max]; 0 when suspended. */
export function desiredReplicas(spec: AppSpec, observed: Observed): number {
  if (spec.suspended) return 0;
  const max = spec.maxReplicas ?? spec.minReplicas;
  const current = observed.deploymentReplicas ?? spec.minReplicas;
  return Math.min(Math.max(current, spec.minReplicas), max);
}

function podMeta(app: AppRef, gov: GovernanceRef | undefined, env: EnvRef | undefined): k8s.V1ObjectMeta {
  // The generation on the template rolls the pods when a re-provision changes the key; the env
  // hash rolls them when the service's variables change.
  const annotations = {
    ...(gov ? { [ANNOTATIONS.governanceGeneration]: String(gov.generation) } : {}),
    ...(env ? { [ENV_HASH_ANNOTATION]: env.hash } : {}),
  };
  return { labels: labels(app), ...(Object.keys(annotations).length ? { annotations } : {}) };
}

/**
 * The container's variables, by precedence: Kubernetes lets `env` entries win over `envFrom`, and
 * among envFrom sources the later one. So PORT (env) wins over everything, and the governance
 * Secret comes after the service's own Secret: GOVDB_CONNECTION and GOVERNANCE_PROJECT win even if
 * `<app>-env` were edited by hand to hold them (the API refuses those names in the first place).
 * The env Secret is optional: a Secret deleted by hand does not stop pods from starting.
 */
function envOf(spec: AppSpec, gov: GovernanceRef | undefined, env: EnvRef | undefined): Pick<k8s.V1Container, "env" | "envFrom"> {
  const envFrom: k8s.V1EnvFromSource[] = [
    ...(env ? [{ secretRef: { name: env.secretName, optional: true } }] : []),
    ...(gov ? [{ secretRef: { name: gov.secretName } }] : []),
  ];
  return { env: [{ name: "PORT", value: String(spec.port) }], ...(envFrom.length ? { envFrom } : {}) };
}

/**
 * How the kubelet tells that a serving container takes traffic: its port accepts connections.
 * The kubelet runs a readiness probe once as soon as the container runs, then every period. A
 * server still starting misses that first try and, probed every 10 s alone, would wait up to 10 s
 * for the next: a deploy served 10 s late (most single-app rounds of hack/bench/deploys.ts were).
 * So a startup probe tries every second until the port opens (the readiness probe is off until
 * then, and runs at once when it passes), and the readiness probe then checks every 10 s for the
 * container's life. A server that has not opened its port within STARTUP_SECONDS, as long as
 * a rollout may take to progress (progressDeadlineSeconds), is restarted.
 */
export const STARTUP_SECONDS = 600;
const SERVING_PROBES: Pick<k8s.V1Container, "startupProbe" | "readinessProbe"> = {
  startupProbe: { tcpSocket: { port: "http" }, periodSeconds: 1, failureThreshold: STARTUP_SECONDS },
  readinessProbe: { tcpSocket: { port: "http" }, periodSeconds: 10 },
};

export function podSpec(
  spec: AppSpec,
  image: string,
  restartPolicy: "Always" | "Never" | "OnFailure",
  gov: GovernanceRef | undefined,
  env: EnvRef | undefined,
  cfg: BuildConfig,
): k8s.V1PodSpec {
  const serving = isServed(spec.type);
  const resources = { cpu: cpuQuantity(spec.cpuLimitMillicores), memory: memoryQuantity(spec.memoryLimitMi) };
  return {
    restartPolicy,
    automountServiceAccountToken: false,
    enableServiceLinks: false,
    securityContext: {
      runAsNonRoot: true,
      runAsUser: 10001,
      runAsGroup: 10001,
      fsGroup: 10001,
      seccompProfile: { type: "RuntimeDefault" },
    },
    ...(cfg.nodeSelector && Object.keys(cfg.nodeSelector).length ? { nodeSelector: cfg.nodeSelector } : {}),
    ...(cfg.tolerations?.length ? { tolerations: cfg.tolerations } : {}),
    containers: [
      {
        name: CONTAINER,
        image,
        ...(serving ? { ports: [{ name: "http", containerPort: spec.port, protocol: "TCP" }] } : {}),
        ...envOf(spec, gov, env),
        resources: { limits: resources, requests: resources },
        securityContext: {
          allowPrivilegeEscalation: false,
          readOnlyRootFilesystem: true,
          runAsNonRoot: true,
          capabilities: { drop: ["ALL"] },
        },
        volumeMounts: [{ name: "tmp", mountPath: "/tmp" }],
        ...(serving ? SERVING_PROBES : {}),
      },
    ],
    volumes: [{ name: "tmp", emptyDir: { sizeLimit: "256Mi" } }],
  };
}

export function buildDeployment(
  app: AppRef,
  spec: AppSpec,
  image: string,
  observed: Observed,
  cfg: BuildConfig,
  gov?: GovernanceRef,
  env?: EnvRef,
): k8s.V1Deployment {
  return {
    apiVersion: "apps/v1",
    kind: "Deployment",
    metadata: meta(app),
    spec: {
      replicas: desiredReplicas(spec, observed),
      revisionHistoryLimit: 5,
      selector: { matchLabels: { [APP_LABEL]: app.name } },
      strategy: { type: "RollingUpdate", rollingUpdate: { maxUnavailable: 0, maxSurge: "25%" } },
      progressDeadlineSeconds: STARTUP_SECONDS,
      template: { metadata: podMeta(app, gov, env), spec: podSpec(spec, image, "Always", gov, env, cfg) },
    },
  };
}

export function buildService(app: AppRef): k8s.V1Service {
  return {
    apiVersion: "v1",
    kind: "Service",
    metadata: meta(app),
    spec: {
      type: "ClusterIP",
      selector: { [APP_LABEL]: app.name },
      ports: [{ name: "http", port: 80, targetPort: "http", protocol: "TCP" }],
    },
  };
}

export function buildIngress(app: AppRef, spec: AppSpec, cfg: BuildConfig): k8s.V1Ingress {
  const host = appHost(spec, cfg.baseDomain);
  return {
    apiVersion: "networking.k8s.io/v1",
    kind: "Ingress",
    metadata: meta(app, { annotations: { "berth.dev/visibility": spec.visibility, ...edgeAnnotations(app, spec, cfg.edge) } }),
    spec: {
      ...(cfg.ingressClassName ? { ingressClassName: cfg.ingressClassName } : {}),
      ...(cfg.defaultTlsSecret ? { tls: [{ hosts: [host], secretName: cfg.defaultTlsSecret }] } : {}),
      rules: [
        { host, http: { paths: [{ path: "/", pathType: "Prefix", backend: { service: { name: app.name, port: { name: "http" } } } }] } },
      ],
    },
  };
}

export function buildHpa(app: AppRef, spec: AppSpec): k8s.V2HorizontalPodAutoscaler {
  return {
    apiVersion: "autoscaling/v2",
    kind: "HorizontalPodAutoscaler",
    metadata: meta(app),
    spec: {
      scaleTargetRef: { apiVersion: "apps/v1", kind: "Deployment", name: app.name },
      minReplicas: spec.minReplicas,
      maxReplicas: spec.maxReplicas ?? spec.minReplicas,
      metrics: [
        {
          type: "Resource",
          resource: { name: "cpu", target: { type: "Utilization", averageUtilization: spec.cpuTargetUtilization ?? DEFAULT_CPU_TARGET } },
        },
      ],
    },
  };
}

export function buildCronJob(
  app: AppRef,
  spec: AppSpec,
  image: string,
  cfg: BuildConfig,
  gov?: GovernanceRef,
  env?: EnvRef,
): k8s.V1CronJob {
  return {
    apiVersion: "batch/v1",
    kind: "CronJob",
    metadata: meta(app),
    spec: {
      schedule: spec.schedule!,
      timeZone: "Etc/UTC",
      suspend: spec.suspended,
      concurrencyPolicy: "Forbid",
      successfulJobsHistoryLimit: 3,
      failedJobsHistoryLimit: 3,
      jobTemplate: {
        metadata: { labels: labels(app) },
        spec: { backoffLimit: 2, template: { metadata: podMeta(app, gov, env), spec: podSpec(spec, image, "Never", gov, env, cfg) } },
      },
    },
  };
}

/** Every child the App should have right now. An App with no image yet has none. */
export function buildChildren(
  app: AppRef,
  spec: AppSpec,
  observed: Observed,
  cfg: BuildConfig,
  gov?: GovernanceRef,
  env?: EnvRef,
): KubeObject[] {
  const image = spec.image;
  if (!image) return [];
  const out: KubeObject[] = [];
  if (spec.type === "cron") {
    out.push(buildCronJob(app, spec, image, cfg, gov, env) as KubeObject);
  } else {
    out.push(buildDeployment(app, spec, image, observed, cfg, gov, env) as KubeObject);
    if (!spec.suspended) out.push(buildHpa(app, spec) as KubeObject);
    if (isServed(spec.type) && !spec.suspended) {
      // The Middleware goes first: Traefik refuses to route an Ingress that names a missing one.
      if (cfg.edge?.controller === "traefik") out.push(buildMiddleware(app, spec, cfg.edge));
      out.push(buildService(app) as KubeObject, buildIngress(app, spec, cfg) as KubeObject);
    }
  }
  return out.map(withHash);
}

/** Stamps the hash of the desired object so that a later reconcile can tell its own last apply. */
export function withHash(obj: KubeObject): KubeObject {
  const hash = createHash("sha256").update(stableJson(obj)).digest("hex").slice(0, 16);
  return { ...obj, metadata: { ...obj.metadata, annotations: { ...obj.metadata.annotations, [HASH_ANNOTATION]: hash } } };
}

export function stableJson(v: unknown): string {
  if (Array.isArray(v)) return `[${v.map(stableJson).join(",")}]`;
  if (v && typeof v === "object") {
    return `{${Object.keys(v)
      .sort()
      .map((k) => `${JSON.stringify(k)}:${stableJson((v as Record<string, unknown>)[k])}`)
      .join(",")}}`;
  }
  return JSON.stringify(v);
}

/**
 * True when `live` already holds everything `desired` sets: same applied hash and every desired
 * field present with an equal value (so hand edits of owned fields are detected and reverted).
 * Fields the API server adds (defaults, status, clusterIP, ...) are ignored.
 */
export function upToDate(desired: KubeObject, live: KubeObject | undefined): boolean {
  if (!live) return false;
  if (live.metadata.annotations?.[HASH_ANNOTATION] !== desired.metadata.annotations?.[HASH_ANNOTATION]) return false;
  // List items carry no apiVersion/kind, so only metadata and the rest of the body are compared.
  const { metadata: dm, apiVersion: _da, kind: _dk, ...dRest } = desired;
  const { metadata: lm, apiVersion: _la, kind: _lk, ...lRest } = live;
  return (
    contains({ labels: dm.labels, annotations: dm.annotations }, { labels: lm.labels, annotations: lm.annotations }) &&
    contains(dRest, lRest)
  );
}

export function contains(want: unknown, have: unknown): boolean {
  if (want === undefined) return true;
  if (Array.isArray(want)) {
    return Array.isArray(have) && want.length === have.length && want.every((w, i) => contains(w, have[i]));
  }
  if (want && typeof want === "object") {
    if (!have || typeof have !== "object" || Array.isArray(have)) return false;
    return Object.entries(want).every(([k, v]) => contains(v, (have as Record<string, unknown>)[k]));
  }
  return want === have;
}
