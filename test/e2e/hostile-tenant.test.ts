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

const INGRESS = need("BERTH_INGRESS_URL");
const SAMPLE = need("BERTH_SAMPLE_IMAGE");
const NODE_IP = need("BERTH_NODE_IP");
const NODE_PG = need("BERTH_NODE_PG_ADDR");
const BUILDKIT = new URL(need("BERTH_BUILDKIT_CLUSTER_ADDR")).host;
const DOMAIN = "hostile.e2e.local";

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
  node = await startOnNode({ domain: DOMAIN });
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
