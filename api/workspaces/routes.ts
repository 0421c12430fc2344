// Workspaces over HTTP: platform admins create and list them; a workspace key reads its own.
import { z } from "zod";
import { CreatedApiKeySchema, keyBody } from "../auth/routes.ts";
import type { ApiKeyService } from "../auth/keys.ts";
import { defineRoute, type RouteDef } from "../http/route.ts";
import { ConflictError } from "../errors.ts";
import { WORKSPACE_ID_PATTERN, type WorkspaceService, type WorkspaceView } from "./service.ts";

export const WorkspaceSchema = z
  .object({
    id: z.string().regex(WORKSPACE_ID_PATTERN),
    name: z.string(),
    namespace: z.string().describe("The Kubernetes namespace holding the workspace's Apps, Domains and Shares"),
    createdAt: z.iso.datetime(),
  })
  .strict()
  .meta({ id: "Workspace" });

export const CreatedWorkspaceSchema = WorkspaceSchema.extend({
  apiKey: CreatedApiKeySchema.describe("A first API key for the workspace (its secret is shown once)"),
})
  .strict()
  .meta({ id: "CreatedWorkspace" });

export const CreateWorkspaceRequest = z
  .object({
    name: z.string().trim().min(1).max(100),
    id: z
      .string()
      .regex(WORKSPACE_ID_PATTERN, "must be ws followed by 10 characters of a-z and 2-7")
      .optional()
      .describe(
        "Makes the call idempotent: retrying with the same id and name finishes a create that was interrupted before its first key",
      ),
  })
  .strict()
  .meta({ id: "CreateWorkspaceRequest" });

export function workspaceBody(w: WorkspaceView): z.input<typeof WorkspaceSchema> {
  return { id: w.id, name: w.name, namespace: w.namespace, createdAt: w.createdAt.toISOString() };
}

export function workspaceRoutes(deps: { workspaces: WorkspaceService; keys: ApiKeyService }): RouteDef[] {
  const { workspaces, keys } = deps;
  return [
    defineRoute({
      method: "post",
      path: "/workspaces",
      operationId: "createWorkspace",
      tags: ["workspaces"],
      auth: "platform-admin",
      summary: "Create a workspace (its namespace and a first API key)",
      description:
        "201 when created; 200 when a workspace with this id and name exists but has no key yet (the retry of a create that was interrupted before its first key), in which case its namespace is ensured again and the first key minted. 409 workspace_exists when the id is taken by another name, or by a workspace that has its keys already: this route never mints a key for an existing workspace (its own keys mint more with POST /workspaces/{wsId}/api-keys; the CLI's key create for an operator of the platform).",
      body: CreateWorkspaceRequest,
      responses: { 201: CreatedWorkspaceSchema, 200: CreatedWorkspaceSchema, 409: null, 503: null },
      handler: async ({ body, em }) => {
        const { workspace, created } = await workspaces.create(em, { name: body.name, id: body.id });
        if (!created && (await keys.list(em, workspace.id)).length > 0) {
          throw new ConflictError(
            "workspace_exists",
            `Workspace ${workspace.id} exists and has its keys: a platform admin key does not mint keys for an existing workspace (its own keys do, with POST /workspaces/${workspace.id}/api-keys).`,
          );
        }
        const { key, secret } = await keys.create(em, workspace.id, "initial");
        return {
          status: created ? 201 : 200,
          body: { ...workspaceBody(workspace), apiKey: { ...keyBody(key), key: secret } },
          headers: { Location: `/api/v1/workspaces/${workspace.id}`, "Cache-Control": "no-store" },
        };
      },
    }),
    defineRoute({
      method: "get",
      path: "/workspaces",
      operationId: "listWorkspaces",
      tags: ["workspaces"],
      auth: "platform-admin",
      summary: "List all workspaces, newest first",
      responses: { 200: z.object({ data: z.array(WorkspaceSchema) }).strict() },
      handler: async ({ em }) => ({ status: 200, body: { data: (await workspaces.list(em)).map(workspaceBody) } }),
    }),
    defineRoute({
      method: "get",
      path: "/workspaces/:wsId",
      operationId: "getWorkspace",
      tags: ["workspaces"],
      auth: "workspace",
      summary: "The workspace of the calling key",
      params: z.object({ wsId: z.string() }).strict(),
      responses: { 200: WorkspaceSchema },
      handler: async ({ params, em }) => ({ status: 200, body: workspaceBody(await workspaces.get(em, params.wsId)) }),
    }),
  ];
}
