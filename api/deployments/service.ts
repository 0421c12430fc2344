// Deployments (docs/deployments.md): each one is a Release custom resource in the workspace's
// namespace, created here (a push webhook, a manual deploy, a rollback) and carried through build,
// release command and rollout by the operator. This module lists them, starts them, reads their
// build logs, keeps each service's webhook secret (in a Secret) and acts on push deliveries,
// once each (deduplicated in PostgreSQL). How a provider's deliveries are authenticated and read
// is ./webhooks.ts; how a branch's head is read from the repository is ./git.ts.
import { randomBytes } from "node:crypto";
import type { MikroORM } from "@mikro-orm/postgresql";
import { z } from "zod";
import { API_VERSION, APP_LABEL, AppSpec, COMMIT_SHA, RELEASE_PHASES, RELEASE_TRIGGERS, type ReleaseSpec } from "../../crds/schemas.ts";
import {
  gitCredentialsSecret,
  jobName,
  newestFirst,
  phaseOf,
  releaseName,
  releaseRef,
  RELEASE_LABEL,
  RELEASE_STEP_LABEL,
  type ReleaseObject as ReleaseShape,
} from "../../crds/release.ts";
import { API_FIELD_MANAGER, isConflict, isNotFound, type KubeClient, type KubeObject } from "../../kube/client.ts";
import type { Logger } from "../../kube/logger.ts";
import { groupOf, type Access } from "../../kube/rbac.ts";
import { BadRequestError, ConflictError, DomainError, NotFoundError, UnauthorizedError } from "../errors.ts";
import type { Outbound } from "../http/outbound.ts";
import type { AppObject, AppsService } from "../apps/service.ts";
import { branchHead } from "./git.ts";
import { repoIdentity, WEBHOOK_DELIVERY_RETENTION_DAYS, type WebhookProvider } from "./webhooks.ts";

export const DEPLOYMENTS_ACCESS: Access[] = [
  {
    group: groupOf(API_VERSION),
    resource: "releases",
    verbs: ["get", "list", "create"],
    why: "Deployments are Release resources: listed per service, read, and created by webhooks, manual deploys and rollbacks",
  },
  {
    group: "",
    resource: "secrets",
    verbs: ["get", "create", "patch"],
    scope: "workspace",
    why: "A service's webhook secret is kept in the Secret <app>-webhook of its workspace namespace; Git credentials (git-credentials-<installation>) are read for the branch head",
  },
  {
    group: "",
    resource: "pods",
    verbs: ["list"],
    scope: "workspace",
    why: "A deployment's build and release-command logs are read from its Job pods",
  },
  {
    group: "",
    resource: "pods/log",
    verbs: ["get"],
    scope: "workspace",
    why: "A deployment's build and release-command logs are read from its Job pods",
  },
];

const MAX_LOG_BYTES = 1024 * 1024;

export const Deployment = z
  .object({
    id: z.string().describe("The Release's name: <appId>-<number>"),
    number: z.int(),
    status: z.enum(RELEASE_PHASES),
    trigger: z.enum(RELEASE_TRIGGERS),
    gitBranch: z.string().nullable(),
    gitCommitSha: z.string().nullable(),
    gitCommitMessage: z.string().nullable(),
    image: z.string().nullable().describe("What runs: <repository>@sha256:..., once built"),
    stack: z.string().nullable().describe("dockerfile, or the detected stack"),
    rollbackOf: z.string().nullable(),
    failure: z.object({ step: z.string(), reason: z.string(), message: z.string() }).nullable(),
    createdAt: z.string(),
    buildStartedAt: z.string().nullable(),
    buildFinishedAt: z.string().nullable(),
    releaseStartedAt: z.string().nullable(),
    releaseFinishedAt: z.string().nullable(),
    deployStartedAt: z.string().nullable(),
    deployedAt: z.string().nullable(),
    finishedAt: z.string().nullable(),
  })
  .meta({ id: "Deployment" });
export type Deployment = z.output<typeof Deployment>;

export const DeploymentList = z.object({ data: z.array(Deployment) }).meta({ id: "DeploymentList" });

export const DeployBody = z
  .object({
    commitSha: z
      .string()
      .regex(new RegExp(COMMIT_SHA), "must be a full commit sha (40 lowercase hex digits)")
      .optional()
      .describe("The commit to build; the branch's latest commit when omitted"),
    commitMessage: z.string().max(4096).optional(),
  })
  .strict()
  .optional();

export const WebhookSecret = z
  .object({
    secret: z.string().describe("Shown once: the HMAC key to configure in GitHub (Settings → Webhooks → Secret)"),
    url: z
      .string()
      .describe("GitHub's payload URL: absolute when the API knows its public URL (BERTH_PUBLIC_URL), else a path on the API's host"),
    gitlabUrl: z.string().describe("GitLab's webhook URL, the same way"),
  })
  .meta({ id: "WebhookSecret" });

export const WebhookOutcome = z
  .object({
    status: z.enum(["queued", "ignored", "duplicate", "pong"]),
    reason: z.string().optional(),
    deployment: Deployment.optional(),
  })
  .meta({ id: "WebhookOutcome" });

export interface DeploymentsDeps {
  kube: KubeClient;
  /** The services: a deployment's App is read as GET Service reads it (404 app_not_found alike). */
  apps: Pick<AppsService, "load">;
  orm: MikroORM;
  /** The API's public URL (BERTH_PUBLIC_URL, without /api/v1): webhook URLs are given absolute under it. */
  publicUrl?: string | undefined;
  /** How the branch head is read from a user's gitRepoUrl (api/http/outbound.ts). */
  outbound: Outbound;
  log?: Logger;
}

/** A Release as the client reads it. */
type ReleaseObject = KubeObject & Pick<ReleaseShape, "spec" | "status">;

const webhookSecretName = (app: string) => `${app}-webhook`;

/** A Secret that does not exist is undefined; any other failure (RBAC, the API server) is one. */
const absent = (err: unknown): undefined => {
  if (isNotFound(err)) return undefined;
  throw err;
};

/** The API's view of a Release. */
export function toDeployment(r: ReleaseObject): Deployment {
  const s = r.status ?? {};
  return {
    id: r.metadata.name!,
    number: r.spec.sequence,
    status: phaseOf(r),
    trigger: r.spec.trigger,
    gitBranch: r.spec.git?.branch ?? null,
    gitCommitSha: r.spec.git?.commitSha ?? null,
    gitCommitMessage: r.spec.git?.commitMessage ?? s.commitMessage ?? null,
    image: s.image ?? r.spec.image ?? null,
    stack: s.stack ?? null,
    rollbackOf: r.spec.rollbackOf ?? null,
    failure: s.failure ?? null,
    createdAt: new Date(r.metadata.creationTimestamp ?? 0).toISOString(),
    buildStartedAt: s.buildStartedAt ?? null,
    buildFinishedAt: s.buildFinishedAt ?? null,
    releaseStartedAt: s.releaseStartedAt ?? null,
    releaseFinishedAt: s.releaseFinishedAt ?? null,
    deployStartedAt: s.deployStartedAt ?? null,
    deployedAt: s.deployedAt ?? null,
    finishedAt: s.finishedAt ?? null,
  };
}

/** The phases after which a pushed commit may be deployed again by a webhook. */
const RETRYABLE_PHASES: ReadonlySet<string> = new Set(["build_failed", "release_failed", "failed", "cancelled"]);

/** A soft-deleted service runs nothing, so it deploys nothing: 409 until it is resumed. */
function refuseSuspended(spec: AppSpec): void {
  if (spec.suspended)
    throw new ConflictError("service_suspended", "The service is soft-deleted: resume it (POST .../resume) before deploying.");
}

export class DeploymentsService {
  readonly #d: DeploymentsDeps;

  constructor(d: DeploymentsDeps) {
    this.#d = d;
  }

  async #app(wsId: string, appId: string): Promise<{ ns: string; app: AppObject; spec: AppSpec }> {
    const app = await this.#d.apps.load(wsId, appId);
    const ns = app.metadata.namespace!;
    const spec = AppSpec.safeParse(app.spec);
    if (!spec.success)
      throw new ConflictError("invalid_service", "The service's spec is invalid; fix it first (GET the service for its status).");
    return { ns, app, spec: spec.data };
  }

  async #releases(ns: string, appId: string): Promise<ReleaseObject[]> {
    const list = await this.#d.kube.list<ReleaseObject>(API_VERSION, "Release", ns, { labelSelector: `${APP_LABEL}=${appId}` });
    return newestFirst(list.items.filter((r) => r.spec?.appRef?.name === appId));
  }

  async list(wsId: string, appId: string): Promise<{ data: Deployment[] }> {
    const { ns } = await this.#app(wsId, appId);
    return { data: (await this.#releases(ns, appId)).map(toDeployment) };
  }

  async #release(wsId: string, appId: string, id: string): Promise<{ ns: string; release: ReleaseObject }> {
    const { ns } = await this.#app(wsId, appId);
    const release = await this.#d.kube.get<ReleaseObject>(releaseRef(ns, id));
    if (!release || release.spec?.appRef?.name !== appId)
      throw new NotFoundError("deployment_not_found", `No deployment ${id} of service ${appId}`);
    return { ns, release };
  }

  async get(wsId: string, appId: string, id: string): Promise<Deployment> {
    return toDeployment((await this.#release(wsId, appId, id)).release);
  }

  /** Creates the next Release of the App: <app>-<n>, n one more than the highest (a name taken in between is retried). */
  async #create(ns: string, app: AppObject, fields: Omit<ReleaseSpec, "appRef" | "sequence">): Promise<ReleaseObject> {
    const appId = app.metadata.name!;
    for (let attempt = 0; attempt < 5; attempt++) {
      const sequence = ((await this.#releases(ns, appId))[0]?.spec.sequence ?? 0) + 1 + attempt;
      try {
        return await this.#d.kube.create<ReleaseObject>(
          {
            apiVersion: API_VERSION,
            kind: "Release",
            metadata: {
              name: releaseName(appId, sequence),
              namespace: ns,
              labels: { [APP_LABEL]: appId },
              ownerReferences: [
                { apiVersion: API_VERSION, kind: "App", name: appId, uid: app.metadata.uid!, controller: false, blockOwnerDeletion: false },
              ],
            },
            spec: { appRef: { name: appId }, sequence, ...fields },
          },
          "berth-api",
        );
      } catch (err) {
        if (!isConflict(err)) throw err;
      }
    }
    throw new ConflictError("deployment_conflict", "Other deployments of this service were started at the same moment; retry.");
  }

  #gitFields(spec: AppSpec, sha: string, message: string | undefined, deliveryId?: string): Omit<ReleaseSpec, "appRef" | "sequence"> {
    return {
      trigger: deliveryId ? "push" : "manual",
      git: {
        repoUrl: spec.gitRepoUrl!,
        branch: spec.gitBranch,
        commitSha: sha,
        ...(message ? { commitMessage: message.slice(0, 4096) } : {}),
        ...(spec.gitInstallationId ? { installationId: spec.gitInstallationId } : {}),
        ...(deliveryId ? { deliveryId } : {}),
      },
      ...(spec.dockerfilePath ? { dockerfilePath: spec.dockerfilePath } : {}),
      ...(spec.releaseCommand ? { releaseCommand: spec.releaseCommand } : {}),
    };
  }

  /** POST .../deployments: a build of the given commit, or of the branch's latest one. */
  async deploy(
    wsId: string,
    appId: string,
    body: { commitSha?: string | undefined; commitMessage?: string | undefined } | undefined,
  ): Promise<Deployment> {
    const { ns, app, spec } = await this.#app(wsId, appId);
    refuseSuspended(spec);
    if (!spec.gitRepoUrl)
      throw new ConflictError("no_repository", "The service has no gitRepoUrl: it deploys its image (PATCH image to change it).");
    let sha = body?.commitSha;
    if (!sha) {
      const auth = spec.gitInstallationId ? await this.#gitCredentials(ns, spec.gitInstallationId) : undefined;
      sha = await branchHead(this.#d.outbound, spec.gitRepoUrl, spec.gitBranch, auth, this.#d.log);
      if (!sha) throw new ConflictError("branch_not_found", `The repository has no branch ${spec.gitBranch}: push it first.`);
    }
    return toDeployment(await this.#create(ns, app, this.#gitFields(spec, sha, body?.commitMessage)));
  }

  /** POST .../deployments/{id}/redeploy: the earlier release's image again, without a build. */
  async redeploy(wsId: string, appId: string, id: string): Promise<Deployment> {
    const { ns, release } = await this.#release(wsId, appId, id);
    const image = release.status?.image;
    if (!image || !/@sha256:[0-9a-f]{64}$/.test(image)) {
      throw new ConflictError(
        "deployment_not_built",
        `Deployment ${id} has no built image (it is ${phaseOf(release)}): only a deployment that was built can be deployed again.`,
      );
    }
    const { app, spec } = await this.#app(wsId, appId);
    refuseSuspended(spec);
    return toDeployment(await this.#create(ns, app, { trigger: "rollback", image, rollbackOf: id }));
  }

  /** The build's and the release command's logs, as text (while they run and after). */
  async logs(wsId: string, appId: string, id: string): Promise<string> {
    const { ns, release } = await this.#release(wsId, appId, id);
    const out: string[] = [];
    for (const step of ["build", "release"] as const) {
      const pods = await this.#d.kube.core.listNamespacedPod({
        namespace: ns,
        labelSelector: `${RELEASE_LABEL}=${release.metadata.name},${RELEASE_STEP_LABEL}=${step}`,
      });
      for (const pod of pods.items) {
        out.push(`==> ${step} (${jobName(release.metadata.name!, step)}, pod ${pod.metadata?.name})`);
        try {
          const text = await this.#d.kube.core.readNamespacedPodLog({
            namespace: ns,
            name: pod.metadata!.name!,
            limitBytes: MAX_LOG_BYTES,
          });
          out.push(String(text).replace(/\n$/, ""));
        } catch (err) {
          out.push(`(no logs yet: ${isNotFound(err) ? "the pod is gone" : "the container has not started"})`);
        }
      }
    }
    if (out.length === 0) out.push(release.spec.image ? "(a rollback: nothing was built)" : "(the build has not started yet)");
    return `${out.join("\n")}\n`;
  }

  /** An installation's Git credentials (the Secret git-credentials-<id>) for reading the branch head; undefined without them. */
  async #gitCredentials(ns: string, installationId: string): Promise<{ username: string; password: string } | undefined> {
    const s = await this.#d.kube.core.readNamespacedSecret({ name: gitCredentialsSecret(installationId), namespace: ns }).catch(absent);
    const get = (k: string) => (s?.data?.[k] ? Buffer.from(s.data[k], "base64").toString() : undefined);
    const username = get("username"),
      password = get("password");
    return username && password ? { username, password } : undefined;
  }

  // ---- webhooks -------------------------------------------------------------------------------

  /** POST .../webhook-secret: a new secret (the old one stops working), shown once. */
  async rotateWebhookSecret(wsId: string, appId: string): Promise<z.infer<typeof WebhookSecret>> {
    const { ns, app } = await this.#app(wsId, appId);
    const secret = randomBytes(32).toString("base64url");
    const body = {
      metadata: {
        name: webhookSecretName(appId),
        namespace: ns,
        labels: { [APP_LABEL]: appId },
        ownerReferences: [
          { apiVersion: API_VERSION, kind: "App", name: appId, uid: app.metadata.uid!, controller: false, blockOwnerDeletion: false },
        ],
      },
      type: "Opaque",
      stringData: { secret },
    };
    try {
      await this.#d.kube.core.createNamespacedSecret({ namespace: ns, body });
    } catch (err) {
      if (!isConflict(err)) throw err;
      await this.#d.kube.mergePatch(
        { apiVersion: "v1", kind: "Secret", namespace: ns, name: body.metadata.name },
        { stringData: { secret } },
        API_FIELD_MANAGER,
      );
    }
    const base = `${this.#d.publicUrl ?? ""}/api/v1/webhooks`;
    return { secret, url: `${base}/github/${wsId}/${appId}`, gitlabUrl: `${base}/gitlab/${wsId}/${appId}` };
  }

  async #webhookSecret(ns: string, appId: string): Promise<string | undefined> {
    const s = await this.#d.kube.core.readNamespacedSecret({ name: webhookSecretName(appId), namespace: ns }).catch(absent);
    const v = s?.data?.secret;
    return v ? Buffer.from(v, "base64").toString() : undefined;
  }

  /**
   * A push delivery, from GitHub or GitLab: authenticity first (an unknown service, one without a
   * secret and a wrong signature or token are the same 401, so the endpoint tells nothing to who
   * does not hold the secret), then the event, the repository, the branch and autoDeploy, then the
   * delivery id, once.
   */
  async webhook(
    provider: WebhookProvider,
    wsId: string,
    appId: string,
    headers: (name: string) => string | undefined,
    raw: Buffer | undefined,
    payload: unknown,
  ): Promise<{ status: number; body: z.output<typeof WebhookOutcome> }> {
    const refused = new UnauthorizedError(
      `The delivery's ${provider.proof} does not match this service's webhook secret (POST .../webhook-secret shows a new one).`,
    );
    let target: { ns: string; app: AppObject; spec: AppSpec };
    try {
      target = await this.#app(wsId, appId);
    } catch (err) {
      if (err instanceof DomainError && err.status === 404) throw refused;
      throw err;
    }
    const secret = await this.#webhookSecret(target.ns, appId);
    if (!secret || !raw || !provider.authentic(headers, raw, secret)) throw refused;

    const event = provider.event(headers);
    if (event === "ping") return { status: 200, body: { status: "pong" } };
    if (event !== "push")
      return { status: 202, body: { status: "ignored", reason: `event ${event ?? "(none)"} is not handled: subscribe to push events` } };
    const delivery = provider.delivery(headers);
    if (!delivery || delivery.length > 200)
      throw new BadRequestError("delivery_id_missing", `A delivery needs its ${provider.deliveryHeader} header (at most 200 characters).`);
    const p = provider.push(payload);
    const { ns, app, spec } = target;
    if (spec.suspended)
      return { status: 202, body: { status: "ignored", reason: "the service is soft-deleted: resume it to deploy again" } };
    if (!spec.gitRepoUrl) return { status: 202, body: { status: "ignored", reason: "the service has no gitRepoUrl" } };
    if (p.repo && repoIdentity(p.repo) !== repoIdentity(spec.gitRepoUrl)) {
      throw new DomainError(422, "repository_mismatch", `The push is for ${p.repo}, but the service builds ${spec.gitRepoUrl}.`);
    }
    if (!p.ref.startsWith("refs/heads/")) return { status: 202, body: { status: "ignored", reason: `${p.ref} is not a branch` } };
    const branch = p.ref.slice("refs/heads/".length);
    if (p.deleted || /^0{40}$/.test(p.after)) return { status: 202, body: { status: "ignored", reason: `branch ${branch} was deleted` } };
    if (branch !== spec.gitBranch)
      return { status: 202, body: { status: "ignored", reason: `the push is to ${branch}; the service deploys ${spec.gitBranch}` } };
    if (!spec.autoDeploy)
      return { status: 202, body: { status: "ignored", reason: "autoDeploy is off: deploy with POST .../deployments" } };

    const conn = this.#d.orm.em.getConnection();
    await conn.execute(`delete from webhook_deliveries where received_at < now() - make_interval(days => ?)`, [
      WEBHOOK_DELIVERY_RETENTION_DAYS,
    ]);
    const claimed = await conn.execute<{ delivery_id: string }[]>(
      `insert into webhook_deliveries (workspace_id, app_id, delivery_id) values (?, ?, ?) on conflict do nothing returning delivery_id`,
      [wsId, appId, delivery],
    );
    if (claimed.length === 0) return { status: 200, body: { status: "duplicate", reason: `delivery ${delivery} was already handled` } };
    // A push of a commit that has a release already (queued, built, serving or replaced) is not
    // deployed again: a captured signed delivery re-sent under a new id cannot roll the service
    // back. A commit whose release failed or was cancelled may be pushed again. (The delivery
    // stays recorded: it was handled, by ignoring it.)
    const again = (await this.#releases(ns, appId)).find((r) => r.spec.git?.commitSha === p.after && !RETRYABLE_PHASES.has(phaseOf(r)));
    if (again)
      return {
        status: 202,
        body: {
          status: "ignored",
          reason: `commit ${p.after.slice(0, 12)} has a deployment already (${again.metadata.name}, ${phaseOf(again)}): deploy it again with POST .../deployments`,
        },
      };
    try {
      const release = await this.#create(ns, app, this.#gitFields(spec, p.after, p.message, delivery));
      await conn.execute(`update webhook_deliveries set release_name = ? where workspace_id = ? and app_id = ? and delivery_id = ?`, [
        release.metadata.name,
        wsId,
        appId,
        delivery,
      ]);
      return { status: 202, body: { status: "queued", deployment: toDeployment(release) } };
    } catch (err) {
      // Not acted on: a redelivery may try again.
      await conn.execute(`delete from webhook_deliveries where workspace_id = ? and app_id = ? and delivery_id = ?`, [
        wsId,
        appId,
        delivery,
      ]);
      throw err;
    }
  }
}
