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
  { group: "authentication.k8s.io", resource: "tokenreviews", verbs: ["create"], why: "The operator's ServiceAccount token is verified with a TokenReview" },
];

export const TOKEN_REVIEW_CACHE_MS = 60_000;
const CACHE_MAX = 1_000;

/** Who a token belongs to, according to the API server; undefined when it is not authenticated. */
export type TokenReviewer = (token: string) => Promise<string | undefined>;

/** A TokenReviewer backed by the Kubernetes API (needs `create` on `tokenreviews`). */
export function kubeTokenReviewer(kc: k8s.KubeConfig): TokenReviewer {
  const api = kc.makeApiClient(k8s.AuthenticationV1Api);
  return async (token) => {
    const review = await api.createTokenReview({ body: { apiVersion: "authentication.k8s.io/v1", kind: "TokenReview", spec: { token } } });
    return review.status?.authenticated === true ? review.status.user?.username : undefined;
  };
}

export interface OperatorVerifierOptions {
  review: TokenReviewer;
  /** The only user allowed (BERTH_OPERATOR_USERNAME). */
  username: string;
  ttlMs?: number;
  now?: () => number;
}

/** An OperatorVerifier with a cache of positive reviews (token digest -> username, 60 s). */
export function operatorVerifier(opts: OperatorVerifierOptions): OperatorVerifier {
  const ttl = opts.ttlMs ?? TOKEN_REVIEW_CACHE_MS;
  const now = opts.now ?? Date.now;
  const cache = new Map<string, { username: string; until: number }>();
  return async (token, { log }) => {
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
        throw new UnavailableError("token_review_unavailable", "The token could not be verified with the Kubernetes API right now; retry.", { cause: err });
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
