// Deployments and push webhooks (docs/deployments.md): one definition validates and documents each.
import { z } from "zod";
import { defineRoute, type RouteDef } from "../http/route.ts";
import { AppParams, ObjectId } from "../apps/schemas.ts";
import { DeployBody, Deployment, DeploymentList, WebhookOutcome, WebhookSecret, type DeploymentsService } from "./service.ts";
import { GITHUB, GITLAB, WEBHOOK_BODY_LIMIT_BYTES } from "./webhooks.ts";

const tags = ["Deployments"];
const DeploymentParams = AppParams.extend({ deploymentId: ObjectId }).strict();

export function deploymentRoutes(d: DeploymentsService): RouteDef[] {
  return [
    defineRoute({
      method: "get",
      path: "/workspaces/:wsId/apps/:appId/deployments",
      operationId: "listDeployments",
      tags,
      auth: "workspace",
      summary: "List a service's deployments, newest first",
      description: "Every deployment still in the history (the newest 20, and the one serving).",
      params: AppParams,
      responses: { 200: DeploymentList },
      handler: async ({ params }) => ({ status: 200, body: await d.list(params.wsId, params.appId) }),
    }),
    defineRoute({
      method: "post",
      path: "/workspaces/:wsId/apps/:appId/deployments",
      operationId: "createDeployment",
      tags,
      auth: "workspace",
      summary: "Deploy a commit",
      description:
        "Builds and deploys the given commit of the service's repository, or the latest commit of its branch. 409 no_repository for a service that deploys an image, service_suspended for a soft-deleted one (resume it first), branch_not_found, invalid_service or deployment_conflict; 502 git_unreachable when no commitSha is given and the repository cannot be asked for its branch's head.",
      params: AppParams,
      body: DeployBody,
      responses: { 202: Deployment, 409: null, 502: null },
      handler: async ({ params, body }) => {
        const created = await d.deploy(params.wsId, params.appId, body);
        return {
          status: 202,
          body: created,
          headers: { Location: `/api/v1/workspaces/${params.wsId}/apps/${params.appId}/deployments/${created.id}` },
        };
      },
    }),
    defineRoute({
      method: "get",
      path: "/workspaces/:wsId/apps/:appId/deployments/:deploymentId",
      operationId: "getDeployment",
      tags,
      auth: "workspace",
      summary: "Get a deployment",
      params: DeploymentParams,
      responses: { 200: Deployment },
      handler: async ({ params }) => ({ status: 200, body: await d.get(params.wsId, params.appId, params.deploymentId) }),
    }),
    defineRoute({
      method: "get",
      path: "/workspaces/:wsId/apps/:appId/deployments/:deploymentId/logs",
      operationId: "getDeploymentLogs",
      tags,
      auth: "workspace",
      summary: "A deployment's build and release-command logs",
      description: "Plain text, while the steps run and after (up to 1 MiB per step). Poll it to follow a build.",
      params: DeploymentParams,
      produces: "text/plain; charset=utf-8",
      responses: { 200: z.string() },
      handler: async ({ params }) => ({ status: 200, body: await d.logs(params.wsId, params.appId, params.deploymentId) }),
    }),
    defineRoute({
      method: "post",
      path: "/workspaces/:wsId/apps/:appId/deployments/:deploymentId/redeploy",
      operationId: "redeploy",
      tags,
      auth: "workspace",
      summary: "Deploy an earlier deployment again (rollback)",
      description:
        "A new deployment of the earlier one's image, by digest: no build and no release command. 409 deployment_not_built for a deployment without an image, service_suspended for a soft-deleted service.",
      params: DeploymentParams,
      body: z.object({}).strict().optional(),
      responses: { 202: Deployment, 409: null },
      handler: async ({ params }) => ({ status: 202, body: await d.redeploy(params.wsId, params.appId, params.deploymentId) }),
    }),
    defineRoute({
      method: "post",
      path: "/workspaces/:wsId/apps/:appId/webhook-secret",
      operationId: "rotateWebhookSecret",
      tags,
      auth: "workspace",
      summary: "Create or rotate the service's push webhook secret",
      description:
        "Returns the new secret once; the previous one stops working. Configure GitHub with the returned URL (after the API's base URL), content type application/json, this secret and the push event.",
      params: AppParams,
      body: z.object({}).strict().optional(),
      responses: { 201: WebhookSecret },
      handler: async ({ params }) => ({
        status: 201,
        body: await d.rotateWebhookSecret(params.wsId, params.appId),
        headers: { "Cache-Control": "no-store" },
      }),
    }),
    ...(
      [
        [
          "github",
          GITHUB,
          "GitHub push webhook",
          "Authenticated by X-Hub-Signature-256 (HMAC-SHA256 of the raw body with the service's webhook secret)",
        ],
        [
          "gitlab",
          GITLAB,
          "GitLab push webhook",
          "Authenticated by X-Gitlab-Token (the service's webhook secret, compared in constant time); delivery id X-Gitlab-Event-UUID",
        ],
      ] as const
    ).map(([name, provider, summary, auth]) =>
      defineRoute({
        method: "post",
        path: `/webhooks/${name}/:wsId/:appId`,
        operationId: `${name}Webhook`,
        tags: ["Webhooks"],
        auth: "none",
        summary,
        description: `${auth}; 401 otherwise. A push to the service's branch with autoDeploy on starts a deployment (202 queued); other events, branches, tags and deletions are 202 ignored with the reason; a delivery id seen before is 200 duplicate; a push for another repository is 422.`,
        params: AppParams,
        body: z.record(z.string(), z.unknown()).describe("The provider's push payload, sent as application/json"),
        bodyLimitBytes: WEBHOOK_BODY_LIMIT_BYTES,
        responses: { 200: WebhookOutcome, 202: WebhookOutcome, 401: null, 409: null },
        handler: async ({ params, body, rawBody, koa }) =>
          d.webhook(provider, params.wsId, params.appId, (h) => koa.get(h) || undefined, rawBody, body),
      }),
    ),
  ];
}
