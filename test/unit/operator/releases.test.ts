// Releases' pure parts: which release serves, what is cancelled or pruned, the Jobs' specs, the
// build result, and what an App's status says about its releases.
import test from "ava";
import type * as k8s from "@kubernetes/client-node";
import { gitCredentialsSecret, jobName, overtaken, releasesToPrune, servingRelease } from "../../../crds/release.ts";
import { AppSpec, type ReleasePhase } from "../../../crds/schemas.ts";
import {
  BUILDKIT_CLIENT_SECRET,
  buildJob,
  buildkitClientSecret,
  buildSlot,
  isBuildkitClientCopy,
  imageRepository,
  jobOutcome,
  parseBuildResult,
  releaseFailure,
  releaseJob,
  RESULT_LINE_PREFIX,
  type BuildSettings,
  type ReleaseObject,
} from "../../../operator/release/builders.ts";
import { computeStatus } from "../../../operator/app/status.ts";
import { releasesOfApp } from "../../../operator/release/controller.ts";
import { resultOfLine } from "../../../operator/release/build-log.ts";

const SHA = "0123456789abcdef0123456789abcdef01234567";
const IMG = `127.0.0.1:5000/apps/ns/web@sha256:${"a".repeat(64)}`;

function rel(
  sequence: number,
  phase?: ReleasePhase,
  extra: Partial<ReleaseObject["spec"]> = {},
  status: Record<string, unknown> = {},
): ReleaseObject {
  return {
    apiVersion: "berth.dev/v1alpha1",
    kind: "Release",
    metadata: {
      name: `web-${sequence}`,
      namespace: "ns",
      uid: `uid-${sequence}`,
      generation: 1,
      creationTimestamp: new Date(Date.UTC(2026, 0, sequence)),
    },
    spec: {
      appRef: { name: "web" },
      sequence,
      trigger: "push",
      git: { repoUrl: "https://git.example/r.git", branch: "main", commitSha: SHA, commitMessage: `commit ${sequence}` },
      ...extra,
    },
    status: {
      ...(phase ? { phase } : {}),
      ...(phase === "deploying" || phase === "succeeded" || phase === "superseded" ? { image: IMG } : {}),
      ...status,
    },
  };
}

test("the serving release is the newest deploying or succeeded one with an image; a newer build leaves it serving", (t) => {
  t.is(servingRelease([rel(1, "succeeded"), rel(2, "building"), rel(3, "queued")])?.metadata.name, "web-1");
  t.is(servingRelease([rel(1, "superseded"), rel(2, "succeeded"), rel(3, "deploying")])?.metadata.name, "web-3");
  t.is(servingRelease([rel(1, "succeeded"), rel(2, "failed")])?.metadata.name, "web-1", "a failed rollout hands back to the previous one");
  t.is(servingRelease([rel(1, "build_failed")]), undefined);
  t.is(servingRelease([]), undefined);
});

test("a release overtaken by a newer serving one is cancelled; one behind an older is not", (t) => {
  const all = [rel(1, "succeeded"), rel(2, "building"), rel(3, "deploying")];
  t.true(overtaken(all[1]!, all));
  t.false(overtaken(all[2]!, all));
  t.false(overtaken(rel(4, "building"), [rel(1, "succeeded"), rel(4, "building")]));
});

test("pruning keeps the newest N, the serving one and those in progress", (t) => {
  const all = [
    rel(1, "succeeded"),
    ...Array.from({ length: 5 }, (_, i) => rel(i + 2, "superseded")),
    rel(7, "building"),
    rel(8, "build_failed"),
  ];
  // serving is web-1 (the others never served); keep 3: 8, 7, 6
  t.deepEqual(releasesToPrune(all, 3).sort(), ["web-2", "web-3", "web-4", "web-5"]);
  t.deepEqual(releasesToPrune([rel(1, "building"), rel(2, "queued")], 0), [], "never one in progress");
});

test("Job names stay valid label values (63) and distinct per step", (t) => {
  t.is(jobName("web-1", "build"), "web-1-build");
  const long = `${"a".repeat(60)}-12`;
  for (const step of ["build", "release"] as const) {
    const n = jobName(long, step);
    t.true(n.length <= 63, n);
    t.true(n.endsWith(`-${step}`));
    t.regex(n, /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/);
  }
  t.not(jobName(long, "build"), jobName(`${"a".repeat(60)}-13`, "build"));
});

const settings: BuildSettings = {
  builderImage: "reg/berth/berth-builder:t",
  registry: "127.0.0.1:5000",
  repositoryPrefix: "apps",
  registryInsecure: true,
  buildkitHost: "tcp://10.0.0.1:1234",
  baseImages: { node: "reg/berth/node:v1" },
  cpuMillicores: 1000,
  memoryMi: 2048,
  storageMi: 5120,
  timeoutSeconds: 600,
  cache: "local",
  network: "proxy",
  maxPerWorkspace: 2,
};
const cfg = {
  baseDomain: "apps.test",
  nodeSelector: { "berth.dev/node": "real" },
  tolerations: [{ key: "t", operator: "Exists", effect: "NoSchedule" }],
};
const envOf = (c: k8s.V1Container) => Object.fromEntries((c.env ?? []).map((e) => [e.name, e.value ?? e.valueFrom]));

test("the build Job: the builder's contract in its environment, unprivileged, no token, placed like workloads, owned by the release", (t) => {
  const job = buildJob(rel(3, "queued", { dockerfilePath: "deploy/Dockerfile" }), settings, cfg);
  t.is(job.metadata?.name, "web-3-build");
  t.like(job.metadata?.ownerReferences?.[0], { kind: "Release", name: "web-3", uid: "uid-3", controller: true });
  t.is(job.spec?.backoffLimit, 0);
  t.is(job.spec?.activeDeadlineSeconds, 600);
  const pod = job.spec!.template.spec!;
  t.false(pod.automountServiceAccountToken);
  t.deepEqual(pod.nodeSelector, cfg.nodeSelector);
  t.is(pod.restartPolicy, "Never");
  const c = pod.containers[0]!;
  t.is(c.image, settings.builderImage);
  t.like(c.securityContext, { allowPrivilegeEscalation: false, runAsNonRoot: true, capabilities: { drop: ["ALL"] } });
  t.like(pod.securityContext, { runAsNonRoot: true, runAsUser: 10001, seccompProfile: { type: "RuntimeDefault" } });
  t.deepEqual(
    c.resources,
    {
      limits: { cpu: "1000m", memory: "2048Mi", "ephemeral-storage": "5120Mi" },
      requests: { cpu: "100m", memory: "256Mi", "ephemeral-storage": "1024Mi" },
    },
    "it asks for little (BuildKit builds); its clone's disk is bounded",
  );
  t.is(pod.volumes, undefined, "no volumes: the pod starts without the kubelet's wait for mounts");
  t.is(c.volumeMounts, undefined);
  t.like(envOf(c), {
    BERTH_BUILD_REPO_URL: "https://git.example/r.git",
    BERTH_BUILD_COMMIT: SHA,
    BERTH_BUILD_BRANCH: "main",
    BERTH_BUILD_DOCKERFILE: "deploy/Dockerfile",
    BERTH_BUILD_IMAGE: "127.0.0.1:5000/apps/ns/web",
    BERTH_BUILD_TAG: SHA.slice(0, 12),
    BUILDKIT_HOST: "tcp://10.0.0.1:1234",
    BERTH_BUILD_NETWORK: "proxy",
    BERTH_BUILD_REGISTRY_INSECURE: "true",
    BERTH_BUILD_BASE_IMAGES: JSON.stringify(settings.baseImages),
  });
  t.false("GIT_PASSWORD" in envOf(c), "no credentials without an installation");
  t.false(JSON.stringify(job.spec?.template.metadata?.labels).includes('berth.dev/app"'), "its pods are not counted as the App's");
  const priv = buildJob(rel(4, "queued", { git: { ...rel(4).spec.git!, installationId: "12345" } }), settings, cfg).spec!.template.spec!
    .containers[0]!;
  t.deepEqual(priv.env?.find((e) => e.name === "GIT_PASSWORD")?.valueFrom, {
    secretKeyRef: { name: gitCredentialsSecret("12345"), key: "password" },
  });
  t.is(imageRepository({ ...settings, repositoryPrefix: "" }, "ns", "web"), "127.0.0.1:5000/ns/web");
  t.false("BERTH_BUILD_CACHE_REF" in envOf(c), "the local cache: buildkitd's own, nothing for the program to do");
  const cached = buildJob(rel(3, "queued"), { ...settings, cache: "registry" }, cfg).spec!.template.spec!.containers[0]!;
  t.is(envOf(cached).BERTH_BUILD_CACHE_REF, "127.0.0.1:5000/apps/ns/web:buildcache", "the registry cache: one per App, next to its images");
});

test("the build Job with mutual TLS to buildkitd: the namespace's copy of the client certificate by secretKeyRef, no volume; without it, none of it", (t) => {
  const plain = envOf(buildJob(rel(3, "queued"), settings, cfg).spec!.template.spec!.containers[0]!);
  t.false(
    Object.keys(plain).some((n) => n.startsWith("BERTH_BUILDKIT_TLS")),
    "TLS off: the Job is as before",
  );
  const job = buildJob(rel(3, "queued"), { ...settings, tls: { secretNamespace: "berth-system" } }, cfg);
  const pod = job.spec!.template.spec!;
  const env = envOf(pod.containers[0]!);
  t.deepEqual(
    [env.BERTH_BUILDKIT_TLS_CA, env.BERTH_BUILDKIT_TLS_CERT, env.BERTH_BUILDKIT_TLS_KEY],
    [
      { secretKeyRef: { name: BUILDKIT_CLIENT_SECRET, key: "ca.crt" } },
      { secretKeyRef: { name: BUILDKIT_CLIENT_SECRET, key: "tls.crt" } },
      { secretKeyRef: { name: BUILDKIT_CLIENT_SECRET, key: "tls.key" } },
    ],
    "the Secret of the pod's own namespace: the operator's copy",
  );
  t.false("BERTH_BUILDKIT_TLS_SERVER_NAME" in env, "no server name configured: buildctl checks the host of BUILDKIT_HOST");
  t.is(env.BUILDKIT_HOST, settings.buildkitHost);
  t.is(pod.volumes, undefined, "still no volumes");
  t.is(pod.containers[0]!.volumeMounts, undefined);
  t.is(pod.containers[0]!.envFrom, undefined, "only the three keys, each named");
  const named = buildJob(
    rel(3, "queued"),
    { ...settings, tls: { secretNamespace: "berth-system", serverName: "buildkitd.builds.svc" } },
    cfg,
  );
  t.is(envOf(named.spec!.template.spec!.containers[0]!).BERTH_BUILDKIT_TLS_SERVER_NAME, "buildkitd.builds.svc");
});

test("the copy of the client certificate's Secret: its three keys only, Opaque, labelled as Berth's copy, owned by nothing; none from an incomplete original", (t) => {
  const data: Record<string, string> = { "ca.crt": "Y2E=", "tls.crt": "Y2VydA==", "tls.key": "a2V5" };
  const original = {
    apiVersion: "v1",
    kind: "Secret",
    metadata: { name: BUILDKIT_CLIENT_SECRET, namespace: "berth-system", uid: "u", resourceVersion: "7", labels: { team: "platform" } },
    type: "kubernetes.io/tls",
    data: { ...data, "other.key": "eA==" },
  };
  const copy = buildkitClientSecret("ws-a", original)!;
  t.like(copy, { apiVersion: "v1", kind: "Secret", type: "Opaque", metadata: { name: BUILDKIT_CLIENT_SECRET, namespace: "ws-a" } });
  t.deepEqual(copy.data, data);
  t.deepEqual(copy.metadata.labels, { "app.kubernetes.io/managed-by": "berth", "app.kubernetes.io/component": "buildkit-client" });
  t.is(copy.metadata.ownerReferences, undefined);
  t.is(copy.metadata.uid, undefined);
  t.truthy(copy.metadata.annotations?.["berth.dev/applied-hash"]);
  t.true(isBuildkitClientCopy(copy));
  t.false(isBuildkitClientCopy(original), "the platform's original is not a copy");
  t.not(
    buildkitClientSecret("ws-a", { ...original, data: { ...data, "tls.key": "b3RoZXI=" } })!.metadata.annotations?.[
      "berth.dev/applied-hash"
    ],
    copy.metadata.annotations?.["berth.dev/applied-hash"],
    "a rotated key is a change to apply",
  );
  t.is(buildkitClientSecret("ws-a", undefined), undefined);
  for (const key of Object.keys(data)) {
    const { [key]: _gone, ...rest } = data;
    t.is(buildkitClientSecret("ws-a", { ...original, data: rest }), undefined, `without ${key}`);
  }
});

test("the release command's Job: the new image, the App's environment and limits, sh -c the command, no probes", (t) => {
  const spec = AppSpec.parse({ name: "Web", slug: "web", releaseCommand: "npm run migrate" });
  const job = releaseJob(
    rel(2, "building", { releaseCommand: "npm run migrate" }),
    spec,
    IMG,
    cfg,
    { secretName: "web-governance", generation: 2 },
    900,
  );
  const c = job.spec!.template.spec!.containers[0]!;
  t.is(job.metadata?.name, "web-2-release");
  t.is(c.image, IMG);
  t.deepEqual(c.command, ["/bin/sh", "-c", "npm run migrate"]);
  t.deepEqual(
    c.envFrom,
    [{ secretRef: { name: "web-env", optional: true } }, { secretRef: { name: "web-governance" } }],
    "the service's variables, then governance's, which win",
  );
  t.is(c.readinessProbe, undefined);
  t.is(c.startupProbe, undefined);
  t.is(job.spec!.template.spec!.restartPolicy, "Never");
  t.is(job.spec?.activeDeadlineSeconds, 900);
});

test("a Job's outcome from its conditions; the build result from the termination message", (t) => {
  t.deepEqual(jobOutcome(undefined), { done: false });
  t.deepEqual(jobOutcome({ status: { conditions: [{ type: "Complete", status: "True" }] } }), { done: true, ok: true });
  t.like(jobOutcome({ status: { conditions: [{ type: "Failed", status: "True", reason: "DeadlineExceeded", message: "too long" }] } }), {
    done: true,
    ok: false,
    reason: "DeadlineExceeded",
  });
  t.like(parseBuildResult(JSON.stringify({ ok: true, image: IMG, digest: `sha256:${"a".repeat(64)}`, stack: "node" })), {
    ok: true,
    stack: "node",
  });
  t.like(parseBuildResult(JSON.stringify({ ok: false, step: "clone", reason: "CommitNotFound", message: "no such commit" })), {
    ok: false,
    step: "clone",
  });
  t.is(
    parseBuildResult(JSON.stringify({ ok: true, image: "reg/x:latest", digest: "x" })),
    undefined,
    "an image not pinned by digest is no result",
  );
  t.is(parseBuildResult("Error: something\nat line"), undefined);
  t.is(parseBuildResult(undefined), undefined);
});

test("a release command's failure: its exit code and last lines; an image without a shell in words a user can act on; a timeout", (t) => {
  const failed = { done: true, ok: false, reason: "Failed", message: "exited with code 3" } as const;
  const lines = Array.from({ length: 20 }, (_, i) => `line ${i + 1}`).join("\n");
  t.deepEqual(releaseFailure(failed, { exitCode: 3, message: `${lines}\n` }), {
    reason: "ReleaseCommandFailed",
    message: `The release command exited with code 3: ${Array.from({ length: 15 }, (_, i) => `line ${i + 6}`).join("\n")}`,
  });
  t.deepEqual(releaseFailure(failed, { exitCode: 1 }), {
    reason: "ReleaseCommandFailed",
    message: "The release command exited with code 1",
  });
  // what runc says when the image (a Go app's, by detection: FROM scratch) has no /bin/sh
  const runc =
    'failed to create containerd task: failed to create shim task: OCI runtime create failed: runc create failed: unable to start container process: error during container init: exec: "/bin/sh": stat /bin/sh: no such file or directory';
  const noShell = releaseFailure(failed, { exitCode: 128, message: runc });
  t.is(noShell.reason, "ReleaseCommandNoShell");
  t.regex(noShell.message, /^The release command cannot run: the image has no shell \(\/bin\/sh\).*Dockerfile \(dockerfilePath\)/);
  t.is(
    releaseFailure(failed, { exitCode: 127, message: "sh: 1: migrate: not found" }).reason,
    "ReleaseCommandFailed",
    "a command the shell cannot find is the command's failure",
  );
  t.deepEqual(
    releaseFailure(
      { done: true, ok: false, reason: "DeadlineExceeded", message: "Job was active longer than specified deadline" },
      { exitCode: 137 },
    ),
    { reason: "ReleaseCommandTimeout", message: "DeadlineExceeded: Job was active longer than specified deadline" },
  );
  t.deepEqual(
    releaseFailure(
      { done: true, ok: false, reason: "BackoffLimitExceeded", message: "Job has reached the specified backoff limit" },
      undefined,
    ),
    { reason: "ReleaseCommandFailed", message: "BackoffLimitExceeded: Job has reached the specified backoff limit" },
  );
});

test("a Git App's status tells its releases: building, build_failed with the old one serving, the commit in latestDeployment", (t) => {
  const spec = AppSpec.parse({ name: "Web", slug: "web", gitRepoUrl: "https://git.example/r.git" });
  const base = { generation: 1, old: undefined, now: new Date("2026-02-01T00:00:00Z"), cfg: { baseDomain: "apps.test" } };
  const first = computeStatus({ ...base, spec, releases: { newest: rel(1, "building", {}, { buildStartedAt: "2026-02-01T00:00:00Z" }) } });
  t.is(first.phase, "deploying");
  t.like(
    first.conditions?.find((c) => c.type === "Built"),
    { status: "False", reason: "Building" },
  );
  t.like(first.latestDeployment, { id: "web-1", status: "building", gitCommitSha: SHA, gitCommitMessage: "commit 1" });
  t.like(first.pipeline?.build, { status: "building" });

  const serving = rel(
    1,
    "succeeded",
    {},
    { stack: "node", buildStartedAt: "2026-02-01T00:00:00Z", buildFinishedAt: "2026-02-01T00:00:42Z" },
  );
  const failed = rel(2, "build_failed", {}, { failure: { step: "build", reason: "BuildFailed", message: "RUN exit 3" } });
  const running = { ...spec, image: IMG };
  const deployment = {
    metadata: { generation: 1 },
    spec: { replicas: 1 },
    status: { observedGeneration: 1, replicas: 1, updatedReplicas: 1, availableReplicas: 1, readyReplicas: 1 },
  } as k8s.V1Deployment;
  const after = computeStatus({ ...base, spec: running, deployment, releases: { serving, newest: failed } });
  t.is(after.phase, "build_failed", "the newest release failed; the serving one still runs");
  t.like(
    after.conditions?.find((c) => c.type === "Ready"),
    { status: "True" },
  );
  t.like(after.latestDeployment, { id: "web-2", status: "build_failed" });
  const ok = computeStatus({ ...base, spec: running, deployment, releases: { serving, newest: serving } });
  t.is(ok.phase, "active");
  t.like(ok.pipeline?.build, { status: "succeeded", buildpack: "node", imageTag: IMG, durationSeconds: 42 });
  t.like(ok.pipeline?.source, { lastCommitSha: SHA, lastCommitMessage: "commit 1" });
  t.like(
    ok.conditions?.find((c) => c.type === "Built"),
    { status: "True", reason: "Built" },
  );
});

test("an App's event wakes its releases (a release may reach the cache before its App)", (t) => {
  const cache = {
    list: (ns: string) => (ns === "ns" ? [rel(1), rel(2), { ...rel(3), spec: { ...rel(3).spec, appRef: { name: "other" } } }] : []),
  } as unknown as Parameters<typeof releasesOfApp>[0];
  t.deepEqual(releasesOfApp(cache)({ metadata: { name: "web", namespace: "ns" } }), [
    { namespace: "ns", name: "web-1" },
    { namespace: "ns", name: "web-2" },
  ]);
  t.deepEqual(releasesOfApp(cache)({ metadata: { name: "web", namespace: "elsewhere" } }), []);
});

test("a build log's result line: only a whole line with the prefix and the result's JSON", (t) => {
  const ok = { ok: true, image: `r/x@sha256:${"0".repeat(64)}`, digest: `sha256:${"0".repeat(64)}` };
  t.deepEqual(resultOfLine(`${RESULT_LINE_PREFIX}${JSON.stringify(ok)}`), ok);
  t.deepEqual(resultOfLine(`${RESULT_LINE_PREFIX}${JSON.stringify(ok)}\r`), ok);
  t.deepEqual(resultOfLine(`[result] ${JSON.stringify({ ok: false, step: "clone", reason: "CommitNotFound", message: "no" })}`), {
    ok: false,
    step: "clone",
    reason: "CommitNotFound",
    message: "no",
  });
  t.is(resultOfLine(`[build] #5 ${RESULT_LINE_PREFIX}${JSON.stringify(ok)}`), undefined, "a build step's output");
  t.is(resultOfLine("[result] ok: r/x@sha256:… (dockerfile)"), undefined, "the line for people");
  t.is(resultOfLine(`${RESULT_LINE_PREFIX}${JSON.stringify({ ...ok, image: "r/x:latest" })}`), undefined, "an image not pinned by digest");
});

test("build slots: a workspace runs at most its number of builds at once; queued releases start oldest first", (t) => {
  const rel = (name: string, phase: string | undefined, created: string, o: { image?: string; ns?: string } = {}) =>
    ({
      apiVersion: "berth.dev/v1alpha1",
      kind: "Release",
      metadata: { name, namespace: o.ns ?? "ws", uid: name, creationTimestamp: created },
      spec: {
        appRef: { name: "a" },
        sequence: 1,
        trigger: "push",
        ...(o.image ? { image: o.image } : { git: { repoUrl: "https://g/r.git", branch: "main", commitSha: "a".repeat(40) } }),
      },
      ...(phase ? { status: { phase } } : {}),
    }) as unknown as ReleaseObject;
  const b1 = rel("b1", "building", "2026-11-26T10:00:00Z"),
    b2 = rel("b2", "building", "2026-11-26T10:00:01Z");
  const q1 = rel("q1", "queued", "2026-11-26T10:00:02Z"),
    q2 = rel("q2", undefined, "2026-11-26T10:00:03Z");
  t.deepEqual(buildSlot(q1, [b1, b2, q1, q2], 2), { start: false, running: 2, ahead: 0 }, "two builds run: the third waits");
  t.deepEqual(buildSlot(q2, [b1, b2, q1, q2], 2), { start: false, running: 2, ahead: 1 });
  const done = rel("b1", "succeeded", "2026-11-26T10:00:00Z");
  t.deepEqual(buildSlot(q1, [done, b2, q1, q2], 2), { start: true }, "a slot frees: the oldest queued starts");
  t.deepEqual(buildSlot(q2, [done, b2, q1, q2], 2), { start: false, running: 1, ahead: 1 }, "the younger one still waits its turn");
  t.deepEqual(buildSlot(q2, [done, b2, q1, q2], 3), { start: true });
  const rollback = rel("r1", "queued", "2026-11-26T09:00:00Z", { image: "reg/x@sha256:00" });
  t.deepEqual(buildSlot(q1, [done, b2, rollback, q1], 2), { start: true }, "a rollback builds nothing and takes no slot");
});
