// Desired state of an App's children. Pure: no I/O, no clock, no randomness; table-tested.
// web, api → Deployment + Service + Ingress + HPA; worker → Deployment + HPA; cron → CronJob.
import type * as k8s from "@kubernetes/client-node";
import { API_VERSION, APP_LABEL, type AppSpec } from "../../crds/schemas.ts";
import {
  ANNOTATIONS,
  DEFAULT_CPU_TARGET,
  ENV_HASH_ANNOTATION,
  FORWARD_AUTH,
  appHost,
  forwardAuthAddress,
  isServed,
  type BuildArea,
} from "../../crds/app.ts";
import type { KubeObject } from "../../kube/objects.ts";
import { MANAGED_BY, withHash } from "../kit/apply.ts";
import { edgeAnnotations, MIDDLEWARE_API_VERSION, type EdgeConfig } from "../kit/edge.ts";
import { KINDS } from "../kit/informers.ts";
import { governanceSecretName, podSpec, STARTUP_SECONDS, type EnvRef, type GovernanceRef, type Placement } from "../kit/pod.ts";
import { desiredReplicas } from "../kit/rollout.ts";
import type { RegistryPullSettings } from "../kit/registry-pull.ts";

/** The App controller's configuration of the children it builds; Placement: where their pods run. */
export interface BuildConfig extends Placement {
  baseDomain: string;
  ingressClassName?: string | undefined;
  /** Secret name holding a wildcard certificate for *.<baseDomain>; no TLS block when unset. */
  defaultTlsSecret?: string | undefined;
  /**
   * How private Apps are guarded at the edge (docs/shares.md): the ingress asks the API's
   * forward-auth endpoint before each request. `traefik`: a ForwardAuth Middleware per App,
   * referenced by the Ingress; `nginx`: ingress-nginx's auth-url annotations.
   */
  edge?: EdgeConfig | undefined;
  /** The namespaces' pull credentials for the platform registry (kit/registry-pull.ts); none when unset. */
  registryPull?: RegistryPullSettings | undefined;
  /** Where builds push: another namespace's builds are refused as an App's image (crds/app.ts "Built images"). */
  buildArea?: BuildArea | undefined;
  /** Slugs no App may take, and the platform's own hosts (crds/app.ts "Hosts"). */
  reservedSlugs?: readonly string[] | undefined;
  platformHosts?: readonly string[] | undefined;
}

export interface AppRef {
  name: string;
  namespace: string;
  uid: string;
}

/** What the builders need to know about the world: only the current replica count (owned by the HPA). */
export interface Observed {
  deploymentReplicas?: number | undefined;
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

export type ChildKind = "Deployment" | "Service" | "Ingress" | "HorizontalPodAutoscaler" | "CronJob" | "Middleware";

export const CHILD_KINDS: Record<ChildKind, { apiVersion: string; plural: string }> = {
  Deployment: KINDS.Deployment,
  Service: KINDS.Service,
  Ingress: KINDS.Ingress,
  HorizontalPodAutoscaler: KINDS.HorizontalPodAutoscaler,
  CronJob: KINDS.CronJob,
  Middleware: KINDS.Middleware,
};

/** The child kinds the operator manages with this configuration (Middlewares only where Traefik guards private Apps). */
export function childKinds(cfg: BuildConfig): ChildKind[] {
  return (Object.keys(CHILD_KINDS) as ChildKind[]).filter((k) => k !== "Middleware" || cfg.edge?.controller === "traefik");
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

function podMeta(app: AppRef, gov: GovernanceRef | undefined, env: EnvRef | undefined): k8s.V1ObjectMeta {
  // The generation on the template rolls the pods when a re-provision changes the key; the env
  // hash rolls them when the service's variables change.
  const annotations = {
    ...(gov ? { [ANNOTATIONS.governanceGeneration]: String(gov.generation) } : {}),
    ...(env ? { [ENV_HASH_ANNOTATION]: env.hash } : {}),
  };
  return { labels: labels(app), ...(Object.keys(annotations).length ? { annotations } : {}) };
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

/**
 * Every child the App should have right now, in the order they are applied: its workload, then
 * its route. An App with no image yet has none.
 */
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
  return [...workloadChildren(app, spec, image, observed, cfg, gov, env), ...routeChildren(app, spec, cfg)].map(withHash);
}

/** What runs: a CronJob (cron), or a Deployment and, unless suspended, its HPA. */
function workloadChildren(
  app: AppRef,
  spec: AppSpec,
  image: string,
  observed: Observed,
  cfg: BuildConfig,
  gov: GovernanceRef | undefined,
  env: EnvRef | undefined,
): KubeObject[] {
  if (spec.type === "cron") return [buildCronJob(app, spec, image, cfg, gov, env) as KubeObject];
  const deployment = buildDeployment(app, spec, image, observed, cfg, gov, env) as KubeObject;
  return spec.suspended ? [deployment] : [deployment, buildHpa(app, spec) as KubeObject];
}

/**
 * How a served App (web, api) that is not suspended is reached: its Service and Ingress, and
 * first, where Traefik guards the edge, its Middleware (Traefik refuses to route an Ingress that
 * names a missing one).
 */
function routeChildren(app: AppRef, spec: AppSpec, cfg: BuildConfig): KubeObject[] {
  if (!isServed(spec.type) || spec.suspended) return [];
  return [
    ...(cfg.edge?.controller === "traefik" ? [buildMiddleware(app, spec, cfg.edge)] : []),
    buildService(app) as KubeObject,
    buildIngress(app, spec, cfg) as KubeObject,
  ];
}
