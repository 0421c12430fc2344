// The console's sign-in: a workspace key exchanged once for a session cookie, the session read
// back (the console's script learns its workspace and CSRF token there, never the cookie), and
// sign-out. The session itself is api/console/sessions.ts.
import { z } from "zod";
import { ForbiddenError, UnauthorizedError } from "../errors.ts";
import { defineRoute, type RouteDef } from "../http/route.ts";
import { cookieValue, type ConsoleSessions, type SessionView } from "./sessions.ts";

export const ConsoleSessionSchema = z
  .object({
    workspaceId: z.string().describe("The workspace the session acts in"),
    csrfToken: z.string().describe("Send it in X-Berth-CSRF with every write made through the session"),
    expiresAt: z.iso.datetime().describe("When the session ends; sign in again after"),
  })
  .strict()
  .meta({ id: "ConsoleSession", description: "A console session, as the console's script sees it (the cookie itself is HttpOnly)" });

export const OpenConsoleSessionRequest = z
  .object({
    key: z.string().trim().min(1).max(200).describe("A workspace API key (ws_sk_...); it is not kept by the browser"),
  })
  .strict()
  .meta({ id: "OpenConsoleSessionRequest" });

function sessionBody(s: SessionView): z.input<typeof ConsoleSessionSchema> {
  return { workspaceId: s.workspaceId, csrfToken: s.csrfToken, expiresAt: s.expiresAt.toISOString() };
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

export function consoleRoutes(deps: { sessions: ConsoleSessions }): RouteDef[] {
  const { sessions } = deps;
  const noStore = { "Cache-Control": "no-store" };
  return [
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
      description: "401 when there is no live session (none, expired, signed out, or its key revoked).",
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
