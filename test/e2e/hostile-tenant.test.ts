// Workspace B against workspace A on the real node (docs/security.md): what B's own pods can reach. Each
// attack is first shown working with the protection removed, so that no test passes by accident,
// then refused with it in place, while A's service keeps answering through the ingress.
//
// B's pod here is a pod of B's namespace made directly (the sample image, under the namespace's
// "restricted" Pod Security): the policies select every pod of a workspace, whoever made it.
import test from "ava";
import type * as k8s from "@kubernetes/client-node";
import { BUILD_NETWORK_POLICY, NETWORK_POLICY } from "../../api/workspaces/network.ts";
import { KubeClient, type KubeObject } from "../../kube/client.ts";
import { REAL_NODE_SELECTOR, REAL_NODE_TOLERATIONS } from "../../hack/lib/local-values.ts";
import type { TestApi, TestWorkspace } from "../helpers/api.ts";
import { kubectl } from "../helpers/binaries.ts";
import { E2E_API_HOST, need, startOnNode, type OnNode } from "../helpers/e2e.ts";
import { viaIngress } from "../helpers/ingress.ts";
import { eventually, kube } from "../helpers/kube.ts";
import { Registry } from "../../hack/lib/registry.ts";
import { readRegistryKey } from "../../kube/registry-credentials.ts";
import { REGISTRY_PULL_SECRET, registryPullSecret } from "../../operator/kit/registry-pull.ts";

const INGRESS = need("BERTH_INGRESS_URL");
const SAMPLE = need("BERTH_SAMPLE_IMAGE");
const NODE_IP = need("BERTH_NODE_IP");
const NODE_PG = need("BERTH_NODE_PG_ADDR");
const BUILDKIT = new URL(need("BERTH_BUILDKIT_CLUSTER_ADDR")).host;
const DOMAIN = "hostile.e2e.local";
const REGISTRY = need("BERTH_REGISTRY");
const REGISTRY_GATE = need("BERTH_REGISTRY_GATE");
const REGISTRY_KEY = readRegistryKey(need("BERTH_REGISTRY_AUTH_KEY_FILE"));

const k = kube();
const client = new KubeClient(k.kc);
let node: OnNode | undefined;
let api: TestApi;
let b: TestWorkspace;
const ATTACKER = "attacker";

/** A connection attempt from a pod: OPEN, or why not (TIMEOUT, ECONNREFUSED, ...). */
const CONNECT = `const [h, p] = process.argv[1].split(":"); const s = require("node:net").connect({ host: h, port: Number(p), timeout: 3000 });
s.on("connect", () => { console.log("OPEN"); process.exit(0); }); s.on("timeout", () => { console.log("TIMEOUT"); process.exit(0); });
s.on("error", (e) => { console.log("ERROR " + e.code); process.exit(0); });`;
/** A GET from a pod with forged identity headers: STATUS <code> <first line>, or FAILED <code>. */
const FETCH = `fetch(process.argv[1], { headers: { "x-berth-user": "ceo@corp", "x-berth-email": "ceo@corp" }, signal: AbortSignal.timeout(4000) })
.then(async (r) => console.log("STATUS " + r.status + " " + (await r.text()).split("\\n")[0]))
.catch((e) => console.log("FAILED " + (e.cause?.code ?? e.name)));`;

async function inPod(namespace: string, pod: string, script: string, arg: string): Promise<string> {
  const r = await kubectl(["-n", namespace, "exec", pod, "-c", "main", "--", "node", "-e", script, arg]);
  if (r.code !== 0) throw new Error(`kubectl exec in ${namespace}/${pod}: ${r.stderr}`);
  return r.stdout.trim();
}
const connectFrom = (ns: string, pod: string, target: string) => inPod(ns, pod, CONNECT, target);
const fetchFrom = (ns: string, pod: string, url: string) => inPod(ns, pod, FETCH, url);

async function readyPod(namespace: string, name: string): Promise<void> {
  await eventually(
    `${namespace}/${name} to be Ready`,
    async () => {
      const p = await k.core.readNamespacedPod({ name, namespace }).catch(() => undefined);
      return p?.status?.conditions?.some((c) => c.type === "Ready" && c.status === "True") ? p : undefined;
    },
    90_000,
    500,
  );
}

/** A pod of the sample image that meets the "restricted" Pod Security Standard, idle or (listen) answering "hi" on TCP 8080. */
function samplePod(name: string, listen = false): k8s.V1Pod {
  return {
    metadata: { name, labels: { role: name } },
    spec: {
      nodeSelector: { ...REAL_NODE_SELECTOR },
      tolerations: REAL_NODE_TOLERATIONS.map((t) => ({ ...t })),
      automountServiceAccountToken: false,
      enableServiceLinks: false,
      terminationGracePeriodSeconds: 0,
      securityContext: { runAsNonRoot: true, runAsUser: 10001, runAsGroup: 10001, seccompProfile: { type: "RuntimeDefault" } },
      containers: [
        {
          name: "main",
          image: SAMPLE,
          command: [
            "node",
            "-e",
            listen
              ? "require('node:net').createServer((s) => { s.on('error', () => {}); s.end('hi'); }).listen(8080)"
              : "setInterval(() => {}, 1 << 30)",
          ],
          readinessProbe: { exec: { command: ["true"] }, periodSeconds: 1 },
          resources: { requests: { cpu: "10m", memory: "32Mi" }, limits: { cpu: "200m", memory: "128Mi" } },
          securityContext: { allowPrivilegeEscalation: false, capabilities: { drop: ["ALL"] } },
        },
      ],
    },
  };
}

const policyRef = (namespace: string, name: string) => ({ apiVersion: "networking.k8s.io/v1", kind: "NetworkPolicy", namespace, name });
async function removePolicies(namespace: string): Promise<void> {
  for (const name of [NETWORK_POLICY, BUILD_NETWORK_POLICY]) await client.delete(policyRef(namespace, name));
}

let victimIp = "";

test.before(async () => {
  // the operator of hack's registry: it writes each namespace's pull credential (docs/images.md)
  node = await startOnNode({ domain: DOMAIN, operatorEnv: { BERTH_BUILD_REGISTRY: REGISTRY } });
  api = node.api;
  b = await api.createWorkspace("tenant-b");
  // A: a service of the sample image
  const r = await api.fetchJson("POST", `/workspaces/${api.workspaceId}/apps`, {
    body: { name: "Victim", slug: "victim", image: SAMPLE, port: 8080, visibility: "public" },
  });
  if (r.status !== 201) throw new Error(r.text);
  await eventually(
    "A's service to answer through the ingress",
    async () => ((await viaIngress(INGRESS, `victim.${DOMAIN}`, "/")).status === 200 ? true : undefined),
    120_000,
    500,
  );
  const pods = (await k.core.listNamespacedPod({ namespace: api.namespace, labelSelector: "berth.dev/app=victim" })).items;
  victimIp = pods[0]!.status!.podIP!;
  await k.core.createNamespacedPod({ namespace: b.namespace, body: samplePod(ATTACKER) });
  await readyPod(b.namespace, ATTACKER);
});
test.after.always(async () => {
  await node?.stop();
});

test.serial("every workspace namespace carries Berth's NetworkPolicies: all pods, and build pods", async (t) => {
  for (const ns of [api.namespace, b.namespace]) {
    const every = await client.get<KubeObject & { spec: { podSelector: unknown; policyTypes: string[] } }>(policyRef(ns, NETWORK_POLICY));
    t.deepEqual(every?.spec.podSelector, {}, ns);
    t.deepEqual(every?.spec.policyTypes, ["Ingress", "Egress"]);
    const builds = await client.get<KubeObject & { spec: { podSelector: unknown } }>(policyRef(ns, BUILD_NETWORK_POLICY));
    t.deepEqual(builds?.spec.podSelector, { matchLabels: { "berth.dev/release-step": "build" } });
  }
});

test.serial(
  "B's pod reaches A's Service with forged X-Berth-* headers, A's pod, PostgreSQL, buildkitd and the kubelet only while the policies are gone",
  async (t) => {
    const victimUrl = `http://victim.${api.namespace}.svc.cluster.local/`;
    const targets = { victimPod: `${victimIp}:8080`, postgres: NODE_PG, buildkitd: BUILDKIT, kubelet: `${NODE_IP}:10250` };

    // the protection off: the flat network every namespace shared before the policies
    await removePolicies(api.namespace);
    await removePolicies(b.namespace);
    const open = await eventually(
      "B's pod to reach A's service with the policies gone",
      async () => {
        const out = await fetchFrom(b.namespace, ATTACKER, victimUrl);
        return out.startsWith("STATUS 200") ? out : undefined;
      },
      30_000,
      1000,
    );
    t.regex(open, /^STATUS 200 Hello from Berth's sample service/);
    for (const [what, target] of Object.entries(targets))
      t.is(await connectFrom(b.namespace, ATTACKER, target), "OPEN", `${what} without the policies`);

    // the protection on again, as the API writes it for every workspace
    const ensured = await api.services.workspaces.ensureAll();
    t.is(ensured.failed, 0);
    const closed = await eventually(
      "B's pod to be cut off from A's service",
      async () => {
        const out = await fetchFrom(b.namespace, ATTACKER, victimUrl);
        return out.startsWith("FAILED") ? out : undefined;
      },
      30_000,
      1000,
    );
    t.regex(closed, /^FAILED /);
    for (const [what, target] of Object.entries(targets))
      t.not(await connectFrom(b.namespace, ATTACKER, target), "OPEN", `${what} with the policies`);

    // what B's pods need still works: cluster DNS (the name resolved: the connection timed out, not ENOTFOUND) and Berth's API
    t.notRegex(closed, /ENOTFOUND|EAI_AGAIN/);
    t.regex(await fetchFrom(b.namespace, ATTACKER, `http://${E2E_API_HOST}/healthz`), /^STATUS 200/);
    // and A is served, through the ingress, as before
    t.is((await viaIngress(INGRESS, `victim.${DOMAIN}`, "/")).status, 200);
  },
);

test.serial("B's own pods still reach each other under the policies", async (t) => {
  await k.core.createNamespacedPod({ namespace: b.namespace, body: samplePod("peer", true) });
  await readyPod(b.namespace, "peer");
  const peer = await k.core.readNamespacedPod({ namespace: b.namespace, name: "peer" });
  t.is(await connectFrom(b.namespace, ATTACKER, `${peer.status!.podIP!}:8080`), "OPEN");
  // and A's pods do not, from B's peer either
  t.not(await connectFrom(b.namespace, "peer", `${victimIp}:8080`), "OPEN");
});

/** Copies the sample image to `name:tag` of the registry (its blobs mounted from the sample's repository). */
async function copySample(name: string, tag: string): Promise<string> {
  const reg = new Registry(REGISTRY);
  const [repo, from] = [SAMPLE.slice(REGISTRY.length + 1).split(":")[0]!, SAMPLE.split(":").pop()!];
  const manifest = await reg.getManifest(repo, from);
  const spec = JSON.parse(manifest.bytes.toString()) as { config: { digest: string }; layers: { digest: string }[] };
  for (const d of [spec.config.digest, ...spec.layers.map((l) => l.digest)])
    await reg.putBlob(name, d as `sha256:${string}`, () => reg.getBlob(repo, d as `sha256:${string}`), repo);
  await reg.putManifest(name, tag, manifest.bytes, manifest.mediaType);
  return `${REGISTRY}/${name}:${tag}`;
}

/** The pod's image pull: "pulled", or the reason and message of its waiting container (ErrImagePull, ImagePullBackOff). */
async function pullOutcome(
  namespace: string,
  name: string,
): Promise<{ pulled: true } | { pulled: false; reason: string; message: string }> {
  return eventually(
    `${namespace}/${name}'s image pull to end`,
    async () => {
      const p = await k.core.readNamespacedPod({ name, namespace });
      const s = p.status?.containerStatuses?.[0];
      if (s?.state?.running || s?.imageID) return { pulled: true as const };
      const w = s?.state?.waiting;
      if (w?.reason === "ErrImagePull" || w?.reason === "ImagePullBackOff")
        return { pulled: false as const, reason: w.reason, message: w.message ?? "" };
      return undefined;
    },
    90_000,
    500,
  );
}

test.serial(
  "B's pods pull A's workspace image only with A's credential: B's own credential and none are refused by the registry",
  async (t) => {
    // A's own image, under A's prefix, served through the operator with the credential it wrote
    const image = await copySample(`apps/${api.namespace}/private`, "v1");
    const r = await api.fetchJson("POST", `/workspaces/${api.workspaceId}/apps`, {
      body: { name: "Private", slug: "private-img", image, port: 8080, visibility: "public" },
    });
    t.is(r.status, 201, r.text);
    await eventually(
      "A's service of its own image to answer through the ingress",
      async () => ((await viaIngress(INGRESS, `private-img.${DOMAIN}`, "/")).status === 200 ? true : undefined),
      120_000,
      500,
    );
    const ours = await client.get<KubeObject & { type: string; metadata: { labels?: Record<string, string> } }>({
      apiVersion: "v1",
      kind: "Secret",
      namespace: api.namespace,
      name: REGISTRY_PULL_SECRET,
    });
    t.is(ours?.type, "kubernetes.io/dockerconfigjson");
    const aPods = (await k.core.listNamespacedPod({ namespace: api.namespace })).items.filter(
      (p) => p.spec?.containers[0]?.image === image,
    );
    t.true(aPods.length > 0);
    t.deepEqual(
      aPods[0]?.spec?.imagePullSecrets?.map((s) => s.name),
      [REGISTRY_PULL_SECRET],
    );

    // the gate itself: no token, no image
    t.is((await fetch(`http://${REGISTRY_GATE}/v2/apps/${api.namespace}/private/manifests/v1`)).status, 401);

    // B's namespace: its own credential, as the operator writes it, and (the protection off) a copy of A's
    const own = registryPullSecret(b.namespace, { registry: REGISTRY, key: REGISTRY_KEY });
    await client.apply(own, "test");
    const stolen = registryPullSecret(api.namespace, { registry: REGISTRY, key: REGISTRY_KEY });
    await client.apply({ ...stolen, metadata: { ...stolen.metadata, name: "stolen", namespace: b.namespace } }, "test");
    const thief = (name: string, secret?: string): k8s.V1Pod => {
      const pod = samplePod(name);
      pod.spec!.containers[0]!.image = image;
      if (secret) pod.spec!.imagePullSecrets = [{ name: secret }];
      return pod;
    };

    // with A's credential, B's pod runs A's image: the credential is what the registry goes by
    await k.core.createNamespacedPod({ namespace: b.namespace, body: thief("with-a-credential", "stolen") });
    t.deepEqual(await pullOutcome(b.namespace, "with-a-credential"), { pulled: true });

    // with B's own credential, or none, the registry refuses, though the image is on the node now
    for (const [name, secret] of [
      ["with-b-credential", REGISTRY_PULL_SECRET],
      ["anonymous", undefined],
    ] as const) {
      await k.core.createNamespacedPod({ namespace: b.namespace, body: thief(name, secret) });
      const outcome = await pullOutcome(b.namespace, name);
      t.false(outcome.pulled, name);
      if (!outcome.pulled) t.regex(outcome.message, /401|403|unauthorized|insufficient_scope|denied/i, name);
    }

    // A's service still answers
    t.is((await viaIngress(INGRESS, `private-img.${DOMAIN}`, "/")).status, 200);
    t.is((await viaIngress(INGRESS, `victim.${DOMAIN}`, "/")).status, 200);
  },
);
