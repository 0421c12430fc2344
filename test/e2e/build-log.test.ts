// The release controller's early read of a build's result (operator/release/build-log.ts), on the
// real node under the operator's own ServiceAccount: a pod that prints build-log lines, then the
// result line, then keeps running (as a build pod does between its last line and the kubelet's
// report of its exit). The result is read off the followed log while the container still runs;
// lines that only contain the prefix further in (a build step's output) are not results.
import test from "ava";
import type * as k8s from "@kubernetes/client-node";
import { IMAGES } from "../../hack/images.ts";
import { REAL_NODE_SELECTOR, REAL_NODE_TOLERATIONS } from "../../hack/lib/local-values.ts";
import { loadKubeConfig } from "../../kube/client.ts";
import { KubeRest } from "../../kube/transport.ts";
import { BuildLogs } from "../../operator/release/build-log.ts";
import type { Request } from "../../operator/runtime/controller.ts";
import { need } from "../helpers/e2e.ts";
import { bindOperatorWorkspaceRole, identity } from "../helpers/identities.ts";
import { deleteNamespace, eventually, kube, testNamespace } from "../helpers/kube.ts";

const REGISTRY = need("BERTH_REGISTRY");
const k = kube();
let ns = "";

test.before(async () => {
  ns = await testNamespace(k, "e2e-buildlog");
  // the operator reads build logs only where the API binds its workspace role: as in a workspace
  await bindOperatorWorkspaceRole(ns);
});
test.after.always(async () => {
  if (ns) await deleteNamespace(k, ns);
});

const DIGEST = `sha256:${"ab".repeat(32)}`;
const RESULT = {
  ok: true,
  image: `${REGISTRY}/apps/x/site@${DIGEST}`,
  digest: DIGEST,
  tag: "0123456789ab",
  stack: "dockerfile",
  commitMessage: "first",
  cloneMs: 5,
  buildMs: 9,
};

/** A pod on the real node whose container prints `lines` (one per 100 ms), then sleeps. */
async function printer(name: string, lines: string[]): Promise<k8s.V1Pod> {
  const script = `const l = ${JSON.stringify(lines)}; let i = 0; const t = setInterval(() => { if (i < l.length) console.log(l[i++]); else clearInterval(t); }, 100); setTimeout(() => {}, 600000);`;
  await k.core.createNamespacedPod({
    namespace: ns,
    body: {
      metadata: { name },
      spec: {
        restartPolicy: "Never",
        automountServiceAccountToken: false,
        enableServiceLinks: false,
        terminationGracePeriodSeconds: 0,
        nodeSelector: { ...REAL_NODE_SELECTOR },
        tolerations: REAL_NODE_TOLERATIONS.map((x) => ({ ...x })),
        securityContext: { runAsNonRoot: true, runAsUser: 10001 },
        containers: [{ name: "build", image: `${REGISTRY}/${IMAGES.node.name}:${IMAGES.node.tag}`, command: ["node", "-e", script] }],
      },
    },
  });
  return eventually(
    `${name} to run`,
    async () => {
      const p = await k.core.readNamespacedPod({ namespace: ns, name });
      return p.status?.containerStatuses?.[0]?.state?.running ? p : undefined;
    },
    120_000,
  );
}

test("the result line is read while the build pod runs, under the operator's RBAC; a forged line is not a result; forget ends the stream", async (t) => {
  const id = await identity("operator");
  const woken: Request[] = [];
  const logs = new BuildLogs(new KubeRest(loadKubeConfig(id.kubeconfig)), (r) => woken.push(r));
  const release = { namespace: ns, name: "site-1" };
  try {
    const pod = await printer("site-1-build", [
      "[clone] fetching 0123456789ab from http://git/site.git",
      `[build] #5 [result] ${JSON.stringify({ ...RESULT, image: `evil@${DIGEST}` })}`,
      `[result] ok: ${RESULT.image} (dockerfile; clone 5 ms, build 9 ms)`,
      `[result] ${JSON.stringify(RESULT)}`,
    ]);
    t.is(logs.result(pod, release), undefined, "nothing yet: the first ask starts following");
    await eventually("the result to be read", () => Promise.resolve(woken.length > 0), 60_000);
    t.deepEqual(woken, [release], "the release is woken once");
    t.deepEqual(logs.result(pod, release), RESULT as unknown);
    const now = await k.core.readNamespacedPod({ namespace: ns, name: pod.metadata!.name! });
    t.truthy(now.status?.containerStatuses?.[0]?.state?.running, "read while the container still runs");
    logs.forget(pod.metadata!.uid);
    t.is(logs.size, 0);
  } finally {
    logs.stop();
  }
});

test("a result forgotten and its pod followed anew: the first stream's end does not time out the second", async (t) => {
  const id = await identity("operator");
  const woken: Request[] = [];
  const logs = new BuildLogs(new KubeRest(loadKubeConfig(id.kubeconfig)), (r) => woken.push(r), { resultTtlMs: 500 });
  const release = { namespace: ns, name: "again-1" };
  try {
    const pod = await printer("again-1-build", [`[result] ${JSON.stringify(RESULT)}`]);
    logs.result(pod, release);
    await eventually("the result to be read", () => Promise.resolve(woken.length > 0), 60_000);
    logs.forget(pod.metadata!.uid); // ends the first stream
    logs.result(pod, release); // the pod still runs: followed again
    t.is(logs.size, 1);
    await eventually("the result to be read again", () => Promise.resolve(woken.length > 1), 60_000);
    await new Promise((r) => setTimeout(r, 1500)); // three times the first stream's would-be expiry
    t.is(logs.size, 1, "the second follow is still there");
    t.deepEqual(logs.result(pod, release), RESULT as unknown);
  } finally {
    logs.stop();
  }
});

test("a pod whose log never carries a result gives none, and a pod not yet running is not followed", async (t) => {
  const id = await identity("operator");
  const woken: Request[] = [];
  const logs = new BuildLogs(new KubeRest(loadKubeConfig(id.kubeconfig)), (r) => woken.push(r));
  try {
    const pod = await printer("quiet-1-build", ["[clone] fetching", "[result] failed at build: BuildFailed: a build step failed."]);
    t.is(
      logs.result(
        {
          ...pod,
          status: { containerStatuses: [{ ...pod.status!.containerStatuses![0]!, state: { waiting: { reason: "ContainerCreating" } } }] },
        },
        { namespace: ns, name: "quiet-1" },
      ),
      undefined,
    );
    t.is(logs.size, 0, "not followed before it runs");
    logs.result(pod, { namespace: ns, name: "quiet-1" });
    t.is(logs.size, 1);
    await new Promise((r) => setTimeout(r, 2000));
    t.deepEqual(woken, []);
    t.is(logs.result(pod, { namespace: ns, name: "quiet-1" }), undefined);
  } finally {
    logs.stop();
  }
  t.is(logs.size, 0, "stop ends every stream");
});
