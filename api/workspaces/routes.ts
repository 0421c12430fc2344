// Workspaces over HTTP: platform admins create and list them and manage their members (the people
// who sign in to the console with the organisation's identity provider); a workspace key reads its own.
import { z } from "zod";
import { CreatedApiKeySchema, keyBody } from "../auth/routes.ts";
import type { ApiKeyService } from "../auth/keys.ts";
import { defineRoute, type RouteDef } from "../http/route.ts";
import { ConflictError } from "../errors.ts";
import { WORKSPACE_ID_PATTERN, type WorkspaceService, type WorkspaceView } from "./service.ts";
import type { MemberView, MembersService } from "./members.ts";

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

export const MemberSchema = z
  .object({
    workspaceId: z.string().regex(WORKSPACE_ID_PATTERN),
    email: z.string().describe("The member's email, lowercase: their identity provider must vouch for it (email_verified)"),
    issuer: z.string().nullable().describe("The identity provider that signed the member in first; null until then"),
    subject: z
      .string()
      .nullable()
      .describe("The member's subject at that identity provider, recorded at the first sign-in; every later sign-in must be this account"),
    createdAt: z.iso.datetime(),
    lastSignInAt: z.iso.datetime().nullable().describe("The member's last console sign-in"),
  })
  .strict()
  .meta({
    id: "WorkspaceMember",
    description: "A person who signs in to the workspace's console with the organisation's identity provider",
  });

const MembersParams = z.object({ wsId: z.string().describe("The workspace") }).strict();
const MemberParams = z
  .object({
    wsId: z.string().describe("The workspace"),
    email: z
      .email()
      .max(254)
      // RFC 5321's limit on the local part, which the email format of the OpenAPI document holds to
      .refine((e) => e.lastIndexOf("@") <= 64, "the part before @ is at most 64 characters")
      .transform((e) => e.toLowerCase())
      .describe("The member's email (URL-encoded; compared without case)"),
  })
  .strict();

export function memberBody(m: MemberView): z.input<typeof MemberSchema> {
  return {
    workspaceId: m.workspaceId,
    email: m.email,
    issuer: m.issuer,
    subject: m.subject,
    createdAt: m.createdAt.toISOString(),
    lastSignInAt: m.lastSignInAt?.toISOString() ?? null,
  };
}

export function memberRoutes(deps: { members: MembersService }): RouteDef[] {
  const { members } = deps;
  const tags = ["members"];
  return [
    defineRoute({
      method: "get",
      path: "/workspaces/:wsId/members",
      operationId: "listWorkspaceMembers",
      tags,
      auth: "platform-admin",
      summary: "List a workspace's members (who may sign in to its console with the identity provider), by email",
      description: "404 workspace_not_found for a workspace that does not exist.",
      params: MembersParams,
      responses: { 200: z.object({ data: z.array(MemberSchema) }).strict() },
      handler: async ({ params, em }) => ({ status: 200, body: { data: (await members.list(em, params.wsId)).map(memberBody) } }),
    }),
    defineRoute({
      method: "put",
      path: "/workspaces/:wsId/members/:email",
      operationId: "addWorkspaceMember",
      tags,
      auth: "platform-admin",
      summary: "Add a member by email (idempotent): they may then sign in to the workspace's console with the identity provider",
      description:
        "201 when added, 200 when the email is a member already (unchanged). The member signs in at GET /console/oidc/login; their ID token must carry this email with email_verified true, and the account that signs in first is the member from then on. 404 workspace_not_found; 409 member_limit_reached when the workspace has BERTH_MAX_MEMBERS_PER_WORKSPACE members; 422 for an invalid email.",
      params: MemberParams,
      responses: { 201: MemberSchema, 200: MemberSchema, 409: null },
      handler: async ({ params, em }) => {
        const { member, created } = await members.add(em, params.wsId, params.email);
        return {
          status: created ? 201 : 200,
          body: memberBody(member),
          headers: { Location: `/api/v1/workspaces/${params.wsId}/members/${encodeURIComponent(member.email)}` },
        };
      },
    }),
    defineRoute({
      method: "delete",
      path: "/workspaces/:wsId/members/:email",
      operationId: "removeWorkspaceMember",
      tags,
      auth: "platform-admin",
      summary: "Remove a member: their console sessions end at once",
      description:
        "404 workspace_not_found, or member_not_found when the email is not a member of the workspace; 422 for an invalid email.",
      params: MemberParams,
      responses: { 204: null },
      handler: async ({ params, em }) => {
        await members.remove(em, params.wsId, params.email);
        return { status: 204 };
      },
    }),
  ];
}
