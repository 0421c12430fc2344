// Deployments (docs/deployments.md): each one is a Release custom resource in the workspace's
// namespace, created here (a push webhook, a manual deploy, a rollback) and carried through build,
// release command and rollout by the operator. This module lists them, starts them, reads their
// build logs, and verifies GitHub push webhooks (HMAC-SHA256 over the raw body, a per-service
// secret kept in a Secret, deliveries deduplicated in PostgreSQL).
import { createHmac, randomBytes, timingSafeEqual } from "node:crypto";
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
import { OutboundError, type Outbound, type OutboundResponse } from "../http/outbound.ts";
import type { AppObject, AppsService } from "./service.ts";

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
    why: "A service's webhook secret is kept in the Secret <app>-webhook of its workspace namespace; Git credentials (git-credentials-<installation>) are read for the branch head",
  },
  { group: "", resource: "pods", verbs: ["list"], why: "A deployment's build and release-command logs are read from its Job pods" },
  { group: "", resource: "pods/log", verbs: ["get"], why: "A deployment's build and release-command logs are read from its Job pods" },
];

/** Delivery ids are remembered this long (GitHub redelivers for up to 3 days on request). */
export const WEBHOOK_DELIVERY_RETENTION_DAYS = 30;
/** Largest webhook body read (GitHub caps payloads at 25 MB; pushes of huge histories are cut by GitHub to 20 commits). */
export const WEBHOOK_BODY_LIMIT_BYTES = 5 * 1024 * 1024;
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

/** GitHub's X-Hub-Signature-256 (sha256=<hex>) of `body` with `secret`, checked in constant time. */
export function signatureMatches(header: string | undefined, body: Buffer, secret: string): boolean {
  const m = /^sha256=([0-9a-f]{64})$/i.exec(header ?? "");
  const want = createHmac("sha256", secret).update(body).digest();
  const got = m ? Buffer.from(m[1]!.toLowerCase(), "hex") : Buffer.alloc(32);
  return timingSafeEqual(want, got) && m !== null;
}

/** A repository URL reduced to what identifies it: host and path, lowercased, without .git or a trailing slash. */
export function repoIdentity(url: string): string {
  try {
    const u = new URL(url);
    return `${u.host.toLowerCase()}${u.pathname
      .replace(/\/+$/, "")
      .replace(/\.git$/, "")
      .toLowerCase()}`;
  } catch {
    return url;
  }
}

/** What a GitHub push payload must carry (other fields are ignored). */
const GithubPush = z.object({
  ref: z.string().max(1024),
  after: z.string().regex(/^[0-9a-f]{40}$/),
  deleted: z.boolean().optional(),
  head_commit: z.object({ id: z.string(), message: z.string() }).nullable().optional(),
  repository: z.object({ clone_url: z.string().optional(), html_url: z.string().optional(), url: z.string().optional() }).optional(),
});

const GIT_TIMEOUT_MS = 15_000;
/** A ref advertisement larger than this is refused (a repository with tens of thousands of refs is a few MiB). */
export const GIT_REFS_LIMIT_BYTES = 8 * 1024 * 1024;

/**
 * A branch's head commit, from git's smart HTTP advertisement (info/refs?service=git-upload-pack),
 * fetched through the outbound policy. Every failure is the same 502 to the user: what the API
 * found at the URL (a status, a socket error, a refused address) goes to the log only.
 */
export async function branchHead(
  outbound: Outbound,
  repoUrl: string,
  branch: string,
  auth?: { username: string; password: string },
  log?: Logger,
): Promise<string | undefined> {
  const url = `${repoUrl.replace(/\/+$/, "")}/info/refs?service=git-upload-pack`;
  const headers: Record<string, string> = {
    "User-Agent": "git/berth",
    ...(auth ? { Authorization: `Basic ${Buffer.from(`${auth.username}:${auth.password}`).toString("base64")}` } : {}),
  };
  const unreachable = (detail: string) => {
    log?.info({ repoUrl, detail }, "a branch head could not be read");
    return new DomainError(
      502,
      "git_unreachable",
      `The branch ${branch} could not be read from the repository (no answer, an address the platform does not reach, or no Git server over HTTP(S) there): check gitRepoUrl and its credentials (gitInstallationId), or deploy a given commitSha.`,
    );
  };
  let res: OutboundResponse;
  try {
    res = await outbound.get(url, { headers, timeoutMs: GIT_TIMEOUT_MS, maxBytes: GIT_REFS_LIMIT_BYTES });
  } catch (err) {
    throw unreachable(err instanceof OutboundError ? err.detail : String(err));
  }
  if (res.status < 200 || res.status > 299) throw unreachable(`the server answered ${res.status}`);
  return headOf(res.body, branch);
}

/** The sha of refs/heads/<branch> in a pkt-line ref advertisement. Pure. */
export function headOf(advertisement: Buffer, branch: string): string | undefined {
  let i = 0;
  const want = `refs/heads/${branch}`;
  while (i + 4 <= advertisement.length) {
    const len = Number.parseInt(advertisement.subarray(i, i + 4).toString(), 16);
    if (Number.isNaN(len)) return undefined;
    if (len === 0) {
      i += 4;
      continue;
    }
    const line = advertisement
      .subarray(i + 4, i + len)
      .toString()
      .replace(/\n$/, "");
    i += len;
    const [sha, rest] = line.split(" ", 2);
    const ref = rest?.split("\0")[0];
    if (ref === want && sha && /^[0-9a-f]{40}$/.test(sha)) return sha;
  }
  return undefined;
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

  // ---- webhooks -------------------------------------------------------------------------------

  async #gitCredentials(ns: string, installationId: string): Promise<{ username: string; password: string } | undefined> {
    const s = await this.#d.kube.core.readNamespacedSecret({ name: gitCredentialsSecret(installationId), namespace: ns }).catch(absent);
    const get = (k: string) => (s?.data?.[k] ? Buffer.from(s.data[k], "base64").toString() : undefined);
    const username = get("username"),
      password = get("password");
    return username && password ? { username, password } : undefined;
  }

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

/** What a push says, whichever the provider. */
export interface Push {
  ref: string;
  after: string;
  deleted: boolean;
  repo: string | undefined;
  message: string | undefined;
}

/** How one Git provider signs, names and shapes its deliveries. */
export interface WebhookProvider {
  /** What proves the delivery, for the 401's message. */
  proof: string;
  deliveryHeader: string;
  authentic(headers: (name: string) => string | undefined, raw: Buffer, secret: string): boolean;
  /** "push", "ping", or another event's name. */
  event(headers: (name: string) => string | undefined): string | undefined;
  delivery(headers: (name: string) => string | undefined): string | undefined;
  /** The push, or a 400 invalid_push_payload. */
  push(payload: unknown): Push;
}

function parsePush<T extends z.ZodType>(schema: T, payload: unknown, provider: string): z.output<T> {
  const r = schema.safeParse(payload);
  if (!r.success)
    throw new BadRequestError(
      "invalid_push_payload",
      `Not a ${provider} push payload: ${r.error.issues
        .map((i) => `${i.path.join(".")}: ${i.message}`)
        .join("; ")
        .slice(0, 500)}`,
    );
  return r.data;
}

/** GitHub: X-Hub-Signature-256 (HMAC-SHA256 of the raw body), X-GitHub-Event, X-GitHub-Delivery. */
export const GITHUB: WebhookProvider = {
  proof: "X-Hub-Signature-256",
  deliveryHeader: "X-GitHub-Delivery",
  authentic: (h, raw, secret) => signatureMatches(h("X-Hub-Signature-256"), raw, secret),
  event: (h) => h("X-GitHub-Event"),
  delivery: (h) => h("X-GitHub-Delivery"),
  push: (payload) => {
    const p = parsePush(GithubPush, payload, "GitHub");
    return {
      ref: p.ref,
      after: p.after,
      deleted: !!p.deleted,
      repo: p.repository?.clone_url ?? p.repository?.html_url,
      message: p.head_commit?.id === p.after ? p.head_commit.message : undefined,
    };
  },
};

const GitlabPush = z.object({
  ref: z.string().max(1024),
  after: z.string().regex(/^[0-9a-f]{40}$/),
  checkout_sha: z.string().nullable().optional(),
  project: z.object({ git_http_url: z.string().optional(), web_url: z.string().optional() }).optional(),
  commits: z.array(z.object({ id: z.string(), message: z.string() })).optional(),
});

/** Whether GitLab's X-Gitlab-Token is the secret (GitLab sends the secret itself, not a signature), in constant time. */
export function tokenMatches(given: string | undefined, secret: string): boolean {
  const a = createHmac("sha256", "berth-webhook-token")
    .update(given ?? "")
    .digest();
  const b = createHmac("sha256", "berth-webhook-token").update(secret).digest();
  return timingSafeEqual(a, b) && given !== undefined;
}

/** GitLab: X-Gitlab-Token (the secret), X-Gitlab-Event ("Push Hook"), X-Gitlab-Event-UUID. */
export const GITLAB: WebhookProvider = {
  proof: "X-Gitlab-Token",
  deliveryHeader: "X-Gitlab-Event-UUID",
  authentic: (h, _raw, secret) => tokenMatches(h("X-Gitlab-Token"), secret),
  event: (h) => {
    const e = h("X-Gitlab-Event");
    return e === "Push Hook" ? "push" : e;
  },
  delivery: (h) => h("X-Gitlab-Event-UUID") ?? h("Idempotency-Key"),
  push: (payload) => {
    const p = parsePush(GitlabPush, payload, "GitLab");
    return {
      ref: p.ref,
      after: p.after,
      deleted: /^0{40}$/.test(p.after),
      repo: p.project?.git_http_url ?? p.project?.web_url,
      message: p.commits?.find((c) => c.id === p.after)?.message,
    };
  },
};
