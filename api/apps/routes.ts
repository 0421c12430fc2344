// Services endpoints (SPEC.md part 4 "Services"): one definition validates and documents each.
import { z } from "zod";
import { defineRoute, type RouteDef } from "../http/route.ts";
import type { AppsService } from "./service.ts";
import { AppParams, CreateServiceBody, CreatedService, ListServicesQuery, PipelineState, Service, ServiceList, Stats, UpdateServiceBody, WsParams } from "./schemas.ts";

const tags = ["Services"];

export function appRoutes(apps: AppsService): RouteDef[] {
  return [
    defineRoute({
      method: "get", path: "/workspaces/:wsId/apps", operationId: "listServices", tags, auth: "workspace",
      summary: "List services",
      description: "Paginated (page from 1; limit default 20, max 100), newest first. `search` matches every word against the name, case- and accent-insensitively.",
      params: WsParams, query: ListServicesQuery, responses: { 200: ServiceList },
      handler: async ({ params, query }) => ({ status: 200, body: await apps.list(params.wsId, query) }),
    }),
    defineRoute({
      method: "post", path: "/workspaces/:wsId/apps", operationId: "createService", tags, auth: "workspace",
      summary: "Create a service",
      description: "Creates the App custom resource. The service starts with status `stopped`; it deploys once it has an image. The id is the slug when free.",
      params: WsParams, body: CreateServiceBody, responses: { 201: CreatedService },
      handler: async ({ params, body }) => {
        const created = await apps.create(params.wsId, body);
        return { status: 201, body: created, headers: { Location: `/api/v1/workspaces/${params.wsId}/apps/${created.id}` } };
      },
    }),
    defineRoute({
      method: "get", path: "/workspaces/:wsId/apps/stats", operationId: "getServiceStats", tags, auth: "workspace",
      summary: "Count services by status", params: WsParams, responses: { 200: Stats },
      handler: async ({ params }) => ({ status: 200, body: await apps.stats(params.wsId) }),
    }),
    defineRoute({
      method: "get", path: "/workspaces/:wsId/apps/:appId", operationId: "getService", tags, auth: "workspace",
      summary: "Get a service with its latest deployment", params: AppParams, responses: { 200: Service },
      handler: async ({ params }) => ({ status: 200, body: await apps.get(params.wsId, params.appId) }),
    }),
    defineRoute({
      method: "patch", path: "/workspaces/:wsId/apps/:appId", operationId: "updateService", tags, auth: "workspace",
      summary: "Update a service",
      description: "Any subset of the create fields; unspecified fields are unchanged and null clears an optional field. Returns the updated service.",
      params: AppParams, body: UpdateServiceBody, responses: { 200: Service },
      handler: async ({ params, body }) => ({ status: 200, body: await apps.update(params.wsId, params.appId, body) }),
    }),
    defineRoute({
      method: "delete", path: "/workspaces/:wsId/apps/:appId", operationId: "softDeleteService", tags, auth: "workspace",
      summary: "Soft delete a service",
      description: "Stops the running deployment and removes the service from routing; the service, its configuration and its data are kept (status `disabled`). Undo with POST .../resume.",
      params: AppParams, responses: { 204: null },
      handler: async ({ params }) => { await apps.suspend(params.wsId, params.appId); return { status: 204 }; },
    }),
    defineRoute({
      method: "post", path: "/workspaces/:wsId/apps/:appId/resume", operationId: "resumeService", tags, auth: "workspace",
      summary: "Resume a soft-deleted service", params: AppParams, body: z.object({}).strict().optional(), responses: { 200: Service },
      handler: async ({ params }) => ({ status: 200, body: await apps.resume(params.wsId, params.appId) }),
    }),
    defineRoute({
      method: "delete", path: "/workspaces/:wsId/apps/:appId/permanent", operationId: "deleteService", tags, auth: "workspace",
      summary: "Permanently delete a service",
      description: "Removes the service and everything it owns: its workloads and routing (through owner references) and its governance store (traces, evals, guard blocks). Irreversible.",
      params: AppParams, responses: { 204: null },
      handler: async ({ params }) => { await apps.remove(params.wsId, params.appId); return { status: 204 }; },
    }),
    defineRoute({
      method: "get", path: "/workspaces/:wsId/apps/:appId/pipeline-state", operationId: "getPipelineState", tags, auth: "workspace",
      summary: "Snapshot of every pipeline stage", params: AppParams, responses: { 200: PipelineState },
      handler: async ({ params }) => ({ status: 200, body: await apps.pipelineState(params.wsId, params.appId) }),
    }),
  ];
}
