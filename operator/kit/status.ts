// Writing a primary's status: only when it differs from the stored one. An idle operator writes
// nothing, so every status apply goes through here.
import type { KubeObject } from "../../kube/objects.ts";
import type { ReadYourWritesCache } from "../../kube/read-your-writes.ts";
import { stableJson } from "./apply.ts";

/** True when writing `next` over `stored` (the cached object's status) would change nothing. */
export function statusUnchanged(stored: unknown, next: unknown): boolean {
  return stableJson(stored ?? {}) === stableJson(next);
}

/**
 * Applies `status` to the status subresource of `obj` (of resource `plural`) unless it equals the
 * status `obj` holds (`obj` as the cache shows it, with this process's own writes). Returns the
 * object written, or undefined when nothing was.
 */
export async function applyStatusIfChanged<S>(
  cache: ReadYourWritesCache,
  plural: string,
  obj: KubeObject & { status?: S | undefined },
  status: S,
): Promise<KubeObject | undefined> {
  if (statusUnchanged(obj.status, status)) return undefined;
  return cache.applyStatus(plural, {
    apiVersion: obj.apiVersion,
    kind: obj.kind,
    metadata: { name: obj.metadata.name, namespace: obj.metadata.namespace },
    status,
  });
}
