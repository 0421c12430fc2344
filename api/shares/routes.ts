// Public shares (docs/spec.md part 4), the edge check of private services and the viewers' sign-in
// (docs/shares.md): one definition validates and documents each.
import { z } from "zod";
import { FORWARD_AUTH } from "../../crds/app.ts";
import { defineBareRoute, defineRoute, type RouteDef } from "../http/route.ts";
import { NotFoundError } from "../errors.ts";
import { TooManyRequestsError, type RateLimiter } from "../http/limits.ts";
import { AppId, AppParams, ObjectId } from "../apps/schemas.ts";
import { DNS_LABEL } from "../../crds/schemas.ts";
import { CreateShareBody, CreatedShare, ShareList, type SharesService } from "./service.ts";
import type { ForwardAuth } from "./forward-auth.ts";
import type { OidcCallbackFlow, OidcSignIn } from "./oidc.ts";

const tags = ["Public shares"];
const ShareParams = AppParams.extend({ shareId: ObjectId }).strict();
const EdgeParams = z
  .object({ namespace: z.string().min(1).max(63).regex(new RegExp(DNS_LABEL), "must be a namespace name"), appId: AppId })
  .strict();

export interface ShareRoutesDeps {
  shares: SharesService;
  forwardAuth: ForwardAuth;
  /**
   * The forward-auth check's budget per viewer (BERTH_RATE_LIMIT_EDGE_*), keyed by the address the
   * ingress names in X-Forwarded-For: one client past it gets 429 through the ingress, every other
   * viewer of the service is still served. Absent or 0 per second: no limit.
   */
  edgeLimiter?: RateLimiter | undefined;
  now?: () => number;
  /** undefined when no identity provider is configured. */
  signIn: () => OidcSignIn | undefined;
  /**
   * Other sign-in flows that return through the same callback (the console's members,
   * api/console/oidc.ts): a callback whose state one of them owns is theirs.
   */
  otherFlows?: () => readonly OidcCallbackFlow[];
}

export function shareRoutes(d: ShareRoutesDeps): RouteDef[] {
  const signIn = (): OidcSignIn => {
    const s = d.signIn();
    if (!s) throw new NotFoundError("sign_in_not_configured", "Viewers cannot sign in: no identity provider is configured (BERTH_OIDC_*)");
    return s;
  };
  return [
    defineRoute({
      method: "post",
      path: "/workspaces/:wsId/apps/:appId/public-shares",
      operationId: "createPublicShare",
      tags,
      auth: "workspace",
      summary: "Create a share link",
      description:
        "Returns the link (`url`) and its `token` once; only the token's SHA-256 is kept (in the Share resource). Anyone with the link can open the service, also a private one; with requireAuth they must also sign in with a platform account. 409 not_served for a worker or cron service; 409 sign_in_not_configured for requireAuth without an identity provider; 409 quota_exceeded when the workspace holds its quota of shares (BERTH_WORKSPACE_QUOTA).",
      params: AppParams,
      body: CreateShareBody,
      responses: { 201: CreatedShare, 409: null },
      handler: async ({ params, body }) => {
        const created = await d.shares.create(params.wsId, params.appId, body);
        return {
          status: 201,
          body: created,
          headers: {
            "Cache-Control": "no-store",
            Location: `/api/v1/workspaces/${params.wsId}/apps/${params.appId}/public-shares/${created.id}`,
          },
        };
      },
    }),
    defineRoute({
      method: "get",
      path: "/workspaces/:wsId/apps/:appId/public-shares",
      operationId: "listPublicShares",
      tags,
      auth: "workspace",
      summary: "List the active share links",
      description: "Shares not expired, newest first; never a token.",
      params: AppParams,
      responses: { 200: ShareList },
      handler: async ({ params }) => ({ status: 200, body: await d.shares.list(params.wsId, params.appId) }),
    }),
    defineRoute({
      method: "delete",
      path: "/workspaces/:wsId/apps/:appId/public-shares/:shareId",
      operationId: "revokePublicShare",
      tags,
      auth: "workspace",
      summary: "Revoke a share link",
      description:
        "Deletes the share: the next request with its link or its cookie is refused, also in the middle of a viewer's session. 404 share_not_found for an unknown or already revoked share.",
      params: ShareParams,
      responses: { 204: null },
      handler: async ({ params }) => {
        await d.shares.revoke(params.wsId, params.appId, params.shareId);
        return { status: 204 };
      },
    }),
    defineBareRoute({
      path: FORWARD_AUTH.path,
      operationId: "forwardAuth",
      tags: ["Edge"],
      // Called by the ingress (one address) before every request to a private service of every
      // workspace: an address budget would throttle all viewers at once. The check is an in-memory
      // decision, answered before Koa (api/http/bare.ts).
      rateLimit: "none",
      summary: "Forward-auth check of a private service (called by the ingress)",
      description:
        "Traefik's ForwardAuth middleware (and ingress-nginx's auth-url) call this before each request to a private service, with X-Forwarded-Host/-Proto/-Uri/-Method (nginx: X-Original-URL, X-Original-Method) and the viewer's Cookie. 200: pass (X-Berth-Share, X-Berth-User for the service); 302: a share token or sign-in ticket taken (Set-Cookie on the service's host, back to the same URL without it) or off to sign in; 401 share_login_required, 403 share_<reason>: refused.",
      params: EdgeParams,
      responses: { 200: null, 302: null, 401: null, 403: null, 429: null },
      bare: ({ params, header, host: ownHost }) => {
        if (d.edgeLimiter?.enabled) {
          // the client as the ingress saw it (Traefik sets X-Forwarded-For itself; a direct caller
          // naming any address only picks its own budget)
          const viewer = header("X-Forwarded-For").split(",").at(-1)?.trim() || "unknown";
          const spent = d.edgeLimiter.take(`viewer:${viewer}`, (d.now ?? Date.now)());
          if (!spent.allowed) throw new TooManyRequestsError("edge", spent.retryAfterSeconds);
        }
        const original = header("X-Original-URL");
        let host = header("X-Forwarded-Host"),
          proto = header("X-Forwarded-Proto"),
          uri = header("X-Forwarded-Uri");
        if (original) {
          try {
            const u = new URL(original);
            host ||= u.host;
            proto ||= u.protocol.replace(":", "");
            uri = `${u.pathname}${u.search}`;
          } catch {
            /* refused below */
          }
        }
        return d.forwardAuth.check({
          namespace: params.namespace,
          app: params.appId,
          method: (header("X-Forwarded-Method") || header("X-Original-Method") || "GET").toUpperCase(),
          proto: (proto || "http").toLowerCase(),
          host: host || ownHost,
          uri: uri || "/",
          cookie: header("Cookie") || undefined,
          nginx: !!original,
        });
      },
    }),
    defineRoute({
      method: "get",
      path: "/auth/oidc/login",
      operationId: "signInStart",
      tags: ["Edge"],
      auth: "none",
      summary: "Start a viewer's sign-in (requireAuth shares)",
      description:
        "Redirects to the identity provider (authorization code flow, PKCE S256, state and nonce kept in a signed 10-minute cookie). rd: the service URL to return to. 404 sign_in_not_configured without an identity provider.",
      query: z.object({ rd: z.string().min(1).max(4096) }).strict(),
      responses: { 302: null, 400: null, 404: null, 503: null },
      handler: async ({ query }) => {
        const { location, cookie } = await signIn().login(query.rd);
        return { status: 302, headers: { Location: location, "Set-Cookie": cookie, "Cache-Control": "no-store" } };
      },
    }),
    defineRoute({
      method: "get",
      path: "/auth/oidc/callback",
      operationId: "signInCallback",
      tags: ["Edge"],
      auth: "none",
      summary: "The identity provider's redirect back (BERTH_OIDC_REDIRECT_URL)",
      description:
        "Exchanges the code (checking state, nonce, PKCE and the ID token) and sends the viewer back to the service with a one-minute, single-use sign-in ticket. A console sign-in (GET /console/oidc/login, told apart by its own state cookie) returns here too: it opens the member's console session and goes to the console page it asked for (403 email_not_verified, not_a_member or member_identity_mismatch, 409 workspace_choice_required).",
      query: z
        .object({
          code: z.string().max(4096).optional(),
          state: z.string().max(1024).optional(),
          iss: z.string().max(2048).optional(),
          error: z.string().max(1024).optional(),
        })
        .catchall(z.string().max(4096)),
      responses: { 302: null, 401: null, 403: null, 404: null, 409: null, 503: null },
      handler: async ({ koa, log, em }) => {
        const query = new URLSearchParams(koa.querystring);
        const cookies = koa.get("Cookie") || undefined;
        const flow = signIn() && d.otherFlows?.().find((f) => f.owns(query, cookies));
        if (flow) {
          const done = await flow.callback(query, cookies, { em, log });
          return { status: 302, headers: { Location: done.location, "Set-Cookie": done.cookies, "Cache-Control": "no-store" } };
        }
        const { location, cookie } = await signIn().callback(query, cookies, log);
        return { status: 302, headers: { Location: location, "Set-Cookie": cookie, "Cache-Control": "no-store" } };
      },
    }),
  ];
}
