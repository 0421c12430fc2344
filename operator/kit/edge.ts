// How private Apps are guarded at the edge (docs/shares.md), for every route to an App: its own
// host (the App controller's Ingress) and its custom domains (the Domain controller's).
import type { AppSpec } from "../../crds/schemas.ts";
import { FORWARD_AUTH, forwardAuthAddress } from "../../crds/app.ts";
import type { OperatorConfig } from "../config.ts";

export interface EdgeConfig {
  controller: "traefik" | "nginx";
  /** The API's forward-auth base URL as the ingress controller reaches it: <api>/api/v1/forward-auth. */
  forwardAuthUrl: string;
  /** nginx only: where a viewer who must sign in is sent (<API public URL>/api/v1/auth/oidc/login). */
  signInUrl?: string | undefined;
}

/** traefik.io/v1alpha1 Middleware: Traefik's own CRD, in the App's namespace. */
export const MIDDLEWARE_API_VERSION = "traefik.io/v1alpha1";
export const TRAEFIK_MIDDLEWARES_ANNOTATION = "traefik.ingress.kubernetes.io/router.middlewares";

/** How an Ingress refers to the App's ForwardAuth Middleware (named after the App, as every child): <namespace>-<name>@kubernetescrd. */
export function middlewareRef(app: { name: string; namespace: string }): string {
  return `${app.namespace}-${app.name}@kubernetescrd`;
}

/** The Ingress annotations that guard a private App, per ingress controller. */
export function edgeAnnotations(
  app: { name: string; namespace: string },
  spec: Pick<AppSpec, "visibility">,
  edge: EdgeConfig | undefined,
): Record<string, string> {
  if (!edge) return {};
  if (edge.controller === "traefik") return { [TRAEFIK_MIDDLEWARES_ANNOTATION]: middlewareRef(app) };
  if (spec.visibility !== "private") return {};
  return {
    "nginx.ingress.kubernetes.io/auth-url": forwardAuthAddress(edge.forwardAuthUrl, app.namespace, app.name),
    "nginx.ingress.kubernetes.io/auth-response-headers": FORWARD_AUTH.responseHeaders.join(","),
    ...(edge.signInUrl
      ? { "nginx.ingress.kubernetes.io/auth-signin": edge.signInUrl, "nginx.ingress.kubernetes.io/auth-signin-redirect-param": "rd" }
      : {}),
  };
}

/**
 * How private Apps are guarded, from the configuration (docs/shares.md): ingress-nginx's
 * annotations when the ingress class is nginx, otherwise a Traefik ForwardAuth Middleware; both
 * call the API's forward-auth endpoint: BERTH_FORWARD_AUTH_URL, or the governance API URL's, or
 * the chart's default Service.
 */
export function edgeConfig(cfg: OperatorConfig): EdgeConfig {
  const api = cfg.BERTH_OPERATOR_API_URL?.replace(/\/+$/, "") ?? DEFAULT_API_URL;
  return {
    controller: cfg.BERTH_INGRESS_CLASS === "nginx" ? "nginx" : "traefik",
    forwardAuthUrl: cfg.BERTH_FORWARD_AUTH_URL ?? `${api}/api/v1/forward-auth`,
    signInUrl: cfg.BERTH_SIGN_IN_URL,
  };
}

/** The chart's API Service, when nothing else names the API. */
const DEFAULT_API_URL = "http://berth-api.berth-system.svc.cluster.local";
