// REST shapes of services (docs/spec.md part 2 "Service"), built from the same field schemas as the
// App CRD so that the API refuses exactly what the API server would.
import { z } from "zod";
import { APP_PHASES, APP_TYPES, DNS_LABEL, DNS_SUBDOMAIN, fields } from "../../crds/schemas.ts";
import { ENV_NAME_PATTERN, OPERATOR_ENV_NAMES, RESERVED_ENV_PREFIX, reservedEnvName } from "../../crds/app.ts";

const ts = z.iso.datetime();

/** Fields accepted on create; `name` and `slug` are required (docs/spec.md part 4). */
export const CreateServiceBody = z
  .object({
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
  })
  .strict()
  .meta({ id: "CreateServiceRequest" });
export type CreateServiceBody = z.output<typeof CreateServiceBody>;

/** PATCH: any subset of the create fields; null clears an optional field. */
export const UpdateServiceBody = z
  .object({
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
  })
  .strict()
  .meta({ id: "UpdateServiceRequest" });
export type UpdateServiceBody = z.output<typeof UpdateServiceBody>;

export const ServiceStatus = z.enum(APP_PHASES);

export const ServiceListItem = z
  .object({
    id: z.string(),
    name: z.string(),
    slug: z.string(),
    status: ServiceStatus,
    type: z.enum(APP_TYPES),
    url: z
      .string()
      .nullable()
      .describe("Default address https://<slug>.<baseDomain>; null for worker and cron services, which are not routed"),
    gitRepoUrl: z.string().nullable(),
    gitBranch: z.string(),
    createdAt: ts,
  })
  .meta({ id: "ServiceListItem" });

export const CreatedService = ServiceListItem.extend({
  autoDeploy: z.boolean(),
  cpuLimitMillicores: z.int(),
  memoryLimitMi: z.int(),
  minReplicas: z.int(),
  maxReplicas: z.int(),
  updatedAt: ts,
}).meta({ id: "CreatedService" });

export const LatestDeployment = z
  .object({
    id: z.string(),
    status: z.string(),
    gitCommitSha: z.string().nullable(),
    gitCommitMessage: z.string().nullable(),
    createdAt: ts,
  })
  .meta({ id: "LatestDeployment" });

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

export const ServiceList = z
  .object({
    data: z.array(ServiceListItem),
    meta: z.object({ total: z.int(), page: z.int(), limit: z.int(), totalPages: z.int() }),
  })
  .meta({ id: "ServiceList" });

export const ListServicesQuery = z
  .object({
    page: z.coerce.number().int().min(1).default(1),
    limit: z.coerce.number().int().min(1).max(100).default(20),
    type: z.enum(APP_TYPES).optional(),
    status: ServiceStatus.optional(),
    search: z.string().max(200).optional(),
  })
  .strict();

export const Stats = z
  .object({
    total: z.int(),
    active: z.int(),
    deploying: z.int(),
    failed: z.int(),
    stopped: z.int(),
  })
  .meta({ id: "ServiceStats", description: "failed counts failed and build_failed; stopped counts stopped and disabled" });

export const PipelineState = z
  .object({
    source: z.object({
      status: z.string(),
      gitRepo: z.string().nullable(),
      branch: z.string(),
      lastCommitSha: z.string().nullable(),
      lastCommitMessage: z.string().nullable(),
    }),
    build: z.object({
      status: z.string(),
      buildpack: z.string().nullable(),
      imageTag: z.string().nullable(),
      durationSeconds: z.number().nullable(),
    }),
    deploy: z.object({ status: z.string(), deployedAt: ts.nullable(), revisionName: z.string().nullable() }),
    harbor: z
      .object({ status: z.string(), guardsEnabled: z.boolean(), lastEvalAt: ts.nullable() })
      .describe("The governance stage (key name kept from docs/spec.md)"),
    runtime: z.object({
      status: z.string(),
      readyReplicas: z.int(),
      totalReplicas: z.int(),
      cpuUsageMillicores: z.number().nullable(),
      memoryUsageMi: z.number().nullable(),
    }),
    overallStatus: ServiceStatus,
  })
  .meta({ id: "PipelineState" });

/** An app's id: its App's name, a DNS label (the slug it was created with, or that plus a suffix). */
export const AppId = z.string().min(1).max(63).regex(new RegExp(DNS_LABEL), "must be an app id: lowercase letters, digits and '-'");
/** The id of an object kept as a Kubernetes object (a deployment, a domain, a share): its name, a DNS subdomain. */
export const ObjectId = z
  .string()
  .min(1)
  .max(253)
  .regex(new RegExp(DNS_SUBDOMAIN), "must be a Kubernetes object name: lowercase letters, digits, '-' and '.'");

export const WsParams = z.object({ wsId: z.string().min(1).max(64) }).strict();
export const AppParams = z.object({ wsId: z.string().min(1).max(64), appId: AppId }).strict();

// ---- Environment variables (docs/api.md "Environment variables") ----------------------------

/**
 * Bounds of a service's variables. A Secret holds at most 1 MiB and a process's environment
 * shares ARG_MAX (2 MiB on Linux, at most 128 KiB per NAME=value string) with its arguments: the
 * total stays far below both.
 */
export const ENV_LIMITS = {
  maxVariables: 200,
  maxNameLength: 128,
  /** Bytes of one value, UTF-8. */
  maxValueBytes: 32 * 1024,
  /** Bytes of every name and value together, UTF-8. */
  maxTotalBytes: 256 * 1024,
} as const;

export const EnvName = z
  .string()
  .min(1)
  .max(ENV_LIMITS.maxNameLength)
  .regex(ENV_NAME_PATTERN, "must be a POSIX-style name: a letter or _, then letters, digits or _")
  .superRefine((name, ctx) => {
    const why = reservedEnvName(name);
    if (why) ctx.addIssue({ code: "custom", message: why });
  })
  .describe(
    `[A-Za-z_][A-Za-z0-9_]*, at most ${ENV_LIMITS.maxNameLength} characters. Reserved (refused): ${OPERATOR_ENV_NAMES.join(", ")} and names starting with ${RESERVED_ENV_PREFIX}`,
  );

export const EnvValue = z
  .string()
  .refine((v) => !v.includes("\u0000"), "must not contain NUL characters (a process environment cannot hold them)")
  .refine((v) => Buffer.byteLength(v, "utf8") <= ENV_LIMITS.maxValueBytes, `must be at most ${ENV_LIMITS.maxValueBytes} bytes (UTF-8)`)
  .describe(`Any string without NUL, at most ${ENV_LIMITS.maxValueBytes} bytes (UTF-8); empty is a value`);

const secretFlag = z
  .boolean()
  .optional()
  .describe("true: the value is never returned (only its name). Omitted: the variable keeps its current flag; a new variable is secret");

export const SetEnvVarBody = z.object({ value: EnvValue, secret: secretFlag }).strict().meta({ id: "SetEnvVarRequest" });
export type SetEnvVarBody = z.output<typeof SetEnvVarBody>;

export const UpdateEnvBody = z
  .object({
    set: z
      .record(EnvName, z.union([EnvValue, SetEnvVarBody]))
      .describe("Variables to set: NAME -> value (a string), or NAME -> {value, secret}")
      .optional(),
    unset: z.array(EnvName).max(ENV_LIMITS.maxVariables).describe("Names to remove; a name that is not set is ignored").optional(),
  })
  .strict()
  .superRefine((b, ctx) => {
    for (const [i, name] of (b.unset ?? []).entries()) {
      if (b.set && Object.hasOwn(b.set, name))
        ctx.addIssue({ code: "custom", path: ["unset", i], message: `${name} is also in set: a name is either set or unset` });
    }
  })
  .meta({ id: "UpdateEnvRequest" });
export type UpdateEnvBody = z.output<typeof UpdateEnvBody>;

export const EnvVar = z
  .object({
    name: z.string(),
    value: z.string().nullable().describe("null for a secret variable: its value is never returned"),
    secret: z.boolean(),
  })
  .meta({ id: "EnvVar" });

export const EnvVarList = z.object({ data: z.array(EnvVar).describe("Sorted by name") }).meta({ id: "EnvVarList" });

export const EnvVarParams = z.object({ wsId: z.string().min(1).max(64), appId: AppId, name: EnvName }).strict();
