// Workspace API key management: list (no secrets), create (the secret is returned once), revoke.
import { z } from "zod";
import { defineRoute, type RouteDef } from "../http/route.ts";
import type { ApiKeyService, WorkspaceKeyView } from "./keys.ts";
import { WORKSPACE_KEY_PREFIX } from "./tokens.ts";

const timestamp = z.iso.datetime();

export const ApiKeySchema = z
  .object({
    id: z.uuid(),
    workspaceId: z.string(),
    name: z.string(),
    prefix: z.string().describe("The first 12 characters of the key, to tell keys apart"),
    createdAt: timestamp,
    lastUsedAt: timestamp.nullable().describe("Last successful use, to the minute"),
    revokedAt: timestamp.nullable(),
  })
  .strict()
  .meta({ id: "ApiKey", description: "A workspace API key, without its secret" });

export const CreatedApiKeySchema = ApiKeySchema.extend({
  key: z.string().startsWith(WORKSPACE_KEY_PREFIX).describe("The whole key. Shown only in this response: store it now"),
})
  .strict()
  .meta({ id: "CreatedApiKey", description: "A new workspace API key with its secret (shown once)" });

export const CreateApiKeyRequest = z
  .object({
    name: z.string().trim().min(1).max(100).describe("What the key is for, e.g. 'ci' or 'dashboard'"),
  })
  .strict()
  .meta({ id: "CreateApiKeyRequest" });

const WorkspaceParams = z.object({ wsId: z.string() }).strict();
const KeyParams = z.object({ wsId: z.string(), keyId: z.string() }).strict();

export function keyBody(k: WorkspaceKeyView): z.input<typeof ApiKeySchema> {
  return {
    id: k.id,
    workspaceId: k.workspaceId,
    name: k.name,
    prefix: k.prefix,
    createdAt: k.createdAt.toISOString(),
    lastUsedAt: k.lastUsedAt?.toISOString() ?? null,
    revokedAt: k.revokedAt?.toISOString() ?? null,
  };
}

export function apiKeyRoutes(deps: { keys: ApiKeyService }): RouteDef[] {
  const { keys } = deps;
  return [
    defineRoute({
      method: "get",
      path: "/workspaces/:wsId/api-keys",
      operationId: "listApiKeys",
      tags: ["api-keys"],
      auth: "workspace",
      summary: "List the workspace's API keys (revoked ones included), newest first; never the secrets",
      params: WorkspaceParams,
      responses: { 200: z.object({ data: z.array(ApiKeySchema) }).strict() },
      handler: async ({ params, em }) => ({ status: 200, body: { data: (await keys.list(em, params.wsId)).map(keyBody) } }),
    }),
    defineRoute({
      method: "post",
      path: "/workspaces/:wsId/api-keys",
      operationId: "createApiKey",
      tags: ["api-keys"],
      auth: "workspace",
      summary: "Create an API key; its secret is in this response only",
      description:
        "409 key_limit_reached when the workspace holds BERTH_MAX_KEYS_PER_WORKSPACE keys that are not revoked (50 by default): all of a workspace's keys share one rate-limit budget, so more keys buy no more requests.",
      params: WorkspaceParams,
      body: CreateApiKeyRequest,
      responses: { 201: CreatedApiKeySchema, 409: null },
      handler: async ({ params, body, em }) => {
        const { key, secret } = await keys.create(em, params.wsId, body.name);
        return {
          status: 201,
          body: { ...keyBody(key), key: secret },
          headers: { Location: `/api/v1/workspaces/${params.wsId}/api-keys/${key.id}`, "Cache-Control": "no-store" },
        };
      },
    }),
    defineRoute({
      method: "get",
      path: "/workspaces/:wsId/api-keys/:keyId",
      operationId: "getApiKey",
      tags: ["api-keys"],
      auth: "workspace",
      summary: "Get one API key (without its secret)",
      params: KeyParams,
      responses: { 200: ApiKeySchema },
      handler: async ({ params, em }) => ({ status: 200, body: keyBody(await keys.get(em, params.keyId, params.wsId)) }),
    }),
    defineRoute({
      method: "delete",
      path: "/workspaces/:wsId/api-keys/:keyId",
      operationId: "revokeApiKey",
      tags: ["api-keys"],
      auth: "workspace",
      summary: "Revoke an API key, effective immediately (idempotent)",
      description:
        "A key cannot revoke itself (409 cannot_revoke_current_key): rotate by creating a new key, switching to it, and revoking the old key with the new one.",
      params: KeyParams,
      responses: { 204: null, 409: null },
      handler: async ({ params, em, principal }) => {
        await keys.revoke(em, params.keyId, { workspaceId: params.wsId, currentKeyId: principal?.keyId });
        return { status: 204 };
      },
    }),
  ];
}
