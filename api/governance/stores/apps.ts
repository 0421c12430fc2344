// The Apps governance acts on, as seen from the watch cache (falling back to the API server right
// after a create), and the annotations through which the API asks the operator for a fresh key
// or switches governance off (their names and reading: crds/app.ts, shared with the operator).
import { API_VERSION } from "../../../crds/schemas.ts";
import { isNotFound } from "../../../kube/client.ts";
import type { ObjectClient } from "../../../kube/objects.ts";
import type { ReadYourWritesCache } from "../../../kube/read-your-writes.ts";
import { appRef } from "../../../crds/app.ts";
import { groupOf, type Access } from "../../../kube/rbac.ts";
import { NotFoundError } from "../../errors.ts";

/** What governance does to Apps (RBAC from code, see api/rbac.ts). */
export const GOVERNANCE_APPS_ACCESS: Access[] = [
  {
    group: groupOf(API_VERSION),
    resource: "apps",
    verbs: ["get", "patch"],
    why: "Governance reads an App right after its creation and annotates it to ask the operator for a fresh key or to switch governance off",
  },
];

export interface AppRef {
  namespace: string;
  name: string;
  uid: string | undefined;
  annotations: Record<string, string>;
  /** when the App was created: anything of an app id written before belongs to an earlier App of that id */
  createdAt: Date | undefined;
}

/** The App `appId` of a workspace; undefined when there is none (or it is being deleted). */
export type AppLookup = (workspaceId: string, appId: string) => Promise<AppRef | undefined>;

/** Patches an App's annotations (merge patch: null removes one). */
export type AppAnnotator = (app: AppRef, annotations: Record<string, string | null>) => Promise<void>;

/**
 * Where governance reads and annotates Apps: the API's one read-your-writes cache of Apps (shared
 * with the services, so a write of either is read back by both).
 */
export type AppStore = Pick<ReadYourWritesCache, "getOrFetch" | "mergePatch">;

/** The App store of a process that keeps no watch cache of Apps (scripts, benchmarks): every read asks the API server. */
export function uncachedApps(client: Pick<ObjectClient, "get" | "mergePatch">, fieldManager: string): AppStore {
  return {
    getOrFetch: (ref) => client.get(ref),
    mergePatch: (ref, patch) => client.mergePatch(ref, patch, fieldManager),
  };
}

export function appLookup(deps: { apps: AppStore; namespaceOf: (workspaceId: string) => Promise<string> }): AppLookup {
  return async (workspaceId, appId) => {
    const namespace = await deps.namespaceOf(workspaceId);
    const app = await deps.apps.getOrFetch(appRef(namespace, appId));
    if (!app || app.metadata.deletionTimestamp) return undefined;
    const created = app.metadata.creationTimestamp;
    return {
      namespace,
      name: appId,
      uid: app.metadata.uid,
      annotations: app.metadata.annotations ?? {},
      createdAt: created ? new Date(created) : undefined,
    };
  };
}

export function appAnnotator(apps: AppStore): AppAnnotator {
  return async (app, annotations) => {
    try {
      await apps.mergePatch(appRef(app.namespace, app.name), { metadata: { annotations } });
    } catch (err) {
      if (isNotFound(err)) throw new NotFoundError("app_not_found", `No service ${app.name} in this workspace`);
      throw err;
    }
  };
}
