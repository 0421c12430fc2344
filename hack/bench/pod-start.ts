// How long a build pod takes to start on the real node, by pod shape: N pods of the builder image
// created at once, each running the build program without its configuration (it loads, prints its
// refusal and exits); the time is the pod's create to that first line's timestamp (the container
// runtime's). Run by hand against a cluster with the real node:
//   BERTH_REAL_NODE=1 ./hack/cluster up && eval "$(BERTH_REAL_NODE=1 ./hack/cluster env)"
//   node hack/bench/pod-start.ts [--pods 10] [--rounds 3]
// Variants alternate within each round, so a noisy moment hits both.
import { parseArgs } from "node:util";
import * as k8s from "@kubernetes/client-node";
import { loadKubeConfig } from "../../kube/client.ts";
import { buildBerthImages } from "../berth-images.ts";
import { benchNamespace, dropNamespace } from "./namespaces.ts";
import { need, placement } from "./on-node.ts";
import { quantile } from "./series.ts";

const { values } = parseArgs({ options: { pods: { type: "string", default: "10" }, rounds: { type: "string", default: "3" } } });
const N = Number(values.pods);
const ROUNDS = Number(values.rounds);
const kc = loadKubeConfig(need("KUBECONFIG"));
const core = kc.makeApiClient(k8s.CoreV1Api);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

const [builder] = await buildBerthImages({
  registry: need("BERTH_REGISTRY"),
  addr: need("BERTH_BUILDKIT_ADDR"),
  components: ["builder"],
  log: () => {},
});
const image = builder!.reference;

type Variant = (c: k8s.V1Container) => Partial<k8s.V1PodSpec>;
const hardened: k8s.V1SecurityContext = { allowPrivilegeEscalation: false, runAsNonRoot: true, capabilities: { drop: ["ALL"] } };
const ro = (c: k8s.V1Container): Partial<k8s.V1PodSpec> => ({
  containers: [
    {
      ...c,
      securityContext: { ...hardened, readOnlyRootFilesystem: true },
      volumeMounts: [
        { name: "workspace", mountPath: "/workspace" },
        { name: "tmp", mountPath: "/tmp" },
      ],
    },
  ],
  volumes: [
    { name: "workspace", emptyDir: { sizeLimit: "4Gi" } },
    { name: "tmp", emptyDir: { sizeLimit: "1Gi" } },
  ],
});
const variants: Record<string, Variant> = {
  "ro root + 2 emptyDirs, no compile cache": (c) => ro({ ...c, env: [{ name: "NODE_DISABLE_COMPILE_CACHE", value: "1" }] }),
  "ro root + 2 emptyDirs": ro,
  "rw root, no volumes": (c) => ({
    containers: [
      {
        ...c,
        securityContext: { ...hardened, readOnlyRootFilesystem: false },
        resources: { ...c.resources, limits: { ...c.resources!.limits, "ephemeral-storage": "5Gi" } },
      },
    ],
  }),
};

async function once(ns: string, label: string, variant: Variant, n: number): Promise<number[]> {
  const slug = label.replace(/[^a-z]+/g, "-").replace(/^-|-$/g, "");
  const c: k8s.V1Container = {
    name: "build",
    image,
    resources: { limits: { cpu: "1", memory: "512Mi" }, requests: { cpu: "100m", memory: "256Mi" } },
  };
  const names = Array.from({ length: n }, (_, i) => `${slug}-${i}`);
  const t0 = new Map<string, number>();
  await Promise.all(
    names.map(async (name) => {
      t0.set(name, Date.now());
      await core.createNamespacedPod({
        namespace: ns,
        body: {
          metadata: { name },
          spec: {
            restartPolicy: "Never",
            automountServiceAccountToken: false,
            enableServiceLinks: false,
            terminationGracePeriodSeconds: 0,
            securityContext: {
              runAsNonRoot: true,
              runAsUser: 10001,
              runAsGroup: 10001,
              fsGroup: 10001,
              seccompProfile: { type: "RuntimeDefault" },
            },
            ...placement,
            ...variant(c),
          } as k8s.V1PodSpec,
        },
      });
    }),
  );
  const out = await Promise.all(
    names.map(async (name) => {
      for (;;) {
        const log = await core.readNamespacedPodLog({ namespace: ns, name, timestamps: true }).catch(() => "");
        const first = log.split("\n").find(Boolean);
        if (first) return Date.parse(first.slice(0, first.indexOf(" "))) - t0.get(name)!;
        await sleep(100);
      }
    }),
  );
  await core.deleteCollectionNamespacedPod({ namespace: ns, gracePeriodSeconds: 0 });
  for (;;) {
    if ((await core.listNamespacedPod({ namespace: ns })).items.length === 0) break;
    await sleep(200);
  }
  await sleep(5000); // the node's teardown of these pods (runtime, network) is not the next batch's
  return out;
}

const ns = await benchNamespace(core, "podstart");
try {
  const all = new Map<string, number[]>(Object.keys(variants).map((k) => [k, []]));
  for (let r = 1; r <= ROUNDS; r++) {
    const order = Object.entries(variants);
    if (r % 2 === 0) order.reverse();
    for (const [label, v] of order) {
      const xs = await once(ns, label, v, N);
      all.get(label)!.push(...xs);
      console.log(`round ${r} ${label.padEnd(40)} p50 ${quantile(xs, 0.5)} ms, max ${Math.max(...xs)} ms`);
    }
  }
  for (const [label, xs] of all)
    console.log(`${N} pods at once, ${label.padEnd(40)} p50 ${quantile(xs, 0.5)} ms, p99 ${quantile(xs, 0.99)} ms`);
} finally {
  await dropNamespace(core, ns);
}
