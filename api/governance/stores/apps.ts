// The Apps governance acts on, as seen from the watch cache (falling back to the API server right
// after a create), and the annotations through which the API asks the operator for a fresh key
// or switches governance off (their names and reading: crds/app.ts, shared with the operator).
import { API_VERSION } from "../../../crds/schemas.ts";
import { API_FIELD_MANAGER, isNotFound, type KubeClient, type KubeObject } from "../../../kube/client.ts";
import { groupOf, type Access } from "../../../kube/rbac.ts";
import { NotFoundError } from "../../errors.ts";

/** What governance does to Apps (RBAC from code, see api/rbac.ts). */
export const GOVERNANCE_APPS_ACCESS: Access[] = [
  { group: groupOf(API_VERSION), resource: "apps", verbs: ["get", "patch"], why: "Governance reads an App right after its creation and annotates it to ask the operator for a fresh key or to switch governance off" },
];

export interface AppRef {
  namespace: string;
  name: string;
  uid: string | undefined;
  annotations: Record<string, string>;
}

/** The App `appId` of a workspace; undefined when there is none (or it is being deleted). */
export type AppLookup = (workspaceId: string, appId: string) => Promise<AppRef | undefined>;

/** Patches an App's annotations (merge patch: null removes one). */
export type AppAnnotator = (app: AppRef, annotations: Record<string, string | null>) => Promise<void>;

export function appLookup(deps: { apps: { get(namespace: string, name: string): KubeObject | undefined }; client: KubeClient; namespaceOf: (workspaceId: string) => Promise<string> }): AppLookup {
  return async (workspaceId, appId) => {
    const namespace = await deps.namespaceOf(workspaceId);
    const app = deps.apps.get(namespace, appId) ?? await deps.client.get({ apiVersion: API_VERSION, kind: "App", namespace, name: appId });
    if (!app || app.metadata.deletionTimestamp) return undefined;
    return { namespace, name: appId, uid: app.metadata.uid, annotations: app.metadata.annotations ?? {} };
  };
}

export function appAnnotator(client: KubeClient): AppAnnotator {
  return async (app, annotations) => {
    try {
      await client.mergePatch({ apiVersion: API_VERSION, kind: "App", namespace: app.namespace, name: app.name }, { metadata: { annotations } }, API_FIELD_MANAGER);
    } catch (err) {
      if (isNotFound(err)) throw new NotFoundError("app_not_found", `No service ${app.name} in this workspace`);
      throw err;
    }
  };
}

