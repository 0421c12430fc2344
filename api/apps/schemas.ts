// REST shapes of services (SPEC.md part 2 "Service"), built from the same field schemas as the
// App CRD so that the API refuses exactly what the API server would.
import { z } from "zod";
import { APP_PHASES, APP_TYPES, fields } from "../../crds/schemas.ts";

const ts = z.iso.datetime();

/** Fields accepted on create; `name` and `slug` are required (SPEC.md part 4). */
export const CreateServiceBody = z.object({
  name: fields.name,
  slug: fields.slug,
  description: fields.description.optional(),
  type: fields.type.optional(),
  gitRepoUrl: fields.gitRepoUrl.optional(),
  gitBranch: fields.gitBranch.optional(),
  gitInstallationId: fields.gitInstallationId.optional(),
  dockerfilePath: fields.dockerfilePath.nullable().optional(),
  autoDeploy: fields.autoDeploy.optional(),
  releaseCommand: fields.releaseCommand.optional(),
  cpuLimitMillicores: fields.cpuLimitMillicores.optional(),
  memoryLimitMi: fields.memoryLimitMi.optional(),
  visibility: fields.visibility.optional(),
  minReplicas: fields.minReplicas.optional(),
  maxReplicas: fields.maxReplicas.optional(),
  cpuTargetUtilization: fields.cpuTargetUtilization.optional(),
  port: fields.port.optional(),
  schedule: fields.schedule.optional(),
  image: fields.image.optional(),
}).strict().meta({ id: "CreateServiceRequest" });
export type CreateServiceBody = z.output<typeof CreateServiceBody>;

/** PATCH: any subset of the create fields; null clears an optional field. */
export const UpdateServiceBody = z.object({
  name: fields.name.optional(),
  slug: fields.slug.optional(),
  description: fields.description.nullable().optional(),
  type: fields.type.optional(),
  gitRepoUrl: fields.gitRepoUrl.nullable().optional(),
  gitBranch: fields.gitBranch.optional(),
  gitInstallationId: fields.gitInstallationId.nullable().optional(),
  dockerfilePath: fields.dockerfilePath.nullable().optional(),
  autoDeploy: fields.autoDeploy.optional(),
  releaseCommand: fields.releaseCommand.nullable().optional(),
  cpuLimitMillicores: fields.cpuLimitMillicores.optional(),
  memoryLimitMi: fields.memoryLimitMi.optional(),
  visibility: fields.visibility.optional(),
  minReplicas: fields.minReplicas.optional(),
  maxReplicas: fields.maxReplicas.nullable().optional(),
  cpuTargetUtilization: fields.cpuTargetUtilization.nullable().optional(),
  port: fields.port.optional(),
  schedule: fields.schedule.nullable().optional(),
  image: fields.image.nullable().optional(),
}).strict().meta({ id: "UpdateServiceRequest" });
export type UpdateServiceBody = z.output<typeof UpdateServiceBody>;

export const ServiceStatus = z.enum(APP_PHASES);

export const ServiceListItem = z.object({
  id: z.string(),
  name: z.string(),
  slug: z.string(),
  status: ServiceStatus,
  type: z.enum(APP_TYPES),
  url: z.string().nullable().describe("Default address https://<slug>.<baseDomain>; null for worker and cron services, which are not routed"),
  gitRepoUrl: z.string().nullable(),
  gitBranch: z.string(),
  createdAt: ts,
}).meta({ id: "ServiceListItem" });

export const CreatedService = ServiceListItem.extend({
  autoDeploy: z.boolean(),
  cpuLimitMillicores: z.int(),
  memoryLimitMi: z.int(),
  minReplicas: z.int(),
  maxReplicas: z.int(),
  updatedAt: ts,
}).meta({ id: "CreatedService" });

export const LatestDeployment = z.object({
  id: z.string(),
  status: z.string(),
  gitCommitSha: z.string().nullable(),
  gitCommitMessage: z.string().nullable(),
  createdAt: ts,
}).meta({ id: "LatestDeployment" });

export const Service = CreatedService.extend({
  description: z.string().nullable(),
  dockerfilePath: z.string().nullable(),
  releaseCommand: z.string().nullable(),
  cpuTargetUtilization: z.int().describe("Effective target; 80 when not set"),
  visibility: z.enum(["public", "private"]),
  gitInstallationId: z.string().nullable(),
  image: z.string().nullable(),
  schedule: z.string().nullable(),
  port: z.int(),
  latestDeployment: LatestDeployment.nullable(),
}).meta({ id: "Service" });

export const ServiceList = z.object({
  data: z.array(ServiceListItem),
  meta: z.object({ total: z.int(), page: z.int(), limit: z.int(), totalPages: z.int() }),
}).meta({ id: "ServiceList" });

export const ListServicesQuery = z.object({
  page: z.coerce.number().int().min(1).default(1),
  limit: z.coerce.number().int().min(1).max(100).default(20),
  type: z.enum(APP_TYPES).optional(),
  status: ServiceStatus.optional(),
  search: z.string().max(200).optional(),
}).strict();

export const Stats = z.object({
  total: z.int(), active: z.int(), deploying: z.int(), failed: z.int(), stopped: z.int(),
}).meta({ id: "ServiceStats", description: "failed counts failed and build_failed; stopped counts stopped and disabled" });

export const PipelineState = z.object({
  source: z.object({ status: z.string(), gitRepo: z.string().nullable(), branch: z.string(), lastCommitSha: z.string().nullable(), lastCommitMessage: z.string().nullable() }),
  build: z.object({ status: z.string(), buildpack: z.string().nullable(), imageTag: z.string().nullable(), durationSeconds: z.number().nullable() }),
  deploy: z.object({ status: z.string(), deployedAt: ts.nullable(), revisionName: z.string().nullable() }),
  harbor: z.object({ status: z.string(), guardsEnabled: z.boolean(), lastEvalAt: ts.nullable() }).describe("The governance stage (key name kept from SPEC.md)"),
  runtime: z.object({ status: z.string(), readyReplicas: z.int(), totalReplicas: z.int(), cpuUsageMillicores: z.number().nullable(), memoryUsageMi: z.number().nullable() }),
  overallStatus: ServiceStatus,
}).meta({ id: "PipelineState" });

export const WsParams = z.object({ wsId: z.string().min(1).max(64) }).strict();
export const AppParams = z.object({ wsId: z.string().min(1).max(64), appId: z.string().min(1).max(253) }).strict();
