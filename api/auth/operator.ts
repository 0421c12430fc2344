// The "operator" auth mode: the Berth operator calls /internal/governance/* with its Kubernetes
// ServiceAccount token. The API asks the Kubernetes API server who the token belongs to (a
// TokenReview, authentication.k8s.io/v1, through the API's own KubeConfig) and lets the call
// through only when the user is BERTH_OPERATOR_USERNAME. Positive reviews are cached for 60 s
// under the token's SHA-256 (never the token itself), so a provisioning burst costs one review.
import * as k8s from "@kubernetes/client-node";
import { UnavailableError } from "../errors.ts";
import type { OperatorVerifier } from "../http/route.ts";
import { hashToken } from "./tokens.ts";
import type { Access } from "../../kube/rbac.ts";

/** What the reviewer does in the cluster (RBAC from code, see api/rbac.ts). */
export const TOKEN_REVIEWER_ACCESS: Access[] = [
  {
    group: "authentication.k8s.io",
    resource: "tokenreviews",
    verbs: ["create"],
    why: "The operator's ServiceAccount token is verified with a TokenReview",
  },
];

export const TOKEN_REVIEW_CACHE_MS = 60_000;
const CACHE_MAX = 1_000;

/** Who a token belongs to, according to the API server; undefined when it is not authenticated. */
export type TokenReviewer = (token: string) => Promise<string | undefined>;

/**
 * A TokenReviewer backed by the Kubernetes API (needs `create` on `tokenreviews`). With an
 * `audience` (BERTH_OPERATOR_TOKEN_AUDIENCE), the review asks whether the token is valid for it:
 * a token issued for another audience (the cluster's own, for another service) is refused.
 */
export function kubeTokenReviewer(kc: k8s.KubeConfig, audience?: string): TokenReviewer {
  const api = kc.makeApiClient(k8s.AuthenticationV1Api);
  return async (token) => {
    const review = await api.createTokenReview({
      body: {
        apiVersion: "authentication.k8s.io/v1",
        kind: "TokenReview",
        spec: { token, ...(audience ? { audiences: [audience] } : {}) },
      },
    });
    if (review.status?.authenticated !== true) return undefined;
    if (audience && !(review.status.audiences ?? []).includes(audience)) return undefined;
    return review.status.user?.username;
  };
}

/** The claims of a JWT, unverified (undefined when the token is not one): a filter before the review, never a proof. */
export function unverifiedClaims(token: string): { sub?: unknown; aud?: unknown } | undefined {
  const parts = token.split(".");
  if (parts.length !== 3 || !parts.every((p) => /^[A-Za-z0-9_-]+$/.test(p))) return undefined;
  try {
    const claims = JSON.parse(Buffer.from(parts[1]!, "base64url").toString("utf8")) as unknown;
    return claims && typeof claims === "object" ? claims : undefined;
  } catch {
    return undefined;
  }
}

export interface OperatorVerifierOptions {
  review: TokenReviewer;
  /** The only user allowed (BERTH_OPERATOR_USERNAME). */
  username: string;
  /** The audience the operator's token must be issued for (BERTH_OPERATOR_TOKEN_AUDIENCE); any when unset. */
  audience?: string | undefined;
  ttlMs?: number;
  now?: () => number;
}

/**
 * An OperatorVerifier with a cache of positive reviews (token digest -> username, 60 s). Only a
 * token that claims to be the operator's (a ServiceAccount JWT whose subject is the operator, for
 * the configured audience) is sent to a TokenReview: anything else is refused at once, so that the
 * endpoint is no oracle that tells whether some stolen token is valid.
 */
export function operatorVerifier(opts: OperatorVerifierOptions): OperatorVerifier {
  const ttl = opts.ttlMs ?? TOKEN_REVIEW_CACHE_MS;
  const now = opts.now ?? Date.now;
  const cache = new Map<string, { username: string; until: number }>();
  return async (token, { log }) => {
    const claims = unverifiedClaims(token);
    if (!claims) return { ok: false, reason: "unauthenticated" };
    const audiences = Array.isArray(claims.aud) ? claims.aud : [claims.aud];
    if (claims.sub !== opts.username || (opts.audience && !audiences.includes(opts.audience))) {
      log.warn(
        { sub: typeof claims.sub === "string" ? claims.sub.slice(0, 200) : undefined },
        "a token that is not the operator's called an operator route",
      );
      return { ok: false, reason: "forbidden" };
    }
    const digest = hashToken(token);
    let username: string | undefined;
    const hit = cache.get(digest);
    if (hit && hit.until > now()) {
      username = hit.username;
    } else {
      if (hit) cache.delete(digest);
      try {
        username = await opts.review(token);
      } catch (err) {
        log.warn({ err }, "TokenReview failed");
        throw new UnavailableError(
          "token_review_unavailable",
          "The token could not be verified with the Kubernetes API right now; retry.",
          { cause: err },
        );
      }
      if (username !== undefined) {
        if (cache.size >= CACHE_MAX) cache.delete(cache.keys().next().value!);
        cache.set(digest, { username, until: now() + ttl });
      }
    }
    if (username === undefined) return { ok: false, reason: "unauthenticated" };
    if (username !== opts.username) {
      log.warn({ user: username }, "a Kubernetes user other than the operator called an operator route");
      return { ok: false, reason: "forbidden" };
    }
    return { ok: true, principal: { kind: "operator", username } };
  };
}
