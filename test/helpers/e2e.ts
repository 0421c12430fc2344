// What the end-to-end tests (test/e2e/) read from the environment ./hack/test prepares, and the
// API and operator they run for Apps on the real node.
import { KubeClient, type KubeObject } from "../../kube/client.ts";
import type { RunningOperator } from "../../operator/main.ts";
import { REAL_NODE_SELECTOR, REAL_NODE_TOLERATIONS } from "../../hack/lib/local-values.ts";
import { startApi, type TestApi } from "./api.ts";
import { lockHostApiPort } from "./host-api-lock.ts";
import { RELEASE_NAMESPACE } from "./identities.ts";
import { kube } from "./kube.ts";
import { startTestOperator } from "./operator.ts";

/** An environment variable ./hack/test sets for the end-to-end tests; a clear error outside it. */
export function need(name: string): string {
  const v = process.env[name];
  if (!v)
    throw new Error(
      `${name} is not set: run the end-to-end tests through ./hack/test (it starts the real node, its registry and BuildKit, and builds the sample image)`,
    );
  return v;
}

/** The cluster-local name pods reach the tests' API by (berth-api-e2e.<release namespace>). */
export const E2E_API_HOST = `berth-api-e2e.${RELEASE_NAMESPACE}.svc.cluster.local`;

export interface OnNode {
  api: TestApi;
  op: RunningOperator;
  stop(): Promise<void>;
}

/**
 * The tests' API and operator for Apps on the real node: the API on the one host port the node's
 * bridge forwards (BERTH_HOST_API_PORT; end-to-end files take turns on it), reached by pods as
 * E2E_API_HOST (a Service whose endpoint is the node's side of the bridge), and an operator that
 * places workloads on the real node as Berth's configuration does, provisioning governance through
 * that API unless `governance` is false.
 */
export async function startOnNode(o: {
  domain: string;
  governance?: boolean;
  apiEnv?: Record<string, string>;
  operatorEnv?: Record<string, string>;
}): Promise<OnNode> {
  const port = need("BERTH_HOST_API_PORT");
  const client = new KubeClient(kube().kc);
  const release = await lockHostApiPort();
  let api: TestApi | undefined;
  try {
    api = await startApi({ env: { BERTH_API_PORT: port, BERTH_BASE_DOMAIN: o.domain, BERTH_GOVERNANCE_HOST: E2E_API_HOST, ...o.apiEnv } });
    await client.apply(
      {
        apiVersion: "v1",
        kind: "Service",
        metadata: { name: "berth-api-e2e", namespace: RELEASE_NAMESPACE },
        spec: { ports: [{ name: "http", port: 80, protocol: "TCP" }] },
      },
      "test",
    );
    await client.apply(
      {
        apiVersion: "discovery.k8s.io/v1",
        kind: "EndpointSlice",
        metadata: { name: "berth-api-e2e", namespace: RELEASE_NAMESPACE, labels: { "kubernetes.io/service-name": "berth-api-e2e" } },
        addressType: "IPv4",
        endpoints: [{ addresses: [need("BERTH_NODE_IP")], conditions: { ready: true } }],
        ports: [{ name: "http", port: Number(port), protocol: "TCP" }],
      } as unknown as KubeObject,
      "test",
    );
    const op = await startTestOperator({
      namespace: api.namespace,
      ...(o.governance === false ? {} : { apiUrl: api.url }),
      env: {
        BERTH_BASE_DOMAIN: o.domain,
        BERTH_OPERATOR_RESYNC_SECONDS: "30",
        BERTH_WORKLOAD_NODE_SELECTOR: JSON.stringify(REAL_NODE_SELECTOR),
        BERTH_WORKLOAD_TOLERATIONS: JSON.stringify(REAL_NODE_TOLERATIONS),
        ...o.operatorEnv,
      },
    });
    const running = api;
    return {
      api: running,
      op,
      stop: async () => {
        await op.stop();
        await running.stop();
        release();
      },
    };
  } catch (err) {
    await api?.stop();
    release();
    throw err;
  }
}
