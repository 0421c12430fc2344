// Services endpoints (docs/spec.md part 4 "Services") and a service's environment variables: one
// definition validates and documents each.
import { z } from "zod";
import { defineRoute, type RouteDef } from "../http/route.ts";
import type { AppsService } from "./service.ts";
import type { EnvService } from "./env.ts";
import {
  AppParams,
  CreateServiceBody,
  CreatedService,
  EnvVar,
  EnvVarList,
  EnvVarParams,
  ListServicesQuery,
  PipelineState,
  Service,
  ServiceList,
  SetEnvVarBody,
  Stats,
  UpdateEnvBody,
  UpdateServiceBody,
  WsParams,
} from "./schemas.ts";

const tags = ["Services"];

/** Answers with variables are never cached (they may hold configuration a user considers private). */
// 409 on every variables route: env_secret_conflict (a Secret of that name the service does not
// own) or concurrent_update (writes kept conflicting); see docs/api.md.
const noStore = { "Cache-Control": "no-store" };

export function appRoutes(apps: AppsService, env: EnvService): RouteDef[] {
  return [
    defineRoute({
      method: "get",
      path: "/workspaces/:wsId/apps",
      operationId: "listServices",
      tags,
      auth: "workspace",
      summary: "List services",
      description:
        "Paginated (page from 1; limit default 20, max 100), newest first. `search` matches every word against the name, case- and accent-insensitively.",
      params: WsParams,
      query: ListServicesQuery,
      responses: { 200: ServiceList },
      handler: async ({ params, query }) => ({ status: 200, body: await apps.list(params.wsId, query) }),
    }),
    defineRoute({
      method: "post",
      path: "/workspaces/:wsId/apps",
      operationId: "createService",
      tags,
      auth: "workspace",
      summary: "Create a service",
      description:
        "Creates the App custom resource. The service starts with status `stopped`; it deploys once it has an image. The id is the slug when free. 409 slug_taken (this workspace), host_taken (another workspace's service has the host), quota_exceeded (the workspace holds its quota of services, BERTH_WORKSPACE_QUOTA); 422 on slug for a reserved name, on image for another workspace's build.",
      params: WsParams,
      body: CreateServiceBody,
      responses: { 201: CreatedService, 409: null },
      handler: async ({ params, body }) => {
        const created = await apps.create(params.wsId, body);
        return { status: 201, body: created, headers: { Location: `/api/v1/workspaces/${params.wsId}/apps/${created.id}` } };
      },
    }),
    defineRoute({
      method: "get",
      path: "/workspaces/:wsId/apps/stats",
      operationId: "getServiceStats",
      tags,
      auth: "workspace",
      summary: "Count services by status",
      params: WsParams,
      responses: { 200: Stats },
      handler: async ({ params }) => ({ status: 200, body: await apps.stats(params.wsId) }),
    }),
    defineRoute({
      method: "get",
      path: "/workspaces/:wsId/apps/:appId",
      operationId: "getService",
      tags,
      auth: "workspace",
      summary: "Get a service with its latest deployment",
      params: AppParams,
      responses: { 200: Service },
      handler: async ({ params }) => ({ status: 200, body: await apps.get(params.wsId, params.appId) }),
    }),
    defineRoute({
      method: "patch",
      path: "/workspaces/:wsId/apps/:appId",
      operationId: "updateService",
      tags,
      auth: "workspace",
      summary: "Update a service",
      description:
        "Any subset of the create fields; unspecified fields are unchanged and null clears an optional field. Returns the updated service.",
      params: AppParams,
      body: UpdateServiceBody,
      responses: { 200: Service, 409: null },
      handler: async ({ params, body }) => ({ status: 200, body: await apps.update(params.wsId, params.appId, body) }),
    }),
    defineRoute({
      method: "delete",
      path: "/workspaces/:wsId/apps/:appId",
      operationId: "softDeleteService",
      tags,
      auth: "workspace",
      summary: "Soft delete a service",
      description:
        "Stops the running deployment and removes the service from routing; the service, its configuration and its data are kept (status `disabled`). Undo with POST .../resume.",
      params: AppParams,
      responses: { 204: null },
      handler: async ({ params }) => {
        await apps.suspend(params.wsId, params.appId);
        return { status: 204 };
      },
    }),
    defineRoute({
      method: "post",
      path: "/workspaces/:wsId/apps/:appId/resume",
      operationId: "resumeService",
      tags,
      auth: "workspace",
      summary: "Resume a soft-deleted service",
      params: AppParams,
      body: z.object({}).strict().optional(),
      responses: { 200: Service },
      handler: async ({ params }) => ({ status: 200, body: await apps.resume(params.wsId, params.appId) }),
    }),
    defineRoute({
      method: "delete",
      path: "/workspaces/:wsId/apps/:appId/permanent",
      operationId: "deleteService",
      tags,
      auth: "workspace",
      summary: "Permanently delete a service",
      description:
        "Removes the service and everything it owns: its workloads and routing (through owner references) and its governance store (traces, evals, guard blocks). Irreversible.",
      params: AppParams,
      responses: { 204: null },
      handler: async ({ params }) => {
        await apps.remove(params.wsId, params.appId);
        return { status: 204 };
      },
    }),
    defineRoute({
      method: "get",
      path: "/workspaces/:wsId/apps/:appId/pipeline-state",
      operationId: "getPipelineState",
      tags,
      auth: "workspace",
      summary: "Snapshot of every pipeline stage",
      params: AppParams,
      responses: { 200: PipelineState },
      handler: async ({ params }) => ({ status: 200, body: await apps.pipelineState(params.wsId, params.appId) }),
    }),
    defineRoute({
      method: "get",
      path: "/workspaces/:wsId/apps/:appId/env",
      operationId: "listEnvVars",
      tags,
      auth: "workspace",
      summary: "List a service's environment variables",
      description: "Every variable, sorted by name. The value of a secret variable is null: it is never returned, only its name.",
      params: AppParams,
      responses: { 200: EnvVarList, 409: null },
      handler: async ({ params }) => ({ status: 200, body: await env.list(params.wsId, params.appId), headers: noStore }),
    }),
    defineRoute({
      method: "patch",
      path: "/workspaces/:wsId/apps/:appId/env",
      operationId: "updateEnvVars",
      tags,
      auth: "workspace",
      summary: "Set and unset environment variables",
      description:
        '`{"set": {"NAME": "value" | {"value", "secret"}}, "unset": ["NAME"]}`: one write, all or nothing; unsetting a name that is not set is not an error. A change of any value rolls the service. Returns every variable.',
      params: AppParams,
      body: UpdateEnvBody,
      responses: { 200: EnvVarList, 409: null },
      handler: async ({ params, body }) => ({ status: 200, body: await env.update(params.wsId, params.appId, body), headers: noStore }),
    }),
    defineRoute({
      method: "get",
      path: "/workspaces/:wsId/apps/:appId/env/:name",
      operationId: "getEnvVar",
      tags,
      auth: "workspace",
      summary: "Get one environment variable",
      description: "The value of a secret variable is null.",
      params: EnvVarParams,
      responses: { 200: EnvVar, 409: null },
      handler: async ({ params }) => ({ status: 200, body: await env.get(params.wsId, params.appId, params.name), headers: noStore }),
    }),
    defineRoute({
      method: "put",
      path: "/workspaces/:wsId/apps/:appId/env/:name",
      operationId: "setEnvVar",
      tags,
      auth: "workspace",
      summary: "Set one environment variable",
      description:
        "201 when the variable is new, 200 when it replaced a value. `secret` omitted keeps the current flag; a new variable is secret. A changed value rolls the service.",
      params: EnvVarParams,
      body: SetEnvVarBody,
      responses: { 200: EnvVar, 201: EnvVar, 409: null },
      handler: async ({ params, body }) => {
        const { created, variable } = await env.put(params.wsId, params.appId, params.name, body);
        return created
          ? {
              status: 201,
              body: variable,
              headers: { ...noStore, Location: `/api/v1/workspaces/${params.wsId}/apps/${params.appId}/env/${params.name}` },
            }
          : { status: 200, body: variable, headers: noStore };
      },
    }),
    defineRoute({
      method: "delete",
      path: "/workspaces/:wsId/apps/:appId/env/:name",
      operationId: "deleteEnvVar",
      tags,
      auth: "workspace",
      summary: "Unset one environment variable",
      description: "404 env_var_not_found when it is not set. Rolls the service.",
      params: EnvVarParams,
      responses: { 204: null, 409: null },
      handler: async ({ params }) => {
        await env.remove(params.wsId, params.appId, params.name);
        return { status: 204 };
      },
    }),
  ];
}
