// Writing a Release's status, shared by the Release controller (build, release command) and the
// App controller (how the rollout ended).
import { API_VERSION, type ReleaseStatus } from "../../crds/schemas.ts";
import type { ReleaseObject } from "./builders.ts";
import type { KubeObject } from "../../kube/objects.ts";
import type { ReadYourWritesCache } from "../../kube/read-your-writes.ts";

/**
 * Applies the release's whole status with `change` merged in: server-side apply removes what the
 * same manager leaves out, so a partial status would erase the steps already recorded.
 */
export async function applyReleaseStatus(
  cache: ReadYourWritesCache,
  r: ReleaseObject,
  change: Partial<ReleaseStatus>,
): Promise<KubeObject> {
  const status: ReleaseStatus = { ...r.status, ...change, observedGeneration: r.metadata.generation ?? 0 };
  return cache.applyStatus("releases", {
    apiVersion: API_VERSION,
    kind: "Release",
    metadata: { name: r.metadata.name, namespace: r.metadata.namespace },
    status,
  });
}
