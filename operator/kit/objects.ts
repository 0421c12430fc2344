// The objects the controllers share, as their caches hold them, and the small questions every
// controller asks of them: who controls a child, how to name it in a request.
import type { AppStatus } from "../../crds/schemas.ts";
import type { ReleaseObject as ReleaseShape } from "../../crds/release.ts";
import { ownedBy, type KubeObject, type ObjectRef } from "../../kube/objects.ts";

/** An App as the operator's caches hold it (its spec is parsed where it is used). */
export type AppObject = KubeObject & { spec: unknown; status?: AppStatus };

/** A Release as the operator's caches hold it. */
export type ReleaseObject = KubeObject & Pick<ReleaseShape, "spec" | "status">;

/** Whether `owner` controls `obj` (its controlling ownerReference). */
export const controlledBy = (obj: KubeObject, owner: KubeObject): boolean => ownedBy(obj, owner, { controller: true });

/** The reference of an object that carries its apiVersion and kind. */
export function refOf(o: KubeObject): ObjectRef {
  return { apiVersion: o.apiVersion!, kind: o.kind!, namespace: o.metadata.namespace!, name: o.metadata.name! };
}
