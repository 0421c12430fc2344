// Reading and writing Kubernetes objects of any kind: server-side apply (one field manager),
// status writes through the status subresource, create, merge patch, get, delete and list. On
// transport.ts, so it does not load @kubernetes/client-node (client.ts re-exports all of this).
import type * as k8s from "@kubernetes/client-node";
import { GROUP, VERSION } from "../crds/schemas.ts";
import { KubeRest, isNotFound, type KubeAuth, type Query } from "./transport.ts";

export type KubeObject = k8s.KubernetesObject & { metadata: k8s.V1ObjectMeta; spec?: unknown; status?: unknown };
export interface KubeList<T> {
  metadata?: { resourceVersion?: string; continue?: string };
  items: T[];
}

/** Field manager of the operator: the single owner of every workload field it applies. */
export const OPERATOR_FIELD_MANAGER = "berth-operator";
/** Field manager of the REST API when it writes Apps, Domains and Shares. */
export const API_FIELD_MANAGER = "berth-api";

/** Whether `obj` has `owner` among its owners (only as its controller with `controller`). */
export function ownedBy(obj: KubeObject, owner: KubeObject, opts: { controller?: boolean } = {}): boolean {
  return (obj.metadata.ownerReferences ?? []).some((r) => r.uid === owner.metadata.uid && (!opts.controller || r.controller === true));
}

export interface ObjectRef {
  apiVersion: string;
  kind: string;
  namespace: string;
  name: string;
}

/** A resourceVersion precondition that no stored object matches (etcd revisions stay far below it). */
const NEVER_A_RESOURCE_VERSION = "18446744073709551615";

/** `/api/v1` or `/apis/<group>/<version>`. */
export function groupVersionPath(apiVersion: string): string {
  return apiVersion.includes("/") ? `/apis/${apiVersion}` : `/api/${apiVersion}`;
}

/** The API server serves no such kind (its group version, or the kind in it, is not installed). */
export class UnknownKindError extends Error {}

/**
 * A name as one segment of a request path: escaped, so that no caller's string can reach another
 * path or break the request ("." and ".." are no object's name and would).
 */
export function pathSegment(name: string): string {
  if (name === "" || name === "." || name === "..") throw new Error(`not an object name: '${name}'`);
  return encodeURIComponent(name);
}

/** The collection path of a resource, in one namespace or across all. */
export function resourcePath(o: { apiVersion: string; plural: string; namespace?: string | undefined }): string {
  const base = groupVersionPath(o.apiVersion);
  return o.namespace ? `${base}/namespaces/${pathSegment(o.namespace)}/${o.plural}` : `${base}/${o.plural}`;
}

/** The objects client on transport.ts. client.ts's KubeClient adds client-node's typed APIs to it. */
export class ObjectClient {
  readonly rest: KubeRest;
  /** apiVersion → kind → { plural, namespaced }, from discovery, once per group version. */
  private readonly discovered = new Map<string, Promise<Map<string, { plural: string; namespaced: boolean }>>>();

  constructor(kc: KubeAuth | KubeRest) {
    this.rest = KubeRest.from(kc);
  }

  /** Server-side apply: `obj` is the complete desired state of the fields this manager owns. */
  async apply<T extends KubeObject>(obj: T, fieldManager: string, force = true): Promise<T> {
    return this.rest.request<T>("PATCH", await this.objectPath(obj), {
      query: { fieldManager, ...(force ? { force: true } : {}) },
      body: obj,
      contentType: "application/apply-patch+yaml",
    });
  }

  /**
   * Server-side apply that only creates: `obj` must not exist yet. The apply carries a
   * `metadata.resourceVersion` no stored object can have, which the API server checks as a
   * precondition of an update but ignores on create, so an object that already exists, ours or
   * anyone's, is never touched: the answer is 409 Conflict. Unlike a POST, the new object's
   * fields belong to `fieldManager` as an Apply (a POST records an Update, which a later apply by
   * the same manager cannot take back: fields it drops would stay forever).
   */
  async applyNew<T extends KubeObject>(obj: T, fieldManager: string): Promise<T> {
    return this.apply({ ...obj, metadata: { ...obj.metadata, resourceVersion: NEVER_A_RESOURCE_VERSION } }, fieldManager);
  }

  /** Server-side apply of a Berth resource's status through the status subresource. */
  async applyStatus<T extends KubeObject>(plural: string, obj: T, fieldManager: string): Promise<T> {
    const body = {
      apiVersion: obj.apiVersion,
      kind: obj.kind,
      metadata: { name: obj.metadata.name, namespace: obj.metadata.namespace },
      status: obj.status,
    };
    const path = `${resourcePath({ apiVersion: `${GROUP}/${VERSION}`, plural, namespace: obj.metadata.namespace })}/${pathSegment(obj.metadata.name!)}/status`;
    return this.rest.request<T>("PATCH", path, { query: { fieldManager, force: true }, body, contentType: "application/apply-patch+yaml" });
  }

  async create<T extends KubeObject>(obj: T, fieldManager: string): Promise<T> {
    return this.rest.request<T>("POST", await this.collectionPath(obj.apiVersion!, obj.kind!, obj.metadata.namespace), {
      query: { fieldManager },
      body: obj,
    });
  }

  /** JSON merge patch (RFC 7386): null removes a field. Optionally guarded by resourceVersion. */
  async mergePatch<T extends KubeObject>(ref: ObjectRef, patch: Record<string, unknown>, fieldManager: string): Promise<T> {
    const body = {
      apiVersion: ref.apiVersion,
      kind: ref.kind,
      ...patch,
      metadata: { ...(patch.metadata as object | undefined), name: ref.name, namespace: ref.namespace },
    };
    return this.rest.request<T>("PATCH", await this.refPath(ref), {
      query: { fieldManager },
      body,
      contentType: "application/merge-patch+json",
    });
  }

  async get<T extends KubeObject>(ref: ObjectRef): Promise<T | undefined> {
    try {
      return await this.rest.request<T>("GET", await this.refPath(ref));
    } catch (err) {
      if (isNotFound(err)) return undefined;
      throw err;
    }
  }

  /** Deletes; returns false when it was already gone. Background propagation by default. */
  async delete(ref: ObjectRef, propagationPolicy: "Background" | "Foreground" | "Orphan" = "Background"): Promise<boolean> {
    try {
      await this.rest.request("DELETE", await this.refPath(ref), { query: { propagationPolicy } });
      return true;
    } catch (err) {
      if (isNotFound(err)) return false;
      throw err;
    }
  }

  /** One page of a list (the whole list unless `limit` is set). */
  async list<T extends KubeObject>(apiVersion: string, kind: string, namespace?: string, query: Query = {}): Promise<KubeList<T>> {
    return this.rest.request<KubeList<T>>("GET", await this.collectionPath(apiVersion, kind, namespace), { query });
  }

  private async collectionPath(apiVersion: string, kind: string, namespace: string | undefined): Promise<string> {
    const r = await this.resource(apiVersion, kind);
    return resourcePath({ apiVersion, plural: r.plural, namespace: r.namespaced ? namespace : undefined });
  }

  private async refPath(ref: ObjectRef): Promise<string> {
    return `${await this.collectionPath(ref.apiVersion, ref.kind, ref.namespace)}/${pathSegment(ref.name)}`;
  }

  private async objectPath(obj: KubeObject): Promise<string> {
    return this.refPath({ apiVersion: obj.apiVersion!, kind: obj.kind!, namespace: obj.metadata.namespace!, name: obj.metadata.name! });
  }

  private async resource(apiVersion: string, kind: string): Promise<{ plural: string; namespaced: boolean }> {
    let kinds = this.discovered.get(apiVersion);
    if (!kinds) {
      kinds = this.rest
        .request<{ resources: { name: string; kind: string; namespaced: boolean }[] }>("GET", groupVersionPath(apiVersion))
        .then(
          (d) =>
            new Map(d.resources.filter((r) => !r.name.includes("/")).map((r) => [r.kind, { plural: r.name, namespaced: r.namespaced }])),
        );
      this.discovered.set(apiVersion, kinds);
      kinds.catch(() => this.discovered.delete(apiVersion)); // a failed discovery is tried again next time
    }
    const r = (await kinds).get(kind);
    if (!r) {
      this.discovered.delete(apiVersion); // a CRD installed since: look again next time
      throw new UnknownKindError(`the API server has no kind ${kind} in ${apiVersion}`);
    }
    return r;
  }
}
