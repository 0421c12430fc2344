// The console's sign-in with the organisation's identity provider, for workspace members
// (api/workspaces/members.ts): the same OpenID Connect client as the viewers' sign-in
// (api/shares/oidc.ts: authorization code flow, PKCE S256, state and nonce, the ID token checked by
// openid-client), returning through the same registered callback (BERTH_OIDC_REDIRECT_URL): the
// identity provider knows one redirect URL, and the callback tells the flows apart by their state
// cookies. This flow's state lives in its own signed cookie, which names the state the provider
// must send back, where to go afterwards (`next`, a console page of this origin) and the workspace
// asked for. The callback opens a console session for the member and sends the browser to `next`.
import type { EntityManager } from "@mikro-orm/postgresql";
import type { Logger } from "../../kube/logger.ts";
import { BadRequestError, UnauthorizedError } from "../errors.ts";
import { cookieValue, grantCookie, sign, verify } from "../shares/grants.ts";
import { SIGN_IN_STATE_TTL_SECONDS, type FlowSecrets, type OidcCallbackFlow, type OidcSignIn } from "../shares/oidc.ts";
import type { MembersService } from "../workspaces/members.ts";
import type { ConsoleSessions } from "./sessions.ts";

/** Where a sign-in lands when it names no page. */
export const CONSOLE_HOME = "/console/";
const PROBE_ORIGIN = "http://console.invalid";

/**
 * The console page a sign-in returns to: a path under /console of this origin, as given (query
 * and fragment kept), or /console/ when none is given. Anything else (another site, a
 * protocol-relative or backslashed URL, a path that leaves /console) is 400 invalid_return_url:
 * the sign-in is never an open redirect.
 */
export function consoleNext(next: string | undefined): string {
  if (next === undefined || next === "") return CONSOLE_HOME;
  const invalid = () => new BadRequestError("invalid_return_url", "next must be a console page of this site (/console/...).");
  // eslint-disable-next-line no-control-regex
  if (!/^\/console(?:[/?#]|$)/.test(next) || /[\\\u0000-\u001f\u007f]/.test(next)) throw invalid();
  let u: URL;
  try {
    u = new URL(next, PROBE_ORIGIN);
  } catch {
    throw invalid();
  }
  if (u.origin !== PROBE_ORIGIN || !(u.pathname === "/console" || u.pathname.startsWith("/console/"))) throw invalid();
  return `${u.pathname}${u.search}${u.hash}`;
}

interface ConsoleSignInState extends FlowSecrets {
  next: string;
  workspace: string | null;
  exp: number;
}

function parseState(v: unknown): ConsoleSignInState | undefined {
  if (!v || typeof v !== "object") return undefined;
  const s = v as Record<string, unknown>;
  for (const k of ["verifier", "state", "nonce", "next"]) if (typeof s[k] !== "string") return undefined;
  if (typeof s.exp !== "number" || (s.workspace !== null && typeof s.workspace !== "string")) return undefined;
  return s as unknown as ConsoleSignInState;
}

export interface ConsoleSignInDeps {
  oidc: OidcSignIn;
  /** The key that signs the state cookie (the share cookie key, BERTH_SHARE_COOKIE_KEY). */
  key: Buffer;
  members: MembersService;
  sessions: ConsoleSessions;
  now: () => Date;
}

export class ConsoleSignIn implements OidcCallbackFlow {
  readonly #d: ConsoleSignInDeps;

  constructor(d: ConsoleSignInDeps) {
    this.#d = d;
  }

  /** The state cookie: __Host- prefixed (so no other host can plant one) when the API is served over https. */
  get #cookieName(): string {
    return this.#d.oidc.secure ? "__Host-berth_console_oidc" : "berth_console_oidc";
  }

  #cookie(value: string, maxAgeSeconds: number): string {
    return grantCookie(this.#cookieName, value, { maxAgeSeconds, secure: this.#d.oidc.secure });
  }

  /** The state this browser's cookie holds (signed by this API for this flow), expired or not. */
  #state(cookieHeader: string | undefined): ConsoleSignInState | undefined {
    return parseState(verify(this.#d.key, "console-oidc-state", cookieValue(cookieHeader, this.#cookieName)));
  }

  /** GET /console/oidc/login: the redirect to the identity provider, and the state cookie. */
  async login(next: string | undefined, workspace: string | undefined): Promise<{ location: string; cookie: string }> {
    const page = consoleNext(next);
    const { location, secrets } = await this.#d.oidc.start();
    const exp = Math.floor(this.#d.now().getTime() / 1000) + SIGN_IN_STATE_TTL_SECONDS;
    const state: ConsoleSignInState = { ...secrets, next: page, workspace: workspace ?? null, exp };
    return { location, cookie: this.#cookie(sign(this.#d.key, "console-oidc-state", state), SIGN_IN_STATE_TTL_SECONDS) };
  }

  /** Whether a callback is this flow's: the request carries this flow's state cookie for the state the provider sent back. */
  owns(query: URLSearchParams, cookieHeader: string | undefined): boolean {
    const s = this.#state(cookieHeader);
    return !!s && s.state === query.get("state");
  }

  /**
   * The callback of a console sign-in: the code exchanged and the ID token checked, the signed-in
   * person matched to a workspace member (verified email, the account first seen), a console
   * session opened for that member, and the browser sent to the console page it asked for.
   */
  async callback(
    query: URLSearchParams,
    cookieHeader: string | undefined,
    ctx: { em: EntityManager; log: Logger },
  ): Promise<{ location: string; cookies: string[] }> {
    const state = this.#state(cookieHeader);
    if (!state || state.exp <= Math.floor(this.#d.now().getTime() / 1000))
      throw new UnauthorizedError("The sign-in expired or was not started here: sign in to the console again.");
    const claims = await this.#d.oidc.finish(query, state, ctx.log, "sign in to the console again.");
    const member = await this.#d.members.signIn(ctx.em, claims, state.workspace ?? undefined);
    const session = await this.#d.sessions.openForMember(ctx.em, member);
    ctx.log.info({ workspaceId: member.workspaceId, memberId: member.id }, "console sign-in of a member");
    return {
      location: `${this.#d.oidc.publicUrl}${state.next}`,
      cookies: [this.#cookie("", 0), this.#d.sessions.setCookie(session)],
    };
  }
}
