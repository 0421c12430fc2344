// Push webhooks from Git providers (docs/deployments.md): how GitHub and GitLab sign, name and
// shape their deliveries, each read into one Push whichever the provider. Pure: the service
// (./service.ts) finds the service's secret, checks a delivery with its provider and acts on it.
import { createHmac, timingSafeEqual } from "node:crypto";
import { z } from "zod";
import { BadRequestError } from "../errors.ts";

/** Delivery ids are remembered this long (GitHub redelivers for up to 3 days on request). */
export const WEBHOOK_DELIVERY_RETENTION_DAYS = 30;
/** Largest webhook body read (GitHub caps payloads at 25 MB; pushes of huge histories are cut by GitHub to 20 commits). */
export const WEBHOOK_BODY_LIMIT_BYTES = 5 * 1024 * 1024;

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
