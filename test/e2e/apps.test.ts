// Services that really run: Apps of the sample image on the real node (containerd +
// kubelet, hack/lib/realnode.sh), created through the REST API, reconciled by the operator under
// its ServiceAccount, served through the real ingress (Traefik) and reporting traces from inside
// the pod. Every assertion is about what a user sees: a status that means pods are Ready, answers
// through the ingress, traces in the governance API, a variable set through the API read back from
// the service after its rollout, a failure with a reason to act on.
import test from "ava";
import type * as k8s from "@kubernetes/client-node";
import { API_VERSION } from "../../crds/schemas.ts";
import { ENV_HASH_ANNOTATION } from "../../crds/app.ts";
import { KubeClient, type KubeObject } from "../../kube/client.ts";
import type { TestApi } from "../helpers/api.ts";
import { viaIngress as ingressRequest, type Answer, type IngressRequest } from "../helpers/ingress.ts";
import { eventually, kube } from "../helpers/kube.ts";
import { need, startOnNode, type OnNode } from "../helpers/e2e.ts";

const INGRESS = need("BERTH_INGRESS_URL");
const SAMPLE = need("BERTH_SAMPLE_IMAGE");
const REGISTRY = need("BERTH_REGISTRY");
const NODE_NAME = need("BERTH_NODE_NAME");
const DOMAIN = "apps.e2e.local";

const k = kube();
const client = new KubeClient(k.kc);
let api: TestApi;
let node: OnNode | undefined;

test.before(async () => {
  node = await startOnNode({ domain: DOMAIN });
  api = node.api;
});
test.after.always(async () => {
  await node?.stop();
});

const apps = () => `/workspaces/${api.workspaceId}/apps`;
type App = KubeObject & {
  status?: {
    phase?: string;
    observedGeneration?: number;
    conditions?: { type: string; status: string; reason: string; message: string }[];
  };
};
const appCr = (id: string) => client.get<App>({ apiVersion: API_VERSION, kind: "App", namespace: api.namespace, name: id });
const podsOf = async (id: string) =>
  (await k.core.listNamespacedPod({ namespace: api.namespace, labelSelector: `berth.dev/app=${id}` })).items.filter(
    (p) => !p.metadata?.deletionTimestamp,
  );
const isReady = (p: k8s.V1Pod) => p.status?.conditions?.some((c) => c.type === "Ready" && c.status === "True") ?? false;

/** Waits for the App's status phase (for its current generation) through the REST API. */
async function phase(id: string, want: string, timeoutMs = 120_000): Promise<App> {
  return eventually(
    `${id} to be ${want}`,
    async () => {
      const [r, cr] = await Promise.all([api.fetchJson("GET", `${apps()}/${id}`), appCr(id)]);
      return r.body?.status === want && cr?.status?.observedGeneration === cr?.metadata.generation ? cr : undefined;
    },
    timeoutMs,
    500,
  );
}

/** A request through the ingress for <slug>.<domain>. */
const viaIngress = (slug: string, path = "/", opts: IngressRequest = {}): Promise<Answer> =>
  ingressRequest(INGRESS, `${slug}.${DOMAIN}`, path, opts);

test.serial(
  "an App of the sample image is active only once its pod really runs Ready on the real node, and the ingress serves it",
  async (t) => {
    const r = await api.fetchJson("POST", apps(), {
      body: { name: "Hello", slug: "hello", image: SAMPLE, port: 8080, visibility: "public" },
    });
    t.is(r.status, 201, r.text);
    await phase("hello", "active");
    const pods = await podsOf("hello");
    t.is(pods.length, 1);
    t.is(pods[0]!.spec?.nodeName, NODE_NAME, "scheduled on the real node");
    t.true(isReady(pods[0]!), "the kubelet reports the pod Ready: its readiness probe reached the process");
    const res = await eventually(
      "the ingress to route hello",
      async () => {
        const x = await viaIngress("hello");
        return x.status === 200 ? x : undefined;
      },
      30_000,
    );
    t.regex(res.text, new RegExp(`^Hello from Berth's sample service, version \\d+, answered by ${pods[0]!.metadata!.name}`));
    t.is((await viaIngress("nobody")).status, 404, "an unknown host is not routed");
  },
);

test.serial(
  "/chat inside the pod produces a trace with guard evaluations, visible through the governance API for that app only",
  async (t) => {
    const res = await viaIngress("hello", "/chat", { method: "POST", json: { message: "What is our refund policy?" } });
    t.is(res.status, 200, res.text);
    const gov = `/workspaces/${api.workspaceId}/governance/apps/hello`;
    const list = await eventually(
      "the trace to arrive",
      async () => {
        const l = await api.fetchJson("GET", `${gov}/traces`);
        return l.body?.total >= 1 ? l : undefined;
      },
      30_000,
    );
    const detail = await api.fetchJson("GET", `${gov}/traces/${list.body.data[0].traceId}`);
    t.is(detail.status, 200, detail.text);
    t.regex(detail.body.prompt, /refund policy/);
    t.true(detail.body.guardEvaluations.length > 0, "guards ran on the trace");
    const other = await api.createWorkspace("other");
    t.is(
      (await api.fetchJson("GET", `/workspaces/${other.workspaceId}/governance/apps/hello/traces`, { key: other.apiKey })).status,
      404,
      "another workspace sees nothing",
    );
  },
);

test.serial("a variable set through the API reaches the service by a rollout; unset, it is gone after the next one", async (t) => {
  const hash = async () =>
    (await k.apps.readNamespacedDeployment({ name: "hello", namespace: api.namespace })).spec?.template.metadata?.annotations?.[
      ENV_HASH_ANNOTATION
    ];
  /** Every pod of the App runs the Deployment's current template, Ready: the rollout is over. */
  const rolledOut = (want: string) =>
    eventually(
      `the rollout of env hash ${want}`,
      async () => {
        const pods = await podsOf("hello");
        return pods.length > 0 && pods.every((p) => p.metadata?.annotations?.[ENV_HASH_ANNOTATION] === want && isReady(p));
      },
      180_000,
      1000,
    );
  const greeting = () => viaIngress("hello", "/env/SAMPLE_GREETING");
  /**
   * Three answers in a row through the ingress are `want`. Right after a rollout the ingress may
   * still try the old pod's address for a moment (no answer): that is waited out, never counted.
   */
  const steadily = (what: string, want: (a: Answer) => boolean) =>
    eventually(
      what,
      async () => {
        for (let i = 0; i < 3; i++) if (!want(await greeting())) return false;
        return true;
      },
      60_000,
      1000,
    );
  const before = await hash();
  t.is((await greeting()).status, 404, "not set yet");

  const r = await api.fetchJson("PUT", `${apps()}/hello/env/SAMPLE_GREETING`, { body: { value: "Hej från Berth", secret: false } });
  t.is(r.status, 201, r.text);
  const set = await eventually(
    "a new pod template",
    async () => {
      const h = await hash();
      return h && h !== before ? h : undefined;
    },
    30_000,
  );
  await rolledOut(set);
  await phase("hello", "active");
  await steadily("every answer to carry the variable", (a) => a.status === 200 && a.text === "Hej från Berth");
  t.like(await greeting(), { status: 200, text: "Hej från Berth" });

  t.is((await api.fetchJson("DELETE", `${apps()}/hello/env/SAMPLE_GREETING`)).status, 204);
  const unset = await eventually(
    "another pod template",
    async () => {
      const h = await hash();
      return h && h !== set ? h : undefined;
    },
    30_000,
  );
  await rolledOut(unset);
  await phase("hello", "active");
  await steadily("no answer to carry the variable", (a) => a.status === 404);
  t.is((await greeting()).status, 404, "gone");
});

test.serial("scaling changes the number of processes answering through the ingress", async (t) => {
  const r = await api.fetchJson("PATCH", `${apps()}/hello`, { body: { minReplicas: 2, maxReplicas: 2 } });
  t.is(r.status, 200, r.text);
  await eventually("2 ready pods", async () => (await podsOf("hello")).filter(isReady).length === 2, 120_000);
  await phase("hello", "active");
  const answered = new Set<string>();
  await eventually(
    "both pods to answer",
    async () => {
      for (let i = 0; i < 10; i++) answered.add(/answered by (\S+)/.exec((await viaIngress("hello")).text)?.[1] ?? "");
      return answered.size >= 2;
    },
    30_000,
  );
  t.deepEqual([...answered].sort(), (await podsOf("hello")).map((p) => p.metadata!.name!).sort());
});

test.serial("soft delete stops the processes and the route; resume starts them again", async (t) => {
  t.is((await api.fetchJson("DELETE", `${apps()}/hello`)).status, 204);
  await phase("hello", "disabled");
  await eventually("no pods", async () => (await podsOf("hello")).length === 0, 60_000);
  await eventually("the route to go", async () => (await viaIngress("hello")).status === 404, 30_000);
  const resumed = await api.fetchJson("POST", `${apps()}/hello/resume`);
  t.is(resumed.status, 200, resumed.text);
  await phase("hello", "active");
  const res = await eventually(
    "served again",
    async () => {
      const x = await viaIngress("hello");
      return x.status === 200 ? x : undefined;
    },
    30_000,
  );
  t.regex(res.text, /^Hello from Berth's sample service/);
});

test.serial(
  "an image that cannot be pulled turns the App failed with a reason a user can act on, and the previous release keeps serving",
  async (t) => {
    const bad = `${REGISTRY}/berth/does-not-exist:1`;
    t.is((await api.fetchJson("PATCH", `${apps()}/hello`, { body: { image: bad } })).status, 200);
    await phase("hello", "failed");
    // The reason as the App reports it once the pull has failed (read until then: the phase and the
    // condition come from two reads, and the kubelet reports the pull's first attempt first).
    const ready = await eventually(
      "the pull failure as the Ready reason",
      async () => {
        const c = (await appCr("hello"))?.status?.conditions?.find((x) => x.type === "Ready");
        return c && /^(ErrImagePull|ImagePullBackOff)$/.test(c.reason) ? c : undefined;
      },
      60_000,
    );
    t.regex(ready.reason, /^(ErrImagePull|ImagePullBackOff)$/);
    t.regex(ready.message, /does-not-exist.*check its name and tag/s);
    t.is((await viaIngress("hello")).status, 200, "the running release was not stopped by the failed rollout");
    t.is((await api.fetchJson("PATCH", `${apps()}/hello`, { body: { image: SAMPLE } })).status, 200);
    await phase("hello", "active");
  },
);

test.serial(
  "a release asking for more CPU than any node has waits for the scheduler and says why; the previous release keeps serving",
  async (t) => {
    const before = (await api.fetchJson("GET", `${apps()}/hello`)).body as { cpuLimitMillicores: number };
    t.true(before.cpuLimitMillicores < 2000);
    t.is((await api.fetchJson("PATCH", `${apps()}/hello`, { body: { cpuLimitMillicores: 8000 } })).status, 200);
    try {
      const ready = await eventually(
        "the scheduler's refusal as the Ready reason",
        async () => {
          const cr = await appCr("hello");
          const c = cr?.status?.conditions?.find((x) => x.type === "Ready");
          return cr?.status?.observedGeneration === cr?.metadata.generation && c?.reason === "Unschedulable" ? c : undefined;
        },
        60_000,
      );
      t.regex(ready.message, /^\d+\/\d+ replicas ready\. Pod hello-[a-z0-9-]+ is waiting for a node with room for it: .*Insufficient cpu/);
      t.is((await api.fetchJson("GET", `${apps()}/hello`)).body?.status, "deploying", "waiting is not failing: room may come");
      const events = (
        await k.core.listNamespacedEvent({
          namespace: api.namespace,
          fieldSelector: "involvedObject.kind=App,involvedObject.name=hello,reason=Unschedulable",
        })
      ).items;
      t.is(events[0]?.type, "Warning", "kubectl describe app tells it");
      t.is((await viaIngress("hello")).status, 200, "the running release keeps serving");
    } finally {
      t.is((await api.fetchJson("PATCH", `${apps()}/hello`, { body: { cpuLimitMillicores: before.cpuLimitMillicores } })).status, 200);
    }
    await phase("hello", "active");
  },
);

test.serial("a container that keeps exiting turns the App failed with CrashLoopBackOff", async (t) => {
  // The Node.js base image runs `node` with no script: with no terminal it exits at once, again and again.
  const r = await api.fetchJson("POST", apps(), {
    body: { name: "Crash", slug: "crash", image: `${REGISTRY}/berth/node:v1`, type: "worker" },
  });
  t.is(r.status, 201, r.text);
  await phase("crash", "failed", 180_000);
  // Read until the CR shows it too: between back-offs the container runs for a moment, and the App
  // reads as rolling out then (the API's answer and the CR are two reads; see the note in
  // docs/services.md on crash loops).
  const ready = await eventually(
    "CrashLoopBackOff as the Ready reason",
    async () => {
      const c = (await appCr("crash"))?.status?.conditions?.find((x) => x.type === "Ready");
      return c?.reason === "CrashLoopBackOff" ? c : undefined;
    },
    120_000,
  );
  t.regex(ready.message, /keeps exiting/);
});

test.serial("pipeline-state reports the runtime's CPU and memory from the metrics API", async (t) => {
  const runtime = await eventually(
    "usage in pipeline-state",
    async () => {
      const r = await api.fetchJson("GET", `${apps()}/hello/pipeline-state`);
      return r.body?.runtime?.memoryUsageMi > 0 ? r.body.runtime : undefined;
    },
    90_000,
    2000,
  );
  t.true(runtime.cpuUsageMillicores >= 0);
  t.true(runtime.memoryUsageMi > 5 && runtime.memoryUsageMi < 512, `${runtime.memoryUsageMi} MiB for a small Node.js service`);
});

test.serial("the autoscaler is real: burning CPU raises the replicas above minReplicas, and they fall back when it stops", async (t) => {
  const r = await api.fetchJson("POST", apps(), {
    body: {
      name: "Burner",
      slug: "burner",
      image: SAMPLE,
      minReplicas: 1,
      maxReplicas: 3,
      cpuTargetUtilization: 50,
      cpuLimitMillicores: 100,
      visibility: "public",
    },
  });
  t.is(r.status, 201, r.text);
  await phase("burner", "active", 240_000); // a loaded 2-core machine starts pods slowly
  const replicas = async () => (await k.apps.readNamespacedDeployment({ name: "burner", namespace: api.namespace })).spec?.replicas ?? 0;
  // Two bounded loops of CPU-burning requests through the ingress, until the autoscaler reacts.
  let burning = true;
  const deadline = Date.now() + 150_000;
  const burn = async () => {
    while (burning && Date.now() < deadline) await viaIngress("burner", "/burn?ms=2000").catch(() => undefined);
  };
  const loops = [burn(), burn()];
  try {
    await eventually("more than one replica", async () => (await replicas()) > 1, 150_000, 2000);
  } finally {
    burning = false;
    await Promise.all(loops);
  }
  t.true((await replicas()) > 1);
  await eventually("back to one replica", async () => (await replicas()) === 1, 180_000, 2000);
  t.is(await replicas(), 1);
});
