// Mutual TLS to buildkitd, the operator's side (docs/builds.md "mTLS"): before it creates a build
// Job, the Release reconciler copies the platform's client certificate (the Secret
// berth-buildkit-client in Berth's namespace) into the release's namespace, where the Job reads it
// by secretKeyRef. Against in-memory caches and a recording client: what it reads, what it writes
// and when it writes nothing, and how a release fails when the certificate cannot be had.
import test from "ava";
import { pino } from "pino";
import type * as k8s from "@kubernetes/client-node";
import { API_VERSION, type ReleaseStatus } from "../../../crds/schemas.ts";
import type { Informer } from "../../../kube/informer.ts";
import { FakeInformer } from "../../helpers/fake-informer.ts";
import { KubeApiError } from "../../../kube/transport.ts";
import type { KubeObject, ObjectClient, ObjectRef } from "../../../kube/objects.ts";
import type { AppObject, ReleaseObject } from "../../../operator/kit/objects.ts";
import { BUILDKIT_CLIENT_SECRET, type BuildSettings } from "../../../operator/release/builders.ts";
import { RELEASE_CONTROLLER_ACCESS, ReleaseReconciler } from "../../../operator/release/reconcile.ts";
import { rulesOf } from "../../../kube/rbac.ts";

const NOW = new Date("2026-03-01T12:00:00Z");
const SHA = "0123456789abcdef0123456789abcdef01234567";
const KEY_TEXT = "-----BEGIN PRIVATE KEY-----\nthe-client-key-material\n-----END PRIVATE KEY-----\n";
const b64 = (s: string) => Buffer.from(s).toString("base64");
const DATA = { "ca.crt": b64("ca pem"), "tls.crt": b64("cert pem"), "tls.key": b64(KEY_TEXT) };

const settings: BuildSettings = {
  builderImage: "reg/berth/berth-builder:t",
  registry: "127.0.0.1:5000",
  repositoryPrefix: "apps",
  registryInsecure: true,
  buildkitHost: "tcp://10.201.0.1:26552",
  baseImages: {},
  cpuMillicores: 1000,
  memoryMi: 2048,
  storageMi: 5120,
  timeoutSeconds: 600,
  cache: "local",
  network: "proxy",
  maxPerWorkspace: 4,
  tls: { secretNamespace: "berth-system" },
};

function rel(sequence: number): ReleaseObject {
  return {
    apiVersion: API_VERSION,
    kind: "Release",
    metadata: {
      name: `web-${sequence}`,
      namespace: "ws",
      uid: `r-${sequence}`,
      generation: 1,
      resourceVersion: "1",
      creationTimestamp: new Date(Date.UTC(2026, 0, sequence)),
      ownerReferences: [{ apiVersion: API_VERSION, kind: "App", name: "web", uid: "app-uid", controller: true }],
    },
    spec: {
      appRef: { name: "web" },
      sequence,
      trigger: "push",
      git: { repoUrl: "https://git.example/r.git", branch: "main", commitSha: SHA },
    },
    status: { phase: "queued" },
  };
}

const app: AppObject = {
  apiVersion: API_VERSION,
  kind: "App",
  metadata: { name: "web", namespace: "ws", uid: "app-uid", generation: 1 },
  spec: { name: "Web", slug: "web", gitRepoUrl: "https://git.example/r.git" },
};

type Secret = KubeObject & { data?: Record<string, string>; type?: string };

/** The API server as the reconciler sees it: Secrets by namespace/name, every call recorded. */
function world(o: { original?: Secret | undefined; inNamespace?: Secret; build?: BuildSettings } = {}) {
  const server = new Map<string, Secret>();
  const put = (x: KubeObject) => server.set(`${x.kind}/${x.metadata.namespace}/${x.metadata.name}`, x);
  const original: Secret | undefined =
    "original" in o
      ? o.original
      : { apiVersion: "v1", kind: "Secret", metadata: { name: BUILDKIT_CLIENT_SECRET, namespace: "berth-system" }, data: DATA };
  if (original) put(original);
  if (o.inNamespace) put(o.inNamespace);
  const calls: string[] = [];
  const statuses: ReleaseStatus[] = [];
  const informers = {
    releases: new FakeInformer<ReleaseObject>([rel(1), rel(2)]),
    apps: new FakeInformer<AppObject>([app]),
    jobs: new FakeInformer<KubeObject>(),
    pods: new FakeInformer<KubeObject>(),
    deployments: new FakeInformer<KubeObject>(),
    cronJobs: new FakeInformer<KubeObject>(),
    secrets: new FakeInformer<KubeObject>(),
  };
  const key = (x: { kind?: string | undefined; metadata: { namespace?: string | undefined; name?: string | undefined } }) =>
    `${x.kind}/${x.metadata.namespace}/${x.metadata.name}`;
  let rv = 100;
  const client = {
    get: (ref: ObjectRef) => {
      calls.push(`get ${ref.kind} ${ref.namespace}/${ref.name}`);
      return Promise.resolve(server.get(`${ref.kind}/${ref.namespace}/${ref.name}`));
    },
    applyNew: (x: KubeObject) => {
      calls.push(`applyNew ${x.kind} ${x.metadata.namespace}/${x.metadata.name}`);
      if (server.has(key(x))) return Promise.reject(new KubeApiError(409, { message: "already exists" }, "apply"));
      const stored = { ...x, metadata: { ...x.metadata, uid: `uid-${++rv}`, resourceVersion: String(rv) } };
      put(stored);
      return Promise.resolve(stored);
    },
    apply: (x: KubeObject) => {
      calls.push(`apply ${x.kind} ${x.metadata.namespace}/${x.metadata.name}`);
      const stored = { ...server.get(key(x)), ...x, metadata: { ...x.metadata, resourceVersion: String(++rv) } };
      put(stored);
      return Promise.resolve(stored);
    },
    applyStatus: (_plural: string, x: ReleaseObject) => {
      calls.push(`applyStatus ${x.metadata.name}`);
      statuses.push(x.status!);
      const stored = informers.releases.get("ws", x.metadata.name!)!;
      return Promise.resolve({ ...stored, status: x.status, metadata: { ...stored.metadata, resourceVersion: String(++rv) } });
    },
  } as unknown as ObjectClient;
  const reconciler = new ReleaseReconciler({
    client,
    releases: informers.releases as unknown as Informer<ReleaseObject>,
    apps: informers.apps as unknown as Informer<AppObject>,
    jobs: informers.jobs as unknown as Informer<KubeObject>,
    pods: informers.pods as unknown as Informer<KubeObject>,
    deployments: informers.deployments as unknown as Informer<KubeObject>,
    cronJobs: informers.cronJobs as unknown as Informer<KubeObject>,
    secrets: informers.secrets as unknown as Informer<KubeObject>,
    build: o.build ?? settings,
    placement: {},
    now: () => NOW,
  });
  const logs: unknown[] = [];
  const log = pino({ level: "trace" }, { write: (line: string) => void logs.push(line) });
  return {
    server,
    calls,
    statuses,
    informers,
    logs,
    secret: (namespace: string) => server.get(`Secret/${namespace}/${BUILDKIT_CLIENT_SECRET}`),
    job: (name: string) => server.get(`Job/ws/${name}`) as (k8s.V1Job & KubeObject) | undefined,
    reconcile: (name: string) => reconciler.reconcile({ namespace: "ws", name }, { signal: new AbortController().signal, log }),
  };
}

test("before the first build Job of a namespace: the original read by name, copied into the namespace, then the Job, which reads the copy", async (t) => {
  const w = world();
  await w.reconcile("web-1");
  t.deepEqual(w.calls, [
    `get Secret berth-system/${BUILDKIT_CLIENT_SECRET}`,
    `applyNew Secret ws/${BUILDKIT_CLIENT_SECRET}`,
    "applyNew Job ws/web-1-build",
    "applyStatus web-1",
  ]);
  const copy = w.secret("ws")!;
  t.deepEqual(copy.data, DATA);
  t.is(copy.type, "Opaque");
  t.like(copy.metadata.labels, { "app.kubernetes.io/managed-by": "berth", "app.kubernetes.io/component": "buildkit-client" });
  t.is(w.statuses[0]?.phase, "building");
  const env = w.job("web-1-build")!.spec!.template.spec!.containers[0]!.env!;
  t.deepEqual(env.find((e) => e.name === "BERTH_BUILDKIT_TLS_KEY")?.valueFrom, {
    secretKeyRef: { name: BUILDKIT_CLIENT_SECRET, key: "tls.key" },
  });
  t.false(JSON.stringify(w.job("web-1-build")).includes(DATA["tls.key"]), "the Job names the key, never holds it");
  t.false(
    w.logs.some((l) => String(l).includes(DATA["tls.key"]) || String(l).includes("the-client-key-material")),
    "no log line holds the key",
  );
});

test("a namespace whose copy is up to date: read, compared with the cache, nothing written but the Job", async (t) => {
  const w = world();
  await w.reconcile("web-1");
  w.informers.secrets.put(w.secret("ws")!); // the watch shows the copy
  w.calls.length = 0;
  await w.reconcile("web-2");
  t.deepEqual(w.calls, [`get Secret berth-system/${BUILDKIT_CLIENT_SECRET}`, "applyNew Job ws/web-2-build", "applyStatus web-2"]);
});

test("a rotated original: the copy is applied again before the next Job", async (t) => {
  const w = world();
  await w.reconcile("web-1");
  w.informers.secrets.put(w.secret("ws")!);
  const rotated = { ...DATA, "tls.crt": b64("new cert pem"), "tls.key": b64("new key pem") };
  w.server.set(`Secret/berth-system/${BUILDKIT_CLIENT_SECRET}`, {
    apiVersion: "v1",
    kind: "Secret",
    metadata: { name: BUILDKIT_CLIENT_SECRET, namespace: "berth-system" },
    data: rotated,
  });
  w.calls.length = 0;
  await w.reconcile("web-2");
  t.deepEqual(w.calls, [
    `get Secret berth-system/${BUILDKIT_CLIENT_SECRET}`,
    `apply Secret ws/${BUILDKIT_CLIENT_SECRET}`,
    "applyNew Job ws/web-2-build",
    "applyStatus web-2",
  ]);
  t.deepEqual(w.secret("ws")!.data, rotated);
});

test("no original, or one without the key: no Job, the release fails at build (BuilderTlsNotConfigured) saying what the platform must provide", async (t) => {
  for (const [what, original, says] of [
    ["missing", undefined, /berth-system\/berth-buildkit-client, which holds their client certificate, does not exist/],
    [
      "without tls.key",
      {
        apiVersion: "v1",
        kind: "Secret",
        metadata: { name: BUILDKIT_CLIENT_SECRET, namespace: "berth-system" },
        data: { "ca.crt": DATA["ca.crt"], "tls.crt": DATA["tls.crt"] },
      } as Secret,
      /has no tls\.key/,
    ],
  ] as const) {
    const w = world({ original });
    await w.reconcile("web-1");
    t.deepEqual(w.calls, [`get Secret berth-system/${BUILDKIT_CLIENT_SECRET}`, "applyStatus web-1"], what);
    t.like(w.statuses[0], { phase: "build_failed", failure: { step: "build", reason: "BuilderTlsNotConfigured" } }, what);
    t.regex(w.statuses[0]!.failure!.message, says, what);
    t.regex(w.statuses[0]!.failure!.message, /builder\.tls\.enabled/);
    t.is(w.job("web-1-build"), undefined, what);
  }
});

test("a Secret of that name Berth did not write: left alone, and the release fails saying so", async (t) => {
  const foreign: Secret = {
    apiVersion: "v1",
    kind: "Secret",
    metadata: { name: BUILDKIT_CLIENT_SECRET, namespace: "ws", labels: { team: "someone" } },
    data: { "tls.key": b64("theirs") },
  };
  const w = world({ inNamespace: foreign });
  await w.reconcile("web-1");
  t.deepEqual(w.calls, [
    `get Secret berth-system/${BUILDKIT_CLIENT_SECRET}`,
    `applyNew Secret ws/${BUILDKIT_CLIENT_SECRET}`,
    `get Secret ws/${BUILDKIT_CLIENT_SECRET}`,
    "applyStatus web-1",
  ]);
  t.deepEqual(w.secret("ws")!.data, foreign.data, "untouched");
  t.like(w.statuses[0], { phase: "build_failed", failure: { reason: "BuilderTlsNotConfigured" } });
  t.regex(w.statuses[0]!.failure!.message, /that Berth did not write/);
});

test("without mutual TLS: no Secret read or written, the Job as before", async (t) => {
  const w = world({ build: { ...settings, tls: undefined } });
  await w.reconcile("web-1");
  t.deepEqual(w.calls, ["applyNew Job ws/web-1-build", "applyStatus web-1"]);
  t.false(JSON.stringify(w.job("web-1-build")!.spec!.template.spec!.containers[0]!.env).includes("BERTH_BUILDKIT_TLS"), "no TLS variable");
});

test("the grants: the original read only by its name in Berth's namespace; copies applied and watched in workspace namespaces", (t) => {
  const release = rulesOf(RELEASE_CONTROLLER_ACCESS, "release").map((r) => r.rule);
  t.deepEqual(release, [{ apiGroups: [""], resources: ["secrets"], resourceNames: [BUILDKIT_CLIENT_SECRET], verbs: ["get"] }]);
  const cluster = rulesOf(RELEASE_CONTROLLER_ACCESS, "cluster").map((r) => r.rule);
  t.is(
    cluster.find((r) => r.resources.includes("secrets")),
    undefined,
    "no Secret outside the workspaces",
  );
  const workspace = rulesOf(RELEASE_CONTROLLER_ACCESS, "workspace").map((r) => r.rule);
  t.deepEqual(
    workspace.find((r) => r.resources.includes("secrets")),
    { apiGroups: [""], resources: ["secrets"], verbs: ["get", "list", "watch", "create", "patch"] },
    "never delete, never update",
  );
});
