// The Jobs of a release (docs/deployments.md): the build (operator/builder/main.ts in the builder
// image, with BuildKit) and the release command (in the built image, with the App's environment).
// Pure: no I/O, no clock; table-tested.
import { createHash } from "node:crypto";
import type * as k8s from "@kubernetes/client-node";
import { API_VERSION, type AppSpec } from "../../crds/schemas.ts";
import { envSecretName } from "../../crds/app.ts";
import { gitCredentialsSecret, jobName, RELEASE_LABEL, RELEASE_STEP_LABEL } from "../../crds/release.ts";
import { MANAGED_BY, withHash } from "../kit/apply.ts";
import type { ReleaseObject } from "../kit/objects.ts";
import type { KubeObject } from "../../kube/objects.ts";
import { TLS_VARIABLES } from "../builder/config.ts";
import { CONTAINER, podSpec, restrictedContainer, restrictedPod, type GovernanceRef, type Placement } from "../kit/pod.ts";

export type { ReleaseObject };

/** Where and how builds run: configuration (chart values), never code. */
export interface BuildSettings {
  /** The builder image (berth/berth-builder). */
  builderImage: string;
  /** The registry built images are pushed to (host[:port]); they are named <registry>/<prefix>/<namespace>/<app>. */
  registry: string;
  repositoryPrefix: string;
  /** Plain HTTP to the registry. */
  registryInsecure: boolean;
  /** BuildKit's address for buildctl (tcp://host:port). */
  buildkitHost: string;
  /** Base images that detected stacks build on, by stack. */
  baseImages: Partial<Record<string, string>>;
  cpuMillicores: number;
  memoryMi: number;
  /** Builds one workspace may run at once; the others wait, queued (BERTH_BUILD_MAX_PER_WORKSPACE). */
  maxPerWorkspace: number;
  /** The local disk a build may fill: its clone, git's and the program's files (ephemeral storage). */
  storageMi: number;
  timeoutSeconds: number;
  /** "registry": each App's build cache is also kept in the registry, next to its images (docs/builds.md, Caching). */
  cache: "local" | "registry";
  /** How RUN steps reach the network (BERTH_BUILD_NETWORK; docs/builds.md "Network"). */
  network: "proxy" | "daemon";
  /** Mutual TLS to buildkitd (BERTH_BUILDKIT_TLS; docs/builds.md "mTLS"); plain TCP when absent. */
  tls?: BuildkitTlsSettings | undefined;
}

export interface BuildkitTlsSettings {
  /** Berth's namespace, which holds the original of the client certificate's Secret (BERTH_NAMESPACE). */
  secretNamespace: string;
  /** The name buildkitd's certificate is checked against (BERTH_BUILDKIT_TLS_SERVER_NAME). */
  serverName?: string | undefined;
}

/**
 * The Secret of build Jobs' client certificate for buildkitd: the platform team's original in
 * Berth's namespace, and the operator's copy of it, under the same name, in each namespace it
 * builds in (a secretKeyRef names a Secret of the pod's own namespace).
 */
export const BUILDKIT_CLIENT_SECRET = "berth-buildkit-client";
/** Its keys: the CA of buildkitd's certificate, the client certificate and its key (cert-manager's names). */
export const BUILDKIT_CLIENT_KEYS = { ca: "ca.crt", cert: "tls.crt", key: "tls.key" } as const;
/** The label that tells the operator's copies (with MANAGED_BY). */
export const BUILDKIT_CLIENT_LABEL = { "app.kubernetes.io/component": "buildkit-client" } as const;

type SecretObject = KubeObject & { data?: Record<string, string>; type?: string };

/**
 * The copy of the client certificate's Secret for a namespace's build Jobs, from the original
 * (its three keys only, as an Opaque Secret whatever the original's type, owned by nothing: one
 * per namespace, shared by its builds and kept up to date with the original before each one);
 * undefined when the original is missing or lacks one of the keys. Pure.
 */
export function buildkitClientSecret(namespace: string, original: SecretObject | undefined): SecretObject | undefined {
  const data: Record<string, string> = {};
  for (const key of Object.values(BUILDKIT_CLIENT_KEYS)) {
    const v = original?.data?.[key];
    if (!v) return undefined;
    data[key] = v;
  }
  const copy: SecretObject = {
    apiVersion: "v1",
    kind: "Secret",
    metadata: {
      name: BUILDKIT_CLIENT_SECRET,
      namespace,
      labels: { ...MANAGED_BY, ...BUILDKIT_CLIENT_LABEL },
      annotations: {
        "berth.dev/purpose": `The build Jobs' client certificate for buildkitd (mutual TLS), copied by Berth's operator from ${original!.metadata.namespace ?? ""}/${BUILDKIT_CLIENT_SECRET} before each build (docs/builds.md "mTLS").`,
      },
    },
    type: "Opaque",
    data,
  };
  return withHash(copy);
}

/** Whether a Secret is one of the operator's copies of the client certificate. */
export const isBuildkitClientCopy = (o: KubeObject): boolean =>
  Object.entries({ ...MANAGED_BY, ...BUILDKIT_CLIENT_LABEL }).every(([k, v]) => o.metadata.labels?.[k] === v);

/** The tag of an App's registry build cache, in its image repository. */
export const BUILD_CACHE_TAG = "buildcache";

/**
 * Whether a queued release may start its build now: a workspace runs at most `max` builds at once
 * (BERTH_BUILD_MAX_PER_WORKSPACE), and its queued releases start oldest first. Pure.
 */
export function buildSlot(
  r: ReleaseObject,
  inNamespace: readonly ReleaseObject[],
  max: number,
): { start: true } | { start: false; running: number; ahead: number } {
  const phase = (x: ReleaseObject) => x.status?.phase ?? "queued";
  const running = inNamespace.filter((x) => phase(x) === "building" && !x.metadata.deletionTimestamp).length;
  const when = (x: ReleaseObject) => new Date(x.metadata.creationTimestamp ?? 0).getTime();
  const queued = inNamespace
    .filter((x) => phase(x) === "queued" && !x.spec.image && !x.metadata.deletionTimestamp)
    .sort((a, b) => when(a) - when(b) || (a.metadata.name ?? "").localeCompare(b.metadata.name ?? ""));
  const ahead = queued.findIndex((x) => x.metadata.uid === r.metadata.uid);
  return ahead >= 0 && ahead < max - running ? { start: true } : { start: false, running, ahead: Math.max(0, ahead) };
}

/** The repository a release's image is pushed to (without a tag). */
export function imageRepository(s: BuildSettings, namespace: string, app: string): string {
  return [s.registry, s.repositoryPrefix, namespace, app].filter(Boolean).join("/");
}

function jobMeta(r: ReleaseObject, step: "build" | "release"): k8s.V1ObjectMeta {
  return {
    name: jobName(r.metadata.name!, step),
    namespace: r.metadata.namespace!,
    labels: { ...MANAGED_BY, [RELEASE_LABEL]: r.metadata.name!, [RELEASE_STEP_LABEL]: step },
    ownerReferences: [
      {
        apiVersion: API_VERSION,
        kind: "Release",
        name: r.metadata.name!,
        uid: r.metadata.uid!,
        controller: true,
        blockOwnerDeletion: true,
      },
    ],
  };
}

const podLabels = (r: ReleaseObject, step: "build" | "release") => ({
  ...MANAGED_BY,
  [RELEASE_LABEL]: r.metadata.name!,
  [RELEASE_STEP_LABEL]: step,
});

/** The cache scope of an App's builds: from its uid, which no other workspace can learn (docs/builds.md "Caching"). */
export function cacheScopeOf(appUid: string): string {
  return createHash("sha256").update(`berth-build-cache:${appUid}`).digest("hex").slice(0, 20);
}

/**
 * The build Job: unprivileged, no ServiceAccount token, its result in the termination message.
 * No volumes: the program writes its clone to the container's own writable layer (as 10001, only
 * /workspace and /tmp are its to write), bounded by an ephemeral-storage limit. A pod without
 * volumes starts sooner: the kubelet checks a pod's mounts every 300 ms before starting it, and ten
 * build pods starting at once on a small node spend that wait and more (docs/builds.md).
 */
export function buildJob(r: ReleaseObject, s: BuildSettings, placement: Placement): k8s.V1Job {
  const git = r.spec.git!;
  const appUid = r.metadata.ownerReferences?.find((o) => o.kind === "App" && o.name === r.spec.appRef.name)?.uid;
  const repository = imageRepository(s, r.metadata.namespace!, r.spec.appRef.name);
  // The build itself runs in BuildKit: the pod clones, plans and streams the context, so it asks
  // for little (ten builds at once fit a small node) and may use up to the configured limits.
  const limits = { cpu: `${s.cpuMillicores}m`, memory: `${s.memoryMi}Mi`, "ephemeral-storage": `${s.storageMi}Mi` };
  const requests = {
    cpu: `${Math.min(100, s.cpuMillicores)}m`,
    memory: `${Math.min(256, s.memoryMi)}Mi`,
    "ephemeral-storage": `${Math.min(1024, s.storageMi)}Mi`,
  };
  const env: k8s.V1EnvVar[] = [
    { name: "BERTH_BUILD_REPO_URL", value: git.repoUrl },
    { name: "BERTH_BUILD_COMMIT", value: git.commitSha },
    { name: "BERTH_BUILD_BRANCH", value: git.branch },
    ...(r.spec.dockerfilePath ? [{ name: "BERTH_BUILD_DOCKERFILE", value: r.spec.dockerfilePath }] : []),
    { name: "BERTH_BUILD_IMAGE", value: repository },
    { name: "BERTH_BUILD_TAG", value: git.commitSha.slice(0, 12) },
    ...(s.cache === "registry" ? [{ name: "BERTH_BUILD_CACHE_REF", value: `${repository}:${BUILD_CACHE_TAG}` }] : []),
    { name: "BUILDKIT_HOST", value: s.buildkitHost },
    // mutual TLS: the namespace's copy of the client certificate, by secretKeyRef (no volume)
    ...(s.tls
      ? [
          ...(["ca", "cert", "key"] as const).map((k): k8s.V1EnvVar => ({
            name: TLS_VARIABLES[k],
            valueFrom: { secretKeyRef: { name: BUILDKIT_CLIENT_SECRET, key: BUILDKIT_CLIENT_KEYS[k] } },
          })),
          ...(s.tls.serverName ? [{ name: TLS_VARIABLES.serverName, value: s.tls.serverName }] : []),
        ]
      : []),
    { name: "BERTH_BUILD_NETWORK", value: s.network },
    { name: "BERTH_BUILD_REGISTRY_INSECURE", value: String(s.registryInsecure) },
    { name: "BERTH_BUILD_BASE_IMAGES", value: JSON.stringify(s.baseImages) },
    ...(appUid ? [{ name: "BERTH_BUILD_CACHE_SCOPE", value: cacheScopeOf(appUid) }] : []),
    { name: "HOME", value: "/workspace" },
    ...(git.installationId
      ? (["USERNAME", "PASSWORD"] as const).map((k): k8s.V1EnvVar => ({
          name: `GIT_${k}`,
          valueFrom: { secretKeyRef: { name: gitCredentialsSecret(git.installationId!), key: k.toLowerCase() } },
        }))
      : []),
  ];
  return withHash({
    apiVersion: "batch/v1",
    kind: "Job",
    metadata: jobMeta(r, "build"),
    spec: {
      backoffLimit: 0,
      activeDeadlineSeconds: s.timeoutSeconds,
      template: {
        metadata: { labels: podLabels(r, "build") },
        spec: {
          ...restrictedPod("Never", placement),
          containers: [
            {
              name: "build",
              image: s.builderImage,
              env,
              workingDir: "/workspace",
              resources: { limits, requests },
              terminationMessagePolicy: "FallbackToLogsOnError",
              // The build writes its clone to the container's own layer (no volumes).
              securityContext: restrictedContainer({ readOnlyRootFilesystem: false }),
            },
          ],
        },
      },
    },
  }) as k8s.V1Job;
}

/**
 * The release command's Job: the new image with the App's pod spec (its environment, governance
 * variables, limits, placement), running `sh -c <releaseCommand>` once.
 */
export function releaseJob(
  r: ReleaseObject,
  spec: AppSpec,
  image: string,
  placement: Placement,
  gov: GovernanceRef | undefined,
  timeoutSeconds: number,
): k8s.V1Job {
  // The service's variables as its pods get them (the Secret is optional: none set, none mounted).
  const env = { secretName: envSecretName(r.spec.appRef.name), hash: "" };
  const pod = podSpec(spec, image, "Never", gov, env, placement);
  const container = pod.containers.find((c) => c.name === CONTAINER)!;
  const { readinessProbe: _ready, startupProbe: _started, ports: _ports, ...rest } = container;
  return withHash({
    apiVersion: "batch/v1",
    kind: "Job",
    metadata: jobMeta(r, "release"),
    spec: {
      backoffLimit: 0,
      activeDeadlineSeconds: timeoutSeconds,
      template: {
        metadata: { labels: podLabels(r, "release") },
        spec: {
          ...pod,
          containers: [{ ...rest, command: ["/bin/sh", "-c", r.spec.releaseCommand!], terminationMessagePolicy: "FallbackToLogsOnError" }],
        },
      },
    },
  }) as k8s.V1Job;
}

export type JobOutcome = { done: false } | { done: true; ok: boolean; reason?: string; message?: string };

/**
 * Whether a Job finished, and how: its Complete / Failed conditions, or sooner, its one pod's
 * container terminated (the Jobs run one pod, never restarted and never retried: backoffLimit 0,
 * restartPolicy Never, so a terminated container is the Job's outcome; the job controller's own
 * conditions follow a second or more later). Pure.
 */
export function jobOutcome(job: k8s.V1Job | undefined, pod?: k8s.V1Pod): JobOutcome {
  const c = (type: string) => job?.status?.conditions?.find((x) => x.type === type && x.status === "True");
  const complete = c("Complete") ?? c("SuccessCriteriaMet");
  if (complete) return { done: true, ok: true };
  const failed = c("Failed") ?? c("FailureTarget");
  if (failed) return { done: true, ok: false, reason: failed.reason ?? "Failed", message: failed.message ?? "" };
  const t = terminated(pod);
  if (t)
    return t.exitCode === 0
      ? { done: true, ok: true }
      : { done: true, ok: false, reason: "Failed", message: `exited with code ${t.exitCode}` };
  return { done: false };
}

export { RESULT_LINE_PREFIX } from "../builder/config.ts";

/** What the build program wrote to its termination message and its last log line (docs/builds.md), or why it cannot be read. */
export type BuildResult =
  | { ok: true; image: string; digest: string; tag?: string; stack?: string; commitMessage?: string; cloneMs?: number; buildMs?: number }
  | { ok: false; step: string; reason: string; message: string };

export function parseBuildResult(message: string | undefined): BuildResult | undefined {
  if (!message) return undefined;
  try {
    const v = JSON.parse(message) as Partial<BuildResult> & Record<string, unknown>;
    if (v.ok === true && typeof v.image === "string" && /@sha256:[0-9a-f]{64}$/.test(v.image) && typeof v.digest === "string")
      return v as BuildResult;
    if (v.ok === false && typeof v.reason === "string" && typeof v.message === "string")
      return { ok: false, step: typeof v.step === "string" ? v.step : "build", reason: v.reason, message: v.message };
  } catch {
    /* not JSON: the last log lines (FallbackToLogsOnError) */
  }
  return undefined;
}

/** The runtime's words when an image has no /bin/sh to run `sh -c` with (runc; crun says "executable file not found"). */
const NO_SHELL = /exec: "\/bin\/sh": stat \/bin\/sh: no such file or directory|"\/bin\/sh": executable file not found/;

/**
 * Why a release command's Job failed, as the deployment records it: its exit code and the end of
 * its output; an image without a shell (a release command runs as `/bin/sh -c`) is said in words a
 * user can act on, not the runtime's. Pure.
 */
export function releaseFailure(
  outcome: Extract<JobOutcome, { done: true }>,
  t: k8s.V1ContainerStateTerminated | undefined,
): { reason: string; message: string } {
  if (outcome.reason === "DeadlineExceeded")
    return { reason: "ReleaseCommandTimeout", message: `${outcome.reason}: ${outcome.message ?? ""}` };
  if (t && NO_SHELL.test(t.message ?? "")) {
    return {
      reason: "ReleaseCommandNoShell",
      message:
        "The release command cannot run: the image has no shell (/bin/sh), and a release command runs as /bin/sh -c <releaseCommand>. Images that detection builds for Go apps hold the binary alone: build the service from a Dockerfile (dockerfilePath) whose image has /bin/sh, or remove the release command",
    };
  }
  const message = t
    ? `The release command exited with code ${t.exitCode}${t.message ? `: ${tail(t.message)}` : ""}`
    : `${outcome.reason ?? "Failed"}: ${outcome.message ?? ""}`;
  return { reason: "ReleaseCommandFailed", message };
}

/** The last lines of a container's output (at most 2,000 characters). */
export function tail(message: string | undefined, lines = 15): string {
  return (message ?? "").trim().split("\n").slice(-lines).join("\n").slice(-2000);
}

/** The terminated state of a Job pod's first container. */
export function terminated(pod: k8s.V1Pod | undefined): k8s.V1ContainerStateTerminated | undefined {
  return pod?.status?.containerStatuses?.[0]?.state?.terminated;
}
