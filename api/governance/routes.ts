// Governance endpoints (docs/spec.md part 4 and the ingestion and operator endpoints it leaves open):
// one definition validates and documents each. docs/governance.md has the decisions.
import { z } from "zod";
import { GuardTemplateConfig, MAX_BATCH_SIZE } from "../../toolkit/src/index.ts";
import { defineRoute, type Caller, type Principal, type RouteDef } from "../http/route.ts";
import type { TemplateOwner, TemplateView } from "./configs/guard-templates.ts";
import type { Governance } from "./service.ts";
import {
  AppParams,
  AuditVerification,
  CreateGuardTemplateBody,
  DeprovisionInternalBody,
  Eval,
  EvalsQuery,
  GuardBlock,
  GuardBlocksQuery,
  GUARD_CHECK_BODY_LIMIT_BYTES,
  GuardCheckBody,
  GuardCheckResponse,
  GuardTemplateSchema,
  IngestBody,
  InternalProvisioned,
  MAX_PAGE,
  ObservabilityConfigSchema,
  ProvisioningResult,
  ProvisionInternalBody,
  ReplaceGuardTemplateBody,
  TemplateParams,
  ToolkitConfig,
  TraceBatchResult,
  TraceDetail,
  TraceIngestResult,
  TraceList,
  TraceParams,
  TracesQuery,
} from "./schemas.ts";
import { ObservabilityConfigPatch } from "./configs/observability.ts";
import { NotFoundError } from "../errors.ts";

const tags = ["Governance"];
const templateTags = ["Guard templates"];
const APP = "/workspaces/:workspaceId/governance/apps/:appId";

function templateBody(t: TemplateView): z.input<typeof GuardTemplateSchema> {
  return {
    id: t.id,
    workspaceId: t.workspaceId,
    name: t.name,
    description: t.description,
    guardType: t.guardType as z.input<typeof GuardTemplateSchema>["guardType"],
    config: t.config,
    createdAt: t.createdAt.toISOString(),
    updatedAt: t.updatedAt.toISOString(),
  };
}

/** Who a template call acts for: the key's workspace, or the platform (null) for a platform admin key. */
/** Who restarted an app's audit chain, as governance_audit_restarts records it: the workspace key's id, or the member's email for a member's console session. */
function actorOf(principal: Principal | undefined): string {
  if (principal?.member) return `member:${principal.member.email}`;
  return principal ? `key:${principal.keyId}` : "unknown";
}

function templateOwner(caller: Caller | undefined): TemplateOwner {
  if (caller?.kind === "workspace") return caller.workspaceId;
  if (caller?.kind === "platform-admin") return null;
  throw new Error(`a guard template route was called by ${caller?.kind ?? "nobody"}`);
}

/** `ingestBodyLimitBytes` is read per request (BERTH_INGEST_BODY_LIMIT_BYTES), so documenting the routes needs no configuration. */
export function governanceRoutes(g: Governance, opts: { ingestBodyLimitBytes: () => number }): RouteDef[] {
  return [
    // ---- service-scoped (workspace key) --------------------------------------------------------
    defineRoute({
      method: "get",
      path: `${APP}/traces`,
      operationId: "listTraces",
      tags,
      auth: "workspace",
      summary: "List an app's traces, newest first",
      description: `limit default 20, at most ${MAX_PAGE}; offset default 0. \`project\` equal to the app id matches every trace (a store holds one project), any other value none. \`session_id\` filters exactly. createdAt is the time of the call.`,
      params: AppParams,
      query: TracesQuery,
      responses: { 200: TraceList, 409: null },
      handler: async ({ params, query }) => ({
        status: 200,
        body: await g.reader.traces(await g.store(params.workspaceId, params.appId), params.appId, query),
      }),
    }),
    defineRoute({
      method: "get",
      path: `${APP}/traces/:traceId`,
      operationId: "getTrace",
      tags,
      auth: "workspace",
      summary: "A trace with its prompt, response and guard evaluations",
      params: TraceParams,
      responses: { 200: TraceDetail, 409: null },
      handler: async ({ params }) => {
        const trace = await g.reader.trace(await g.store(params.workspaceId, params.appId), params.traceId);
        if (!trace) throw new NotFoundError("trace_not_found", `No trace ${params.traceId} in ${params.appId}`);
        return { status: 200, body: trace };
      },
    }),
    defineRoute({
      method: "get",
      path: `${APP}/evals`,
      operationId: "listEvals",
      tags,
      auth: "workspace",
      summary: "List an app's evals, newest first",
      description: `limit default 20, at most ${MAX_PAGE}; offset default 0; trace_id: the evals of one trace (relevance, safety, policy_compliance, latency).`,
      params: AppParams,
      query: EvalsQuery,
      responses: { 200: z.array(Eval), 409: null },
      handler: async ({ params, query }) => ({
        status: 200,
        body: await g.reader.evals(await g.store(params.workspaceId, params.appId), query),
      }),
    }),
    defineRoute({
      method: "get",
      path: `${APP}/guard-blocks`,
      operationId: "listGuardBlocks",
      tags,
      auth: "workspace",
      summary: "List an app's guard blocks (blocked and redacted prompts and responses), newest first",
      description: `limit default 20, at most ${MAX_PAGE}; offset default 0; guard_type filters by guard type.`,
      params: AppParams,
      query: GuardBlocksQuery,
      responses: { 200: z.array(GuardBlock), 409: null },
      handler: async ({ params, query }) => ({
        status: 200,
        body: await g.reader.guardBlocks(await g.store(params.workspaceId, params.appId), query),
      }),
    }),
    defineRoute({
      method: "get",
      path: `${APP}/audit/verify`,
      operationId: "verifyAuditTrail",
      tags,
      auth: "workspace",
      summary: "Verify an app's audit chain",
      description:
        "Recomputes every entry's hash (SHA-256 of the previous hash and the entry's canonical content) and names the first entry that does not fit. `restarts` lists every time the app's chain began again with its store (POST or DELETE .../provision, a new App of the same id), with the length and head of the chain that went: a chain that began again is never reported as the whole history.",
      params: AppParams,
      responses: { 200: AuditVerification, 409: null },
      handler: async ({ params }) => {
        const chain = await g.reader.verifyAudit(await g.store(params.workspaceId, params.appId));
        return { status: 200, body: { ...chain, restarts: await g.provisioning.restarts(params.workspaceId, params.appId) } };
      },
    }),
    defineRoute({
      method: "get",
      path: `${APP}/observability-config`,
      operationId: "getObservabilityConfig",
      tags,
      auth: "workspace",
      summary: "An app's guards and evals configuration (defaults when never set)",
      params: AppParams,
      responses: { 200: ObservabilityConfigSchema },
      handler: async ({ params }) => {
        const app = await g.requireApp(params.workspaceId, params.appId);
        return { status: 200, body: (await g.configs.get(params.workspaceId, params.appId, app)).config };
      },
    }),
    defineRoute({
      method: "put",
      path: `${APP}/observability-config`,
      operationId: "updateObservabilityConfig",
      tags,
      auth: "workspace",
      summary: "Update an app's guards and evals (a partial update)",
      description:
        "Only the fields given change; nested objects merge; guards.custom_templates replaces the list and each entry must name an existing guard template, whose configuration is kept with the app's config (deleting or replacing the template later does not change the app). Ingestion applies the new config at once; the toolkit inside the service reads it at its next start. Returns the whole updated config.",
      params: AppParams,
      body: ObservabilityConfigPatch,
      responses: { 200: ObservabilityConfigSchema },
      handler: async ({ params, body, em }) => {
        const app = await g.requireApp(params.workspaceId, params.appId);
        return { status: 200, body: (await g.configs.update(em, params.workspaceId, params.appId, body, app)).config };
      },
    }),
    defineRoute({
      method: "post",
      path: `${APP}/provision`,
      operationId: "provisionGovernance",
      tags,
      auth: "workspace",
      summary: "Force a fresh governance store",
      description:
        "Drops the app's store with all its traces, evals, guard blocks and audit trail (the chain's length and head are recorded first: audit/verify lists the restart), creates an empty one, revokes the app's keys and asks the operator (App annotation berth.dev/governance-generation) to mint a new key and update the app's GOVDB_CONNECTION. Also turns governance back on after DELETE. The credential in the answer is masked.",
      params: AppParams,
      body: z.object({}).strict().optional(),
      responses: { 200: ProvisioningResult, 503: null },
      handler: async ({ params, principal }) => ({
        status: 200,
        body: await g.provisioning.reprovision(params.workspaceId, params.appId, actorOf(principal)),
      }),
    }),
    defineRoute({
      method: "delete",
      path: `${APP}/provision`,
      operationId: "deprovisionGovernance",
      tags,
      auth: "workspace",
      summary: "Remove the governance integration",
      description:
        "Permanently deletes the app's store (traces, evals, guard blocks, audit trail), revokes its keys and switches governance off (App annotation berth.dev/governance-disabled: the operator removes GOVDB_CONNECTION and GOVERNANCE_PROJECT). The observability config is kept. POST .../provision turns it back on.",
      params: AppParams,
      responses: { 204: null, 503: null },
      handler: async ({ params, principal }) => {
        await g.provisioning.disable(params.workspaceId, params.appId, actorOf(principal));
        return { status: 204 };
      },
    }),

    // ---- guard templates (a workspace's own, or the platform's) --------------------------------
    defineRoute({
      method: "get",
      path: "/governance/guard-templates",
      operationId: "listGuardTemplates",
      tags: templateTags,
      auth: "workspace-or-platform-admin",
      summary: "The platform's guard templates and the caller's own, oldest first",
      description:
        "With a workspace key: the platform templates (workspaceId null) and the workspace's own, never another workspace's. With a platform admin key: the platform templates.",
      responses: { 200: z.array(GuardTemplateSchema) },
      handler: async ({ em, caller }) => ({ status: 200, body: (await g.templates.list(em, templateOwner(caller))).map(templateBody) }),
    }),
    defineRoute({
      method: "get",
      path: "/governance/guard-templates/:id",
      operationId: "getGuardTemplate",
      tags: templateTags,
      auth: "workspace-or-platform-admin",
      summary: "One guard template (a platform template or the caller's own)",
      description: "Another workspace's template is 404 guard_template_not_found, as if it did not exist.",
      params: TemplateParams,
      responses: { 200: GuardTemplateSchema },
      handler: async ({ params, em, caller }) => ({
        status: 200,
        body: templateBody(await g.templates.get(em, templateOwner(caller), params.id)),
      }),
    }),
    defineRoute({
      method: "post",
      path: "/governance/guard-templates",
      operationId: "createGuardTemplate",
      tags: templateTags,
      auth: "workspace-or-platform-admin",
      summary: "Create a guard template, owned by the caller's workspace (workspace key) or the platform (platform admin key)",
      description:
        "A workspace's template is seen, used and changed by that workspace alone; a platform template is read by every workspace and changed with a platform admin key only.",
      body: CreateGuardTemplateBody,
      responses: { 201: GuardTemplateSchema },
      handler: async ({ body, em, caller }) => {
        const t = await g.templates.create(em, templateOwner(caller), {
          name: body.name,
          description: body.description ?? null,
          guardType: body.guardType,
          config: body.config ?? GuardTemplateConfig.parse({}),
        });
        return { status: 201, body: templateBody(t), headers: { Location: `/api/v1/governance/guard-templates/${t.id}` } };
      },
    }),
    defineRoute({
      method: "put",
      path: "/governance/guard-templates/:id",
      operationId: "replaceGuardTemplate",
      tags: templateTags,
      auth: "workspace-or-platform-admin",
      summary: "Replace one of the caller's guard templates (every field required)",
      description:
        "A workspace key replaces its workspace's templates; a platform template is 403 guard_template_read_only to it; another workspace's is 404. Apps that use the template keep the configuration they were given until their custom_templates are set again.",
      params: TemplateParams,
      body: ReplaceGuardTemplateBody,
      responses: { 200: GuardTemplateSchema },
      handler: async ({ params, body, em, caller }) => ({
        status: 200,
        body: templateBody(await g.templates.replace(em, templateOwner(caller), params.id, body)),
      }),
    }),
    defineRoute({
      method: "delete",
      path: "/governance/guard-templates/:id",
      operationId: "deleteGuardTemplate",
      tags: templateTags,
      auth: "workspace-or-platform-admin",
      summary: "Delete one of the caller's guard templates",
      description:
        "As PUT: a platform template is 403 guard_template_read_only to a workspace key, another workspace's is 404. Apps that used it are unchanged: they keep the last applied configuration.",
      params: TemplateParams,
      responses: { 204: null },
      handler: async ({ params, em, caller }) => {
        await g.templates.remove(em, templateOwner(caller), params.id);
        return { status: 204 };
      },
    }),

    // ---- the service's own key (GOVDB_CONNECTION) ---------------------------------------------
    defineRoute({
      method: "post",
      path: "/governance/traces",
      operationId: "ingestTraces",
      tags: ["Governance ingestion"],
      auth: "app-key",
      rateLimit: "ingest",
      summary: "Submit one trace or a batch",
      description: `Authorization: Bearer <the key inside GOVDB_CONNECTION>. One trace object (201 created, 200 duplicate, 422 invalid) or { "traces": [...] } with 1-${MAX_BATCH_SIZE} (200 with one result per item; an invalid item is rejected on its own). Idempotent on traceId. Guards and evals run with the app's observability config. Body limit: BERTH_INGEST_BODY_LIMIT_BYTES (default 1 MiB), 413 above. A project other than the key's is 403 project_mismatch. Under a config whose classifier_on_ingestion scores traces with the prompt-injection classifier, an API that cannot load the classifier answers 503 guard_unavailable with Retry-After and stores nothing.`,
      body: IngestBody,
      itemsCheckText: true, // TraceRecord refuses such text item by item: a batch is not refused for one item
      get bodyLimitBytes() {
        return opts.ingestBodyLimitBytes();
      },
      responses: { 201: TraceIngestResult, 200: z.union([TraceIngestResult, TraceBatchResult]), 409: null, 503: null },
      handler: async ({ body, caller }) => {
        const out = await g.ingestion.ingest(caller as Extract<typeof caller, { kind: "app" }>, body);
        if (out.batch)
          return { status: 200, body: { results: out.results, created: out.created, duplicates: out.duplicates, rejected: out.rejected } };
        const one = out.results[0]!;
        return { status: one.status === "created" ? 201 : 200, body: one };
      },
    }),
    defineRoute({
      method: "get",
      path: "/governance/config",
      operationId: "getToolkitConfig",
      tags: ["Governance ingestion"],
      auth: "app-key",
      rateLimit: "ingest",
      summary: "The app's guards and evals configuration, as the toolkit loads it at boot",
      responses: { 200: ToolkitConfig },
      handler: async ({ caller }) => ({ status: 200, body: await g.toolkitConfig(caller as Extract<typeof caller, { kind: "app" }>) }),
    }),
    defineRoute({
      method: "post",
      path: "/governance/guard-check",
      operationId: "checkGuards",
      tags: ["Governance ingestion"],
      auth: "app-key",
      // its own budget: two checks per LLM call in the service's request path, where traces go in
      // batches afterwards; neither may spend what the other needs (docs/api.md, Rate limits)
      rateLimit: "guard",
      summary: "The decision of the app's guards on one prompt or response, for a toolkit without the guard engine",
      description: `Authorization: Bearer <the key inside GOVDB_CONNECTION>. Runs the app's guards on the text with its current observability config (the engine config GET /governance/config serves) and answers the toolkit's GuardDecision without its verdicts; nothing is stored (the call's trace is submitted as usual). Body limit: ${GUARD_CHECK_BODY_LIMIT_BYTES} bytes (a trace's prompt or response at most), 413 above. A project other than the key's is 403 project_mismatch. Rate limit: the "guard" budget of the key. A check whose scoring passes its deadline (BERTH_SCORING_TASK_TIMEOUT_MS) is 503 guard_timeout with Retry-After; a prompt whose config runs the prompt-injection classifier, in an API that cannot load it, is 503 guard_unavailable with Retry-After (never a decision without the model).`,
      body: GuardCheckBody,
      bodyLimitBytes: GUARD_CHECK_BODY_LIMIT_BYTES,
      responses: { 200: GuardCheckResponse, 409: null, 503: null },
      handler: async ({ body, caller }) => ({
        status: 200,
        body: await g.guardCheck.check(caller as Extract<typeof caller, { kind: "app" }>, body),
      }),
    }),

    // ---- the operator (ServiceAccount token) ------------------------------------------------------
    defineRoute({
      method: "post",
      path: "/internal/governance/provision",
      operationId: "internalProvisionGovernance",
      tags: ["Internal"],
      auth: "operator",
      rateLimit: "none", // the operator's own calls: bounded by its work queue's concurrency, never throttled behind a workspace's burst
      summary: "Ensure an App's store and mint its key (the operator only)",
      description:
        "Creates the store when missing (idempotent), revokes the app's previous keys and mints a new one, returned unmasked for the <app>-governance Secret. 404 when the namespace is no workspace; 409 governance_disabled after a public DELETE .../provision; 409 app_deleted for an App (by uid) whose store the finalizer already dropped (a call that arrives after it, from an operator killed before its answer).",
      body: ProvisionInternalBody,
      responses: { 200: InternalProvisioned, 409: null },
      handler: async ({ body }) => ({
        status: 200,
        body: await g.provisioning.provisionForOperator(body),
        headers: { "Cache-Control": "no-store" },
      }),
    }),
    defineRoute({
      method: "delete",
      path: "/internal/governance/provision",
      operationId: "internalDeprovisionGovernance",
      tags: ["Internal"],
      auth: "operator",
      rateLimit: "none", // as above: the operator's finalizer
      summary: "Drop an App's store, role, keys and config (the operator's finalizer)",
      description:
        "Idempotent. Records the uid as deleted for a day, so that a provisioning call for it that runs later is refused (409 app_deleted). A store that belongs to another App of the same name (another uid) is left alone.",
      body: DeprovisionInternalBody,
      responses: { 204: null },
      handler: async ({ body }) => {
        await g.provisioning.deprovisionForOperator(body);
        return { status: 204 };
      },
    }),
  ];
}
