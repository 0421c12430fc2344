// Shared Kubernetes plumbing for the API and the operator. The objects client (server-side apply,
// status, create, patch, get, delete), the transport and the error helpers live in modules that
// do not load @kubernetes/client-node (objects.ts, transport.ts, kubeconfig.ts) and are
// re-exported here; this module adds client-node's KubeConfig for code that uses the client's
// typed APIs (the API server's namespaces, TokenReviews, ...).
import * as k8s from "@kubernetes/client-node";

import { ObjectClient } from "./objects.ts";
export {
  API_FIELD_MANAGER,
  ObjectClient,
  OPERATOR_FIELD_MANAGER,
  resourcePath,
  type KubeList,
  type KubeObject,
  type ObjectRef,
} from "./objects.ts";
export { KubeApiError, KubeRest, errorMessage, isConflict, isGone, isInvalid, isNotFound, statusCode, type KubeAuth } from "./transport.ts";
export { LeanKubeConfig, loadLeanKubeConfig } from "./kubeconfig.ts";

/**
 * A KubeConfig whose API clients share one connection pool. client-node builds a new undici Agent
 * for every API call (its agent cache serves only the WebSocket path), so each request paid a TLS
 * handshake and left a pool behind: the operator held ~550 MiB with 500 Apps. Headers and
 * credentials are still applied per request by the parent; only the dispatcher is reused, and it is
 * replaced every few minutes so that rotated client certificates and CA bundles are picked up.
 */
export class PooledKubeConfig extends k8s.KubeConfig {
  static readonly ROTATE_MS = 5 * 60_000;
  #pool: { key: string; dispatcher: NonNullable<ReturnType<k8s.RequestContext["getDispatcher"]>>; since: number } | undefined;

  override async applySecurityAuthentication(context: k8s.RequestContext): Promise<void> {
    await super.applySecurityAuthentication(context); // sets headers and a fresh, still unconnected Agent
    const fresh = context.getDispatcher();
    if (!fresh) return; // no TLS options (plain HTTP): the global dispatcher pools already
    const key = JSON.stringify([this.getCurrentCluster()?.server, this.getCurrentUser()?.name]);
    const pool = this.#pool;
    if (pool && pool.key === key && Date.now() - pool.since < PooledKubeConfig.ROTATE_MS) {
      context.setDispatcher(pool.dispatcher);
      void fresh.close();
      return;
    }
    this.#pool = { key, dispatcher: fresh, since: Date.now() };
    if (pool) void pool.dispatcher.close(); // graceful: requests already under way finish
  }
}

export function loadKubeConfig(path?: string): k8s.KubeConfig {
  const kc = new PooledKubeConfig();
  if (path) kc.loadFromFile(path);
  else kc.loadFromCluster();
  return kc;
}

/**
 * The objects client (objects.ts) plus client-node's typed API clients on the same KubeConfig, for
 * code that already loads client-node. A process that must stay small uses ObjectClient.
 */
export class KubeClient extends ObjectClient {
  readonly kc: k8s.KubeConfig;
  readonly objects: k8s.KubernetesObjectApi;
  readonly core: k8s.CoreV1Api;

  constructor(kc: k8s.KubeConfig) {
    super(kc);
    this.kc = kc;
    this.objects = k8s.KubernetesObjectApi.makeApiClient(kc);
    this.core = kc.makeApiClient(k8s.CoreV1Api);
  }
}
