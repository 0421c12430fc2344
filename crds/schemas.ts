// The contract between the API, the operator and kubectl users: the App, Domain and Share kinds.
// These zod schemas are the single source of truth. The CRD YAML (crds/generated/), the REST
// request validation and the OpenAPI document are all derived from them.
import { z } from "zod";

export const GROUP = "berth.dev";
export const VERSION = "v1alpha1";
export const API_VERSION = `${GROUP}/${VERSION}`;

/** Label on a namespace that makes it a Berth workspace; its value is the workspace id. */
export const WORKSPACE_LABEL = "berth.dev/workspace";
/** Label on every child object naming the App it belongs to. */
export const APP_LABEL = "berth.dev/app";

// ---------------------------------------------------------------------------------------------
// Shared field schemas (also used by the REST API, so both refuse the same input).

export const APP_TYPES = ["web", "api", "worker", "cron"] as const;
export const APP_PHASES = ["active", "deploying", "failed", "build_failed", "disabled", "stopped"] as const;
export const VISIBILITIES = ["public", "private"] as const;

/** RFC 1123 DNS label: lowercase alphanumerics and '-', starting and ending alphanumeric. */
export const DNS_LABEL = "^[a-z0-9]([-a-z0-9]*[a-z0-9])?$";
/** An RFC 1123 DNS subdomain: the name of most Kubernetes objects (up to 253 characters). */
export const DNS_SUBDOMAIN = "^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$";
/** A fully qualified domain name of at least two labels, lowercase, no trailing dot. */
export const FQDN = "^([a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?\\.)+[a-z]([-a-z0-9]{0,61}[a-z0-9])?$";

export const fields = {
  name: z.string().min(1).max(100).describe("Display name"),
  slug: z
    .string()
    .min(1)
    .max(63)
    .regex(new RegExp(DNS_LABEL), "must be a DNS label: lowercase letters, digits and '-', starting and ending with a letter or digit")
    .describe(
      "URL-safe name, unique within the workspace: the service is served at <slug>.<baseDomain>, a host that belongs to one service in the whole platform (the first to hold it)",
    ),
  description: z.string().max(2000).describe("Free text for people; Berth does not read it"),
  type: z
    .enum(APP_TYPES)
    .describe(
      "web and api: served over HTTP at the service's host (Deployment, Service, Ingress, autoscaler); worker: a Deployment with no route; cron: a CronJob on schedule",
    ),
  gitRepoUrl: z
    .string()
    .max(2048)
    .regex(/^https?:\/\/[^\s/$.?#][^\s]*$/, "must be an https:// (or http://) URL")
    .describe("URL of the Git repository, cloned over HTTPS (plain HTTP for in-cluster Git servers)"),
  gitBranch: z
    .string()
    .min(1)
    .max(255)
    .regex(/^[^\s~^:?*[\\]+$/, "must be a valid Git branch name")
    .describe("The branch that pushes deploy (with autoDeploy) and that a manual deploy without a commit builds"),
  gitInstallationId: z
    .string()
    .min(1)
    .max(100)
    .describe(
      "Names the Secret git-credentials-<id> (lowercased) in the namespace whose keys username and password hold the credentials of a private repository (the password may be a token)",
    ),
  // Patterns are RE2 (the API server's dialect): no lookaheads, so ".." is refused by a CEL rule.
  dockerfilePath: z
    .string()
    .min(1)
    .max(1024)
    .regex(/^[^/]/, "must be a relative path inside the repository")
    .refine((p) => !/(^|\/)\.\.(\/|$)/.test(p), "must be a relative path inside the repository")
    .meta({
      "x-kubernetes-validations": [{ rule: "!self.matches('(^|/)[.][.](/|$)')", message: "must be a relative path inside the repository" }],
    })
    .describe("The Dockerfile to build, relative to the repository's root; unset: a Dockerfile at the root, else the stack is detected"),
  autoDeploy: z.boolean().describe("Deploy every push to gitBranch that the webhook delivers"),
  releaseCommand: z
    .string()
    .min(1)
    .max(4096)
    .describe("Run once with sh -c in the new image (with the service's environment) before each rollout; a failure stops the rollout"),
  cpuLimitMillicores: z.int().min(50).max(32000).describe("CPU limit; 1000 = 1 vCPU"),
  memoryLimitMi: z.int().min(64).max(131072).describe("Memory limit in MiB"),
  visibility: z
    .enum(VISIBILITIES)
    .describe("private: viewers need a share link (checked at the ingress); public: anyone can open the service"),
  minReplicas: z.int().min(1).max(1000).describe("Replicas the autoscaler keeps at least"),
  maxReplicas: z.int().min(1).max(1000).describe("Replicas the autoscaler may reach; unset: minReplicas (no scaling)"),
  cpuTargetUtilization: z.int().min(1).max(100).describe("CPU utilization percent that triggers autoscaling"),
  port: z.int().min(1).max(65535).describe("Container port the service listens on"),
  schedule: z
    .string()
    .min(1)
    .max(255)
    .regex(
      /^(@(yearly|annually|monthly|weekly|daily|midnight|hourly)|(\S+\s+){4}\S+)$/,
      "must be a cron expression of five fields or a @macro",
    )
    .describe("Cron schedule (type cron only)"),
  image: z
    .string()
    .min(1)
    .max(1024)
    .regex(/^[^\s]+$/, "must be an image reference")
    .describe("Prebuilt image to deploy; skips the build"),
} as const;

/** Defaults shared by the CRD and the API (docs/design.md §3: the CRD schema applies them). */
export const DEFAULTS = {
  type: "web",
  gitBranch: "main",
  autoDeploy: false,
  visibility: "private",
  minReplicas: 1,
  cpuLimitMillicores: 500,
  memoryLimitMi: 512,
  port: 8080,
  suspended: false,
} as const;

// ---------------------------------------------------------------------------------------------
// App

const AppSpecFields = z
  .object({
    name: fields.name,
    slug: fields.slug,
    description: fields.description.optional(),
    type: fields.type.default(DEFAULTS.type),
    gitRepoUrl: fields.gitRepoUrl.optional(),
    gitBranch: fields.gitBranch.default(DEFAULTS.gitBranch),
    gitInstallationId: fields.gitInstallationId.optional(),
    dockerfilePath: fields.dockerfilePath.optional(),
    autoDeploy: fields.autoDeploy.default(DEFAULTS.autoDeploy),
    releaseCommand: fields.releaseCommand.optional(),
    cpuLimitMillicores: fields.cpuLimitMillicores.default(DEFAULTS.cpuLimitMillicores),
    memoryLimitMi: fields.memoryLimitMi.default(DEFAULTS.memoryLimitMi),
    visibility: fields.visibility.default(DEFAULTS.visibility),
    minReplicas: fields.minReplicas.default(DEFAULTS.minReplicas),
    maxReplicas: fields.maxReplicas.optional(),
    cpuTargetUtilization: fields.cpuTargetUtilization.optional(),
    port: fields.port.default(DEFAULTS.port),
    schedule: fields.schedule.optional(),
    image: fields.image.optional(),
    suspended: z.boolean().default(DEFAULTS.suspended).describe("Soft delete: workloads scaled to zero and routing removed; data kept"),
  })
  .strict()
  .describe(
    "What the service is to run and how, written by its team (through the API or kubectl); the operator makes it so and reports in status",
  );

/**
 * A rule between fields, stated once: the CEL expression the API server runs on `kubectl apply`
 * (x-kubernetes-validations) and the same check for zod, which the REST API and the operator
 * run. test/integration/crds.test.ts holds the two to the same answers on the same inputs.
 */
export interface CrossFieldRule<T> {
  cel: string;
  check: (v: T) => boolean;
  message: string;
  field: string;
  reason: "FieldValueInvalid" | "FieldValueRequired" | "FieldValueForbidden";
}

/** The schema with its rules: checked by zod (issues at `field`) and emitted into the CRD. */
export function withRules<S extends z.ZodType<Record<string, unknown>>>(schema: S, rules: readonly CrossFieldRule<z.output<S>>[]): S {
  return schema
    .superRefine((v, ctx) => {
      for (const r of rules) if (!r.check(v)) ctx.addIssue({ code: "custom", path: [r.field], message: r.message, input: v });
    })
    .meta({
      "x-kubernetes-validations": rules.map((r) => ({ rule: r.cel, message: r.message, fieldPath: `.${r.field}`, reason: r.reason })),
    });
}

type AppSpecShape = z.output<typeof AppSpecFields>;

export const APP_RULES: readonly CrossFieldRule<AppSpecShape>[] = [
  {
    cel: "!has(self.maxReplicas) || self.maxReplicas >= self.minReplicas",
    check: (s) => s.maxReplicas === undefined || s.maxReplicas >= s.minReplicas,
    message: "maxReplicas must be greater than or equal to minReplicas",
    field: "maxReplicas",
    reason: "FieldValueInvalid",
  },
  {
    cel: "self.type != 'cron' || has(self.schedule)",
    check: (s) => s.type !== "cron" || s.schedule !== undefined,
    message: "schedule is required when type is cron",
    field: "schedule",
    reason: "FieldValueRequired",
  },
  {
    cel: "self.type == 'cron' || !has(self.schedule)",
    check: (s) => s.type === "cron" || s.schedule === undefined,
    message: "schedule is only allowed when type is cron",
    field: "schedule",
    reason: "FieldValueForbidden",
  },
];

export const AppSpec = withRules(AppSpecFields, APP_RULES);
export type AppSpec = z.output<typeof AppSpec>;
export type AppSpecInput = z.input<typeof AppSpec>;

// Fields shared by the kinds, described once here.

/** A metav1.Condition: one aspect of an object's state. */
const Condition = z
  .object({
    type: z
      .string()
      .min(1)
      .max(316)
      .describe("The aspect the condition reports, in CamelCase (such as Ready); the list holds one condition per type"),
    status: z.enum(["True", "False", "Unknown"]).describe("Whether the condition holds: True, False or Unknown"),
    observedGeneration: z.int().min(0).optional().describe("The metadata.generation the condition was computed from"),
    lastTransitionTime: z.iso
      .datetime()
      .describe("When status last changed, an RFC 3339 time; a new reason or message alone does not move it"),
    reason: z.string().min(1).max(1024).describe("Why the condition has its status, as one CamelCase word (such as RolloutComplete)"),
    message: z.string().max(32768).describe("What happened, for people, and what to do when something is wrong; may be empty"),
  })
  .describe("One aspect of the object's state: whether it holds, why, and since when");
export type Condition = z.output<typeof Condition>;

/** Each kind describes its conditions' types where it uses the list. */
const Conditions = z.array(Condition).meta({ "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["type"] });

const ObservedGeneration = z
  .int()
  .min(0)
  .describe(
    "The metadata.generation this status was computed from; less than metadata.generation until the operator has acted on the latest spec",
  );

/** A time field: `what` happened, an RFC 3339 time, then `note`. */
const timestamp = (what: string, note?: string) => z.iso.datetime().describe(`${what}, an RFC 3339 time${note ? `; ${note}` : ""}`);

/** The App an object belongs to: Releases, Domains and Shares name it, in their own namespace. */
const AppRef = z.object({ name: fields.slug.describe("Name of the App in the same namespace") }).strict();

// Written by operator/app/status.ts.
export const AppStatus = z
  .object({
    phase: z
      .enum(APP_PHASES)
      .optional()
      .describe(
        "Summary of the App's state: active (rolled out and ready, or the CronJob scheduled), deploying (a build, release command or rollout under way), failed (the rollout failed, or the App cannot be deployed: see the Ready condition), build_failed (the newest release failed its build or release command), disabled (suspended), stopped (nothing to run yet)",
      ),
    observedGeneration: ObservedGeneration.optional(),
    conditions: Conditions.describe(
      "Built (there is an image to run), Deployed (its rollout is complete), Ready (the service is available: every wanted replica ready, or the CronJob scheduled) and, where governance applies, GovernanceReady (its store and key are provisioned)",
    ).optional(),
    url: z
      .string()
      .optional()
      .describe(
        "The App's default address, https://<slug>.<baseDomain>; only web and api Apps have one, and it is left out while the spec cannot be used or a deployed App is suspended",
      ),
    latestDeployment: z
      .object({
        id: z.string().describe("The Release's name (<app>-<sequence>), or the revision's (as pipeline.deploy.revisionName)"),
        status: z
          .string()
          .describe("The Release's phase (as its status.phase), or the revision's rollout: in_progress, succeeded or failed"),
        gitCommitSha: z
          .string()
          .optional()
          .describe("The commit the Release builds, 40 hex digits; absent for a rollback or a prebuilt image"),
        gitCommitMessage: z.string().optional().describe("That commit's message"),
        image: z.string().optional().describe("The image it runs: the Release's once built (<repository>@sha256:...), or spec.image"),
        createdAt: timestamp("When the Release was created, or when the operator first saw the revision"),
      })
      .optional()
      .describe(
        "The newest deployment: the newest Release of an App built from Git, or the current revision of the workload (a prebuilt image; a cron App)",
      ),
    pipeline: z
      .object({
        source: z
          .object({
            status: z.string().describe("ok when spec.gitRepoUrl is set, none otherwise"),
            lastCommitSha: z
              .string()
              .optional()
              .describe("The commit of the newest Release (of the serving one when the newest is a rollback), 40 hex digits"),
            lastCommitMessage: z.string().optional().describe("That commit's message"),
          })
          .optional()
          .describe("Where the code comes from"),
        build: z
          .object({
            status: z
              .string()
              .describe(
                "The newest Release's build: pending, building, succeeded, failed, cancelled or skipped (a rollback); succeeded for a prebuilt image, none without a Git repository",
              ),
            buildpack: z
              .string()
              .optional()
              .describe(
                "How the image was made: dockerfile or the detected stack (node, python, go, static); rollback for a rollback, prebuilt for a prebuilt image",
              ),
            imageTag: z.string().optional().describe("The image built (<repository>@sha256:...), or the prebuilt spec.image"),
            durationSeconds: z
              .number()
              .optional()
              .describe("How long the build took, in seconds to a tenth (the Release's buildStartedAt to buildFinishedAt)"),
          })
          .optional()
          .describe("The build of the newest Release, or the prebuilt image"),
        deploy: z
          .object({
            status: z
              .string()
              .describe(
                "The workload's rollout: in_progress, succeeded or failed; none when nothing is deployed, disabled while a web, api or worker App is suspended",
              ),
            deployedAt: timestamp("When the current revision's rollout completed").optional(),
            revisionName: z
              .string()
              .optional()
              .describe("The workload's revision, <app>-<hash of its pod template>: it changes whenever what runs changes"),
          })
          .optional()
          .describe("The rollout of the workload (a Deployment, or a CronJob for a cron App)"),
        runtime: z
          .object({
            status: z
              .string()
              .describe(
                "healthy (rolled out, every wanted replica ready), degraded (some replicas ready), starting (none ready yet), stopped (suspended, or nothing deployed), scheduled (a cron App)",
              ),
            readyReplicas: z.int().describe("Ready pods of the Deployment; 0 for a cron App"),
            totalReplicas: z.int().describe("Pods of the Deployment, of every revision; 0 for a cron App"),
          })
          .optional()
          .describe("The running pods"),
      })
      .optional()
      .describe("The App's delivery in four stages, source, build, deploy and runtime, each with a status word"),
  })
  .describe("What the operator last observed of the App and did about it; written by the operator only");
export type AppStatus = z.output<typeof AppStatus>;

// ---------------------------------------------------------------------------------------------
// Release: one deployment of an App (docs/deployments.md). The API creates it (a push webhook, a
// manual deploy, a rollback); the operator builds it, runs its release command and rolls it out.
// Its spec is a record of what was asked and never changes; its status says how far it got.

/**
 * queued -> building -> releasing -> deploying -> succeeded -> superseded (a later release took
 * over); build_failed, release_failed and failed (the rollout did not become ready) end a release
 * that never served; cancelled: a later release reached deploying before this one finished its
 * build or release command.
 */
export const RELEASE_PHASES = [
  "queued",
  "building",
  "build_failed",
  "releasing",
  "release_failed",
  "deploying",
  "succeeded",
  "failed",
  "superseded",
  "cancelled",
] as const;
export type ReleasePhase = (typeof RELEASE_PHASES)[number];
/** push: a webhook delivery; manual: POST .../deployments; rollback: a redeploy of an earlier release's image. */
export const RELEASE_TRIGGERS = ["push", "manual", "rollback"] as const;
export const COMMIT_SHA = "^[0-9a-f]{40}$";

const ReleaseSpecFields = z
  .object({
    appRef: AppRef.describe("The App this release deploys"),
    sequence: z.int().min(1).describe("The release's number within its App (its name is <app>-<sequence>)"),
    trigger: z
      .enum(RELEASE_TRIGGERS)
      .describe(
        "What made the release: push (a webhook delivery), manual (a deploy through the API) or rollback (an earlier release's image again)",
      ),
    git: z
      .object({
        repoUrl: fields.gitRepoUrl,
        branch: fields.gitBranch.describe("The branch the commit was taken from"),
        commitSha: z
          .string()
          .regex(new RegExp(COMMIT_SHA), "must be a full commit sha (40 lowercase hex digits)")
          .describe("The commit to build: its full SHA-1, 40 lowercase hex digits"),
        commitMessage: z
          .string()
          .max(4096)
          .optional()
          .describe(
            "The commit's message when the API knew it (a push's, or one given to a manual deploy), at most 4096 characters; the build also records it in status.commitMessage",
          ),
        installationId: fields.gitInstallationId.optional(),
        deliveryId: z.string().min(1).max(200).optional().describe("The webhook delivery that triggered it"),
      })
      .strict()
      .optional()
      .describe("The commit to build; absent for a rollback"),
    dockerfilePath: fields.dockerfilePath.optional(),
    releaseCommand: fields.releaseCommand.optional(),
    image: fields.image.optional().describe("An image to deploy without a build (a rollback: the earlier release's image, by digest)"),
    rollbackOf: z.string().min(1).max(253).optional().describe("The release whose image this one deploys again"),
  })
  .strict()
  .describe("What to deploy, as the API asked for it (a push, a manual deploy or a rollback); immutable");

export const ReleaseSpec = withRules(ReleaseSpecFields, [
  {
    cel: "has(self.git) != has(self.image)",
    check: (s) => (s.git === undefined) !== (s.image === undefined),
    message: "a release has either git (a commit to build) or image (a rollback)",
    field: "image",
    reason: "FieldValueInvalid",
  },
]).meta({
  "x-kubernetes-validations": [
    { rule: "self == oldSelf", message: "a release's spec is immutable: create a new release", reason: "FieldValueForbidden" },
  ],
});
export type ReleaseSpec = z.output<typeof ReleaseSpec>;

// Written by operator/release/reconcile.ts (build, release command) and operator/app/reconcile.ts (rollout).
export const ReleaseStatus = z
  .object({
    phase: z
      .enum(RELEASE_PHASES)
      .optional()
      .describe(
        "queued (unset means queued too), building, releasing (the release command runs), deploying (rolling out), succeeded (it serves), superseded (a later release took over); or how it ended early: build_failed, release_failed, failed (the rollout did not become ready), cancelled (a later release reached deploying first)",
      ),
    observedGeneration: ObservedGeneration.optional(),
    image: z.string().optional().describe("What runs: <repository>@sha256:..."),
    stack: z.string().optional().describe("dockerfile, or the detected stack (node, python, go, static)"),
    commitMessage: z
      .string()
      .max(4096)
      .optional()
      .describe("The commit's message as the build read it from the clone, at most 4096 characters"),
    failure: z
      .object({
        step: z
          .string()
          .describe(
            "The step that failed: clone, detect, build or push (the build), release (the release command) or deploy (the rollout)",
          ),
        reason: z
          .string()
          .describe("Why, as one CamelCase word (such as DockerfileInvalid, ReleaseCommandFailed or ProgressDeadlineExceeded)"),
        message: z
          .string()
          .max(4096)
          .describe("What went wrong, for people, with the end of the step's output where there is one; at most 4096 characters"),
      })
      .optional()
      .describe("Why the release ended in build_failed, release_failed or failed"),
    buildStartedAt: timestamp("When the build started (its Job was created)").optional(),
    buildFinishedAt: timestamp("When the build ended, successfully or not").optional(),
    releaseStartedAt: timestamp("When the release command started (its Job was created)", "absent without spec.releaseCommand").optional(),
    releaseFinishedAt: timestamp("When the release command ended, successfully or not").optional(),
    deployStartedAt: timestamp("When the rollout started (the phase became deploying)").optional(),
    deployedAt: timestamp("When the rollout completed and the release began to serve").optional(),
    finishedAt: timestamp("When the release succeeded or ended early (build_failed, release_failed, failed, cancelled)").optional(),
    conditions: Conditions.describe("Not written today: a release's progress is in its phase, its times and its Events").optional(),
  })
  .describe("How far the release got; written by the operator only");
export type ReleaseStatus = z.output<typeof ReleaseStatus>;

// ---------------------------------------------------------------------------------------------
// Domain

export const DomainSpec = z
  .object({
    appRef: AppRef.describe("The App the domain routes to"),
    domain: z
      .string()
      .min(4)
      .max(253)
      .regex(new RegExp(FQDN), "must be a fully qualified domain name in lowercase, without a trailing dot")
      .describe(
        "The fully qualified domain name, lowercase, without a trailing dot (an internationalized name in punycode); immutable: add another Domain instead",
      ),
    targetPort: fields.port.optional().describe("Container port to route to; defaults to the App's port"),
  })
  .strict()
  .describe("The domain to serve and the App it routes to; one App per domain in the whole platform (the first verified claim)")
  .meta({
    "x-kubernetes-validations": [
      {
        rule: "self.domain == oldSelf.domain",
        message: "domain is immutable; add a new Domain instead",
        fieldPath: ".domain",
        reason: "FieldValueForbidden",
      },
    ],
  });
export type DomainSpec = z.output<typeof DomainSpec>;

/**
 * The complete set of a custom domain's TLS states (docs/domains.md), from its cert-manager
 * Certificate: pending (no certificate requested yet: the domain is not verified or not routed),
 * issuing (the first certificate is being issued), active (a valid certificate serves), expiring
 * (it still serves but its renewal is due and has not succeeded yet), failed (issuance failed and
 * no valid certificate serves; retried by cert-manager with backoff), expired (the certificate's
 * notAfter has passed).
 */
export const TLS_STATUSES = ["pending", "issuing", "active", "expiring", "failed", "expired"] as const;
export type TlsStatus = (typeof TLS_STATUSES)[number];
// Written by operator/domain/status.ts.
export const DomainStatus = z
  .object({
    observedGeneration: ObservedGeneration.optional(),
    verified: z
      .boolean()
      .optional()
      .describe(
        "Whether DNS proved the claim: the domain points at dnsTarget (a CNAME, or for an apex A/AAAA records of its addresses) and the TXT record _berth-challenge.<domain> holds this claim's token. Not checked again once true",
      ),
    verifiedAt: timestamp("When verification succeeded", "of the Domains naming one domain, the earliest verified holds it").optional(),
    tlsStatus: z
      .enum(TLS_STATUSES)
      .optional()
      .describe(
        "The certificate: pending (none requested: not verified, or no issuer configured), issuing, active, expiring (its renewal is due and has not succeeded), failed (issuance failed; cert-manager retries), expired",
      ),
    dnsTarget: z.string().optional().describe("The platform's ingress host, which the domain's CNAME must point at"),
    lastCheckedAt: timestamp("When DNS was last checked").optional(),
    nextCheckAt: timestamp(
      "When the operator checks DNS again",
      "absent once verified, and 48 hours after the Domain was created",
    ).optional(),
    handledVerifyRequest: z
      .string()
      .max(100)
      .optional()
      .describe("The berth.dev/verify-requested annotation value the last check answered"),
    certificateNotAfter: timestamp("When the serving certificate expires (its notAfter)", "absent until one is issued").optional(),
    conditions: Conditions.describe(
      "Verified (DNS proved the claim), Routed (its Ingress routes to the App), CertificateReady (tlsStatus active or expiring) and Ready (all three: served over HTTPS)",
    ).optional(),
  })
  .describe("Verification, routing and certificate of the domain; written by the operator only");
export type DomainStatus = z.output<typeof DomainStatus>;

// ---------------------------------------------------------------------------------------------
// Share

export const ShareSpec = z
  .object({
    appRef: AppRef.describe("The App the link opens"),
    expiresAt: z.iso.datetime().optional().describe("When the link stops working, an RFC 3339 time; never when omitted"),
    requireAuth: z.boolean().default(false).describe("Viewers must sign in with a platform account"),
    tokenHash: z
      .string()
      .regex(/^[a-f0-9]{64}$/, "must be a SHA-256 hex digest")
      .describe("SHA-256 of the share token; the token itself is never stored"),
  })
  .strict()
  .describe("A share link, written by the API when the link is made; revoking the link deletes the Share");
export type ShareSpec = z.output<typeof ShareSpec>;

export const ShareStatus = z
  .object({
    observedGeneration: ObservedGeneration.optional(),
    active: z.boolean().optional().describe("Whether the link works (not expired); not written today"),
    conditions: Conditions.describe("Not written today").optional(),
  })
  .describe("Not written by Berth today: whether a link works is decided from spec.expiresAt each time it is used");
export type ShareStatus = z.output<typeof ShareStatus>;

// ---------------------------------------------------------------------------------------------
// Kinds: what the generator turns into CustomResourceDefinitions.

export interface KindDef {
  kind: string;
  plural: string;
  singular: string;
  shortNames: string[];
  /** What `kubectl explain <kind>` says of the kind. */
  description: string;
  spec: z.ZodType;
  status: z.ZodType;
  printerColumns: { name: string; type: string; jsonPath: string; priority?: number; description?: string }[];
}

export const KINDS: KindDef[] = [
  {
    kind: "App",
    plural: "apps",
    singular: "app",
    shortNames: ["bapp"],
    spec: AppSpec,
    status: AppStatus,
    description:
      "A Berth service: what it runs (a prebuilt image, or builds of a Git repository), how (web, api, worker or cron; replicas, limits) and who may open it. The operator makes its workloads and route; its status tells how far it got and why (docs/services.md).",
    printerColumns: [
      { name: "Slug", type: "string", jsonPath: ".spec.slug" },
      { name: "Type", type: "string", jsonPath: ".spec.type" },
      { name: "Phase", type: "string", jsonPath: ".status.phase" },
      { name: "Ready", type: "string", jsonPath: '.status.conditions[?(@.type=="Ready")].status' },
      { name: "URL", type: "string", jsonPath: ".status.url", priority: 1 },
      { name: "Age", type: "date", jsonPath: ".metadata.creationTimestamp" },
    ],
  },
  {
    kind: "Release",
    plural: "releases",
    singular: "release",
    shortNames: ["brelease"],
    spec: ReleaseSpec,
    status: ReleaseStatus,
    description:
      "One deployment of an App: a commit to build (or an earlier image again), then its release command, then its rollout. Made by the API (a push, a manual deploy, a rollback); its status is the deployment's progress (docs/deployments.md).",
    printerColumns: [
      { name: "App", type: "string", jsonPath: ".spec.appRef.name" },
      { name: "Trigger", type: "string", jsonPath: ".spec.trigger" },
      { name: "Commit", type: "string", jsonPath: ".spec.git.commitSha" },
      { name: "Phase", type: "string", jsonPath: ".status.phase" },
      { name: "Image", type: "string", jsonPath: ".status.image", priority: 1 },
      { name: "Age", type: "date", jsonPath: ".metadata.creationTimestamp" },
    ],
  },
  {
    kind: "Domain",
    plural: "domains",
    singular: "domain",
    shortNames: ["bdomain"],
    spec: DomainSpec,
    status: DomainStatus,
    description:
      "A custom domain of an App: verified by DNS (a CNAME to the ingress and this claim's TXT record), then routed with a certificate (docs/domains.md).",
    printerColumns: [
      { name: "Domain", type: "string", jsonPath: ".spec.domain" },
      { name: "App", type: "string", jsonPath: ".spec.appRef.name" },
      { name: "Verified", type: "boolean", jsonPath: ".status.verified" },
      { name: "TLS", type: "string", jsonPath: ".status.tlsStatus" },
      { name: "Age", type: "date", jsonPath: ".metadata.creationTimestamp" },
    ],
  },
  {
    kind: "Share",
    plural: "shares",
    singular: "share",
    shortNames: ["bshare"],
    spec: ShareSpec,
    status: ShareStatus,
    description:
      "A share link of an App: who holds its token (kept only as a hash) may open the service, a private one too, until it expires or is revoked (docs/shares.md).",
    printerColumns: [
      { name: "App", type: "string", jsonPath: ".spec.appRef.name" },
      { name: "Auth", type: "boolean", jsonPath: ".spec.requireAuth" },
      { name: "Expires", type: "string", jsonPath: ".spec.expiresAt" },
      { name: "Age", type: "date", jsonPath: ".metadata.creationTimestamp" },
    ],
  },
];
