// The console's sign-in: a workspace key exchanged once for a session cookie, or a workspace
// member's sign-in with the organisation's identity provider (api/console/oidc.ts); the session
// read back (the console's script learns its workspace and CSRF token there, never the cookie),
// and sign-out. The session itself is api/console/sessions.ts.
import { z } from "zod";
import { ForbiddenError, NotFoundError, UnauthorizedError } from "../errors.ts";
import { defineRoute, type RouteDef } from "../http/route.ts";
import { WORKSPACE_ID_PATTERN } from "../workspaces/service.ts";
import type { ConsoleSignIn } from "./oidc.ts";
import { cookieValue } from "../shares/grants.ts";
import type { ConsoleSessions, SessionView } from "./sessions.ts";

export const ConsoleSessionSchema = z
  .object({
    workspaceId: z.string().describe("The workspace the session acts in"),
    csrfToken: z.string().describe("Send it in X-Berth-CSRF with every write made through the session"),
    expiresAt: z.iso.datetime().describe("When the session ends; sign in again after"),
    email: z
      .string()
      .nullable()
      .describe("The member's email when a workspace member signed in with the identity provider; null for a session opened with a key"),
  })
  .strict()
  .meta({ id: "ConsoleSession", description: "A console session, as the console's script sees it (the cookie itself is HttpOnly)" });

export const OpenConsoleSessionRequest = z
  .object({
    key: z.string().trim().min(1).max(200).describe("A workspace API key (ws_sk_...); it is not kept by the browser"),
  })
  .strict()
  .meta({ id: "OpenConsoleSessionRequest" });

export const ConsoleSignInOptionsSchema = z
  .object({
    key: z.literal(true).describe("A workspace key signs in (POST /console/sessions)"),
    oidc: z
      .boolean()
      .describe(
        "Whether workspace members sign in with the organisation's identity provider (GET /console/oidc/login): true when the API has one (BERTH_OIDC_*)",
      ),
  })
  .strict()
  .meta({ id: "ConsoleSignInOptions", description: "The ways to sign in to the console" });

function sessionBody(s: SessionView): z.input<typeof ConsoleSessionSchema> {
  return { workspaceId: s.workspaceId, csrfToken: s.csrfToken, expiresAt: s.expiresAt.toISOString(), email: s.email };
}

/**
 * A sign-in posted by a page of another site (login CSRF: the victim signed into the attacker's
 * workspace) is refused: a browser names the page's origin, and it must be the API's own host.
 */
function assertSameOrigin(origin: string, host: string): void {
  if (!origin) return;
  let originHost: string | undefined;
  try {
    originHost = new URL(origin).host;
  } catch {
    originHost = undefined;
  }
  if (originHost !== host) throw new ForbiddenError("cross_origin", "The console signs in only from its own origin.");
}

export function consoleRoutes(deps: {
  sessions: ConsoleSessions;
  /** Members' sign-in with the identity provider; undefined without one (BERTH_OIDC_*). */
  signIn: () => ConsoleSignIn | undefined;
}): RouteDef[] {
  const { sessions } = deps;
  const noStore = { "Cache-Control": "no-store" };
  return [
    defineRoute({
      method: "get",
      path: "/console/sign-in-options",
      operationId: "getConsoleSignInOptions",
      tags: ["console"],
      auth: "none",
      summary: "How one signs in to the console: always with a workspace key; with the identity provider when the API has one",
      responses: { 200: ConsoleSignInOptionsSchema },
      handler: () => Promise.resolve({ status: 200, body: { key: true, oidc: deps.signIn() !== undefined } }),
    }),
    defineRoute({
      method: "get",
      path: "/console/oidc/login",
      operationId: "startConsoleSignIn",
      tags: ["console"],
      auth: "none",
      summary: "Sign in to the console as a workspace member, with the organisation's identity provider",
      description:
        "Redirects to the identity provider (authorization code flow, PKCE S256, state and nonce kept in a signed 10-minute cookie); its callback (GET /auth/oidc/callback, BERTH_OIDC_REDIRECT_URL) opens a console session for the member and redirects to `next`. The ID token's email must be verified (email_verified) and a member of the workspace (PUT /workspaces/{wsId}/members/{email}, platform admin key). `workspace` names the workspace when the email is a member of several; without it the email must be a member of exactly one (409 workspace_choice_required otherwise, with the workspaces' ids in details). 400 invalid_return_url when `next` is not a console page of this site; 403 cross_origin when a page of another origin starts it; 404 sign_in_not_configured without an identity provider.",
      query: z
        .object({
          next: z
            .string()
            .max(2048)
            .optional()
            .describe("The console page to land on after signing in (/console/...); /console/ when absent"),
          workspace: z
            .string()
            .regex(WORKSPACE_ID_PATTERN, "must be a workspace id")
            .optional()
            .describe("The workspace to sign in to, when the email is a member of several"),
        })
        .strict(),
      responses: { 302: null, 400: null, 403: null, 404: null, 503: null },
      handler: async ({ query, koa }) => {
        const signIn = deps.signIn();
        if (!signIn)
          throw new NotFoundError(
            "sign_in_not_configured",
            "Members cannot sign in with an identity provider: none is configured (BERTH_OIDC_*). Sign in with a workspace key.",
          );
        assertSameOrigin(koa.get("Origin"), koa.host);
        const { location, cookie } = await signIn.login(query.next, query.workspace);
        return { status: 302, headers: { Location: location, "Set-Cookie": cookie, ...noStore } };
      },
    }),
    defineRoute({
      method: "post",
      path: "/console/sessions",
      operationId: "openConsoleSession",
      tags: ["console"],
      auth: "none",
      summary: "Sign in to the console: exchange a workspace key for an HttpOnly session cookie",
      description:
        "The answer sets the session cookie (HttpOnly, SameSite=Strict; Secure and named __Host-berth_console when the API is served over https). The session acts as the key, ends when it expires (BERTH_CONSOLE_SESSION_SECONDS), is signed out, or its key is revoked; writes through it need X-Berth-CSRF. 401 for a key that is not a current workspace key; 403 cross_origin when a page of another origin posts it.",
      body: OpenConsoleSessionRequest,
      responses: { 201: ConsoleSessionSchema, 401: null, 403: null },
      handler: async ({ body, em, koa }) => {
        assertSameOrigin(koa.get("Origin"), koa.host);
        const opened = await sessions.open(em, body.key);
        return { status: 201, body: sessionBody(opened), headers: { ...noStore, "Set-Cookie": sessions.setCookie(opened) } };
      },
    }),
    defineRoute({
      method: "get",
      path: "/console/session",
      operationId: "getConsoleSession",
      tags: ["console"],
      auth: "none",
      summary: "The console session the request's cookie names: its workspace and CSRF token",
      description: "401 when there is no live session (none, expired, signed out, its key revoked or its member removed).",
      responses: { 200: ConsoleSessionSchema, 401: null },
      handler: async ({ em, koa }) => {
        const s = await sessions.find(em, cookieValue(koa.get("Cookie") || undefined, sessions.cookieName));
        if (!s) throw new UnauthorizedError("There is no console session: sign in.");
        return { status: 200, body: sessionBody(s), headers: noStore };
      },
    }),
    defineRoute({
      method: "delete",
      path: "/console/session",
      operationId: "closeConsoleSession",
      tags: ["console"],
      auth: "none",
      summary: "Sign out of the console: the session ends and its cookie is cleared (idempotent)",
      description: "A live session is only ended with its CSRF token in X-Berth-CSRF (403 csrf_failed otherwise).",
      responses: { 204: null, 403: null },
      handler: async ({ em, koa }) => {
        const cookie = koa.get("Cookie") || undefined;
        const token = cookieValue(cookie, sessions.cookieName);
        if (await sessions.find(em, token)) {
          await sessions.authenticate(em, { cookie, method: "DELETE", csrf: koa.get("X-Berth-CSRF") || undefined });
          await sessions.close(em, token);
        }
        return { status: 204, headers: { ...noStore, "Set-Cookie": sessions.setCookie() } };
      },
    }),
  ];
}
