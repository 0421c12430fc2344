// The pod template of every pod the operator starts: an App's (Deployment, CronJob), its release
// command's Job (the App's pod with another command) and the build Job (the builder image). One
// security baseline for all of them (docs/operating.md "Pod security"): non-root, no privilege
// escalation, all capabilities dropped, RuntimeDefault seccomp, no ServiceAccount token, no
// service links; placed where the configuration says. Pure: no I/O, no clock.
import { createHash } from "node:crypto";
import type * as k8s from "@kubernetes/client-node";
import type { AppSpec } from "../../crds/schemas.ts";
import { governanceDisabled, governanceGeneration, isServed } from "../../crds/app.ts";
import type { KubeObject } from "../../kube/objects.ts";
import { REGISTRY_PULL_SECRET } from "../../kube/registry-credentials.ts";
import type { OperatorConfig } from "../config.ts";
import { stableJson } from "./apply.ts";

/** The App's container, in its pods and in its release command's Job. */
export const CONTAINER = "app";
/** The UID and GID every container runs as. */
export const POD_USER = 10001;

/** Where the pods run: a nodeSelector and tolerations for every pod (configuration, never the App). */
export interface Placement {
  nodeSelector?: Record<string, string> | undefined;
  tolerations?: k8s.V1Toleration[] | undefined;
  /** Secrets of the pod's namespace the kubelet pulls with: the registry's per-namespace credential (kit/registry-pull.ts). */
  imagePullSecrets?: readonly string[] | undefined;
}

/**
 * Where the operator's pods run, from its configuration: every App pod, release command and build
 * alike. With the registry's key (BERTH_REGISTRY_AUTH_KEY_FILE) they pull with their namespace's
 * credential, which the App controller writes (kit/registry-pull.ts).
 */
export function workloadPlacement(
  cfg: Pick<OperatorConfig, "BERTH_WORKLOAD_NODE_SELECTOR" | "BERTH_WORKLOAD_TOLERATIONS" | "BERTH_REGISTRY_AUTH_KEY_FILE">,
): Placement {
  return {
    nodeSelector: cfg.BERTH_WORKLOAD_NODE_SELECTOR,
    tolerations: cfg.BERTH_WORKLOAD_TOLERATIONS,
    ...(cfg.BERTH_REGISTRY_AUTH_KEY_FILE ? { imagePullSecrets: [REGISTRY_PULL_SECRET] } : {}),
  };
}

/** The pod-level half of the baseline, with the placement and the restart policy. */
export function restrictedPod(
  restartPolicy: "Always" | "Never" | "OnFailure",
  placement: Placement,
): Pick<
  k8s.V1PodSpec,
  | "restartPolicy"
  | "automountServiceAccountToken"
  | "enableServiceLinks"
  | "securityContext"
  | "nodeSelector"
  | "tolerations"
  | "imagePullSecrets"
> {
  return {
    restartPolicy,
    automountServiceAccountToken: false,
    enableServiceLinks: false,
    securityContext: {
      runAsNonRoot: true,
      runAsUser: POD_USER,
      runAsGroup: POD_USER,
      fsGroup: POD_USER,
      seccompProfile: { type: "RuntimeDefault" },
    },
    ...(placement.nodeSelector && Object.keys(placement.nodeSelector).length ? { nodeSelector: placement.nodeSelector } : {}),
    ...(placement.tolerations?.length ? { tolerations: placement.tolerations } : {}),
    ...(placement.imagePullSecrets?.length ? { imagePullSecrets: placement.imagePullSecrets.map((name) => ({ name })) } : {}),
  };
}

/**
 * The container-level half of the baseline. The root filesystem is read-only except for the
 * build, which writes its clone to the container's own layer.
 */
export function restrictedContainer(opts: { readOnlyRootFilesystem: boolean }): k8s.V1SecurityContext {
  return {
    allowPrivilegeEscalation: false,
    readOnlyRootFilesystem: opts.readOnlyRootFilesystem,
    runAsNonRoot: true,
    capabilities: { drop: ["ALL"] },
  };
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

/** `<app>-governance`: GOVDB_CONNECTION and GOVERNANCE_PROJECT, mounted into every container. */
export function governanceSecretName(app: string): string {
  return `${app}-governance`;
}

/**
 * The App's governance Secret as the App controller keeps it, from the App's annotations: what a
 * pod started outside the App's own workload (its release command) mounts.
 */
export function governanceRefOf(app: KubeObject): GovernanceRef | undefined {
  if (governanceDisabled(app.metadata.annotations)) return undefined;
  return { secretName: governanceSecretName(app.metadata.name!), generation: governanceGeneration(app.metadata.annotations) };
}

/** The hash of an env Secret's data stamped on the pod template: a change of any variable rolls the pods. */
export function envHash(data: Readonly<Record<string, string>> | undefined): string {
  return createHash("sha256")
    .update(stableJson(data ?? {}))
    .digest("hex")
    .slice(0, 16);
}

/** CPU millicores in the API server's canonical form, so live and desired compare equal. */
export function cpuQuantity(millicores: number): string {
  return millicores % 1000 === 0 ? String(millicores / 1000) : `${millicores}m`;
}

/** Memory MiB in the API server's canonical form (1024Mi is stored as 1Gi). */
export function memoryQuantity(mi: number): string {
  return mi % 1024 === 0 ? `${mi / 1024}Gi` : `${mi}Mi`;
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

/** The App's pod: its one container (image, port, variables, limits, probes when served) on the baseline. */
export function podSpec(
  spec: AppSpec,
  image: string,
  restartPolicy: "Always" | "Never" | "OnFailure",
  gov: GovernanceRef | undefined,
  env: EnvRef | undefined,
  placement: Placement,
): k8s.V1PodSpec {
  const serving = isServed(spec.type);
  const resources = { cpu: cpuQuantity(spec.cpuLimitMillicores), memory: memoryQuantity(spec.memoryLimitMi) };
  return {
    ...restrictedPod(restartPolicy, placement),
    containers: [
      {
        name: CONTAINER,
        image,
        ...(serving ? { ports: [{ name: "http", containerPort: spec.port, protocol: "TCP" }] } : {}),
        ...envOf(spec, gov, env),
        resources: { limits: resources, requests: resources },
        securityContext: restrictedContainer({ readOnlyRootFilesystem: true }),
        volumeMounts: [{ name: "tmp", mountPath: "/tmp" }],
        ...(serving ? SERVING_PROBES : {}),
      },
    ],
    volumes: [{ name: "tmp", emptyDir: { sizeLimit: "256Mi" } }],
  };
}
