// Shared Kubernetes plumbing for the API and the operator: config loading, server-side apply,
// status writes through the status subresource, and typed errors. Thin on purpose: it wraps
// @kubernetes/client-node where the client already does the work.
import * as k8s from "@kubernetes/client-node";
import { GROUP, VERSION } from "../schemas.ts";

export type KubeObject = k8s.KubernetesObject & { metadata: k8s.V1ObjectMeta; spec?: unknown; status?: unknown };

/** Field manager of the operator: the single owner of every workload field it applies. */
export const OPERATOR_FIELD_MANAGER = "berth-operator";
/** Field manager of the REST API when it writes Apps, Domains and Shares. */
export const API_FIELD_MANAGER = "berth-api";

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

export function statusCode(err: unknown): number | undefined {
  const e = err as { code?: unknown; statusCode?: unknown };
  if (typeof e?.code === "number") return e.code;
  if (typeof e?.statusCode === "number") return e.statusCode;
  return undefined;
}
export const isNotFound = (err: unknown): boolean => statusCode(err) === 404;
export const isConflict = (err: unknown): boolean => statusCode(err) === 409;
export const isInvalid = (err: unknown): boolean => statusCode(err) === 422;

/** The API server's Status message from a client error, for logs and user-facing errors. */
export function errorMessage(err: unknown): string {
  const body = (err as { body?: unknown })?.body;
  if (typeof body === "string") {
    try { return (JSON.parse(body) as { message?: string }).message ?? body; } catch { return body; }
  }
  if (body && typeof body === "object" && "message" in body) return String((body).message);
  return err instanceof Error ? err.message : String(err);
}

export interface ObjectRef { apiVersion: string; kind: string; namespace: string; name: string }

export class KubeClient {
  readonly kc: k8s.KubeConfig;
  readonly objects: k8s.KubernetesObjectApi;
  readonly custom: k8s.CustomObjectsApi;
  readonly core: k8s.CoreV1Api;

  constructor(kc: k8s.KubeConfig) {
    this.kc = kc;
    this.objects = k8s.KubernetesObjectApi.makeApiClient(kc);
    this.custom = kc.makeApiClient(k8s.CustomObjectsApi);
    this.core = kc.makeApiClient(k8s.CoreV1Api);
  }

  /** Server-side apply: `obj` is the complete desired state of the fields this manager owns. */
  async apply<T extends KubeObject>(obj: T, fieldManager: string, force = true): Promise<T> {
    return this.objects.patch(obj, undefined, undefined, fieldManager, force, k8s.PatchStrategy.ServerSideApply);
  }

  /** Server-side apply of a Berth resource's status through the status subresource. */
  async applyStatus<T extends KubeObject>(plural: string, obj: T, fieldManager: string): Promise<T> {
    const body = { apiVersion: obj.apiVersion, kind: obj.kind, metadata: { name: obj.metadata.name, namespace: obj.metadata.namespace }, status: obj.status };
    return await this.custom.patchNamespacedCustomObjectStatus(
      { group: GROUP, version: VERSION, plural, namespace: obj.metadata.namespace!, name: obj.metadata.name!, body, fieldManager, force: true },
      k8s.setHeaderOptions("Content-Type", k8s.PatchStrategy.ServerSideApply),
    ) as T;
  }

  async create<T extends KubeObject>(obj: T, fieldManager: string): Promise<T> {
    return this.objects.create(obj, undefined, undefined, fieldManager);
  }

  /** JSON merge patch (RFC 7386): null removes a field. Optionally guarded by resourceVersion. */
  async mergePatch<T extends KubeObject>(ref: ObjectRef, patch: Record<string, unknown>, fieldManager: string): Promise<T> {
    const body = { apiVersion: ref.apiVersion, kind: ref.kind, ...patch, metadata: { ...(patch.metadata as object | undefined), name: ref.name, namespace: ref.namespace } };
    return this.objects.patch(body as T, undefined, undefined, fieldManager, undefined, k8s.PatchStrategy.MergePatch);
  }

  async get<T extends KubeObject>(ref: ObjectRef): Promise<T | undefined> {
    try {
      return await this.objects.read<T>({ apiVersion: ref.apiVersion, kind: ref.kind, metadata: { name: ref.name, namespace: ref.namespace } });
    } catch (err) {
      if (isNotFound(err)) return undefined;
      throw err;
    }
  }

  /** Deletes; returns false when it was already gone. Background propagation by default. */
  async delete(ref: ObjectRef, propagationPolicy: "Background" | "Foreground" | "Orphan" = "Background"): Promise<boolean> {
    try {
      await this.objects.delete({ apiVersion: ref.apiVersion, kind: ref.kind, metadata: { name: ref.name, namespace: ref.namespace } }, undefined, undefined, undefined, undefined, propagationPolicy);
      return true;
    } catch (err) {
      if (isNotFound(err)) return false;
      throw err;
    }
  }
}
