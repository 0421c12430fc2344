// Signing viewers in for requireAuth shares (docs/shares.md): OpenID Connect's authorization code
// flow with PKCE, state and nonce against the organisation's identity provider, through
// openid-client (discovery, the token request, the ID token's signature, issuer, audience, expiry
// and nonce are all its checks). The flow runs on the API's public host: the sign-in state lives
// in a short-lived signed cookie there, and the signed-in viewer is handed back to the App's host
// with a one-minute, single-use signed ticket (?berth_login=...), which forward-auth exchanges
// for the App's own cookie. The console's sign-in of workspace members (api/console/oidc.ts) runs
// the same flow (start, finish) through the same registered callback, with a state cookie of its own.
import type { EntityManager } from "@mikro-orm/postgresql";
import * as client from "openid-client";
import { FORWARD_AUTH } from "../../crds/app.ts";
import type { Logger } from "../../kube/logger.ts";
import { BadRequestError, DomainError, UnauthorizedError } from "../errors.ts";
import { cookieValue, grantCookie, newNonce, sign, verify, type Viewer } from "./grants.ts";

export const OIDC_STATE_COOKIE = "berth_oidc";
/** How long the hand-back ticket is valid. */
export const TICKET_TTL_SECONDS = 60;

export interface OidcSettings {
  issuer: string;
  clientId: string;
  clientSecret: string;
  /** <the API's public URL>/api/v1/auth/oidc/callback */
  redirectUrl: string;
  scopes: string;
}

/**
 * Who signed in, as the App is told (X-Berth-User): the email only when the identity provider
 * says it verified it (email_verified: true), else the subject prefixed by the issuer (an
 * unverified email could be anybody's, and a bare subject could collide with another issuer's).
 */
export function viewerOf(claims: { iss: string; sub: string; email?: unknown; email_verified?: unknown }): Viewer {
  const verified = typeof claims.email === "string" && claims.email_verified === true;
  return { sub: `${claims.iss}#${claims.sub}`, ...(verified ? { email: claims.email as string } : {}) };
}

export interface OidcSignInDeps {
  settings: OidcSettings;
  key: Buffer;
  /** App hosts are <label>.<baseDomain>: the only places a sign-in returns to. */
  baseDomain: string;
  log: Logger;
  now: () => Date;
}

/**
 * What the callback of one authorization code flow needs back (the PKCE verifier, the state and
 * the nonce): the caller keeps it in a short-lived signed cookie of its own.
 */
export interface FlowSecrets {
  verifier: string;
  state: string;
  nonce: string;
}

interface SignInState extends FlowSecrets {
  rd: string;
  exp: number;
}

/**
 * Another sign-in flow that returns through the same registered callback (the identity provider
 * knows one redirect URL): the console's (api/console/oidc.ts). The callback hands a request to
 * the flow whose own signed state cookie names the request's `state`.
 */
export interface OidcCallbackFlow {
  owns(query: URLSearchParams, cookieHeader: string | undefined): boolean;
  callback(
    query: URLSearchParams,
    cookieHeader: string | undefined,
    ctx: { em: EntityManager; log: Logger },
  ): Promise<{ location: string; cookies: string[] }>;
}

/** How long a sign-in may take, from the redirect to the identity provider to the callback, in seconds. */
export const SIGN_IN_STATE_TTL_SECONDS = 600;

function parseState(v: unknown): SignInState | undefined {
  if (!v || typeof v !== "object") return undefined;
  const s = v as Record<string, unknown>;
  for (const k of ["verifier", "state", "nonce", "rd"]) if (typeof s[k] !== "string") return undefined;
  if (typeof s.exp !== "number") return undefined;
  return s as unknown as SignInState;
}

const isLoopback = (u: URL) => ["127.0.0.1", "localhost", "[::1]"].includes(u.hostname);

export class OidcSignIn {
  readonly #d: OidcSignInDeps;
  #config: Promise<client.Configuration> | undefined;

  constructor(d: OidcSignInDeps) {
    this.#d = d;
  }

  /** Where forward-auth sends a viewer who must sign in: the login endpoint, a sibling of the callback. */
  loginUrl(returnTo: string): string {
    const u = new URL("login", this.#d.settings.redirectUrl);
    u.searchParams.set("rd", returnTo);
    return u.href;
  }

  /** The provider's configuration, discovered once (a failed discovery is retried on the next sign-in). */
  #discover(): Promise<client.Configuration> {
    this.#config ??= (async () => {
      const issuer = new URL(this.#d.settings.issuer);
      const insecure = issuer.protocol === "http:";
      if (insecure && !isLoopback(issuer)) throw new Error("an http:// issuer is accepted only on loopback");
      return client.discovery(
        issuer,
        this.#d.settings.clientId,
        this.#d.settings.clientSecret,
        undefined,
        insecure ? { execute: [client.allowInsecureRequests] } : undefined,
      );
    })().catch((err: unknown) => {
      this.#config = undefined;
      throw err;
    });
    return this.#config;
  }

  /** Whether `rd` is a URL on an App's host (never an open redirect). */
  #returnTo(rd: string): URL {
    let u: URL;
    try {
      u = new URL(rd);
    } catch {
      throw new BadRequestError("invalid_return_url", "rd must be the URL of a service");
    }
    const suffix = `.${this.#d.baseDomain}`;
    const label = u.hostname.endsWith(suffix) ? u.hostname.slice(0, -suffix.length) : "";
    if (!/^(http|https):$/.test(u.protocol) || !/^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/.test(label) || u.username || u.password) {
      throw new BadRequestError("invalid_return_url", `rd must be the URL of a service (https://<slug>.${this.#d.baseDomain}/...)`);
    }
    return u;
  }

  /** Whether the API is served over https (the callback's URL says). */
  get secure(): boolean {
    return new URL(this.#d.settings.redirectUrl).protocol === "https:";
  }

  /** The API's public URL as the identity provider sends people back to it: the callback's, without /api/v1/auth/oidc/callback. */
  get publicUrl(): string {
    return this.#d.settings.redirectUrl.replace(/\/api\/v1\/auth\/oidc\/callback$/, "");
  }

  /** Starts an authorization code flow (PKCE S256, state, nonce): where to send the browser, and what the callback needs back. */
  async start(): Promise<{ location: string; secrets: FlowSecrets }> {
    const config = await this.#discover().catch((err: unknown) => {
      throw this.#unavailable(err);
    });
    const verifier = client.randomPKCECodeVerifier();
    const state = client.randomState();
    const nonce = client.randomNonce();
    const url = client.buildAuthorizationUrl(config, {
      redirect_uri: this.#d.settings.redirectUrl,
      scope: this.#d.settings.scopes,
      state,
      nonce,
      code_challenge: await client.calculatePKCECodeChallenge(verifier),
      code_challenge_method: "S256",
    });
    return { location: url.href, secrets: { verifier, state, nonce } };
  }

  /**
   * Finishes a flow at the callback: the code exchanged, with the PKCE verifier, state and nonce
   * checked by openid-client along with the ID token's signature, issuer, audience and expiry.
   * The token's claims; 403 when the provider refused, 401 when anything does not check out
   * (`again` tells the person what to do).
   */
  async finish(query: URLSearchParams, secrets: FlowSecrets, log: Logger, again: string): Promise<client.IDToken> {
    if (query.get("error")) {
      log.info({ error: query.get("error") }, "sign-in refused by the identity provider");
      throw new DomainError(403, "sign_in_refused", `The identity provider refused the sign-in: ${query.get("error")}`);
    }
    const config = await this.#discover().catch((err: unknown) => {
      throw this.#unavailable(err);
    });
    const current = new URL(this.#d.settings.redirectUrl);
    current.search = query.toString();
    let claims: client.IDToken | undefined;
    try {
      const tokens = await client.authorizationCodeGrant(config, current, {
        pkceCodeVerifier: secrets.verifier,
        expectedState: secrets.state,
        expectedNonce: secrets.nonce,
        idTokenExpected: true,
      });
      claims = tokens.claims();
    } catch (err) {
      log.info({ reason: err instanceof Error ? err.message : String(err) }, "sign-in failed");
      throw new UnauthorizedError(`The sign-in could not be completed: ${again}`);
    }
    if (!claims?.sub) throw new UnauthorizedError("The identity provider named no user.");
    return claims;
  }

  /** GET .../auth/oidc/login?rd=...: the redirect to the identity provider, and the state cookie. */
  async login(rd: string): Promise<{ location: string; cookie: string }> {
    const returnTo = this.#returnTo(rd);
    const { location, secrets } = await this.start();
    const exp = Math.floor(this.#d.now().getTime() / 1000) + SIGN_IN_STATE_TTL_SECONDS;
    const value = sign(this.#d.key, "oidc-state", { ...secrets, rd: returnTo.href, exp } satisfies SignInState);
    const cookie = grantCookie(OIDC_STATE_COOKIE, value, { maxAgeSeconds: SIGN_IN_STATE_TTL_SECONDS, secure: this.secure }).replace(
      "Path=/",
      "Path=/api/v1/auth/oidc",
    );
    return { location, cookie };
  }

  /**
   * GET .../auth/oidc/callback: the code exchanged (PKCE verifier, state and nonce checked by
   * openid-client), and the viewer handed back to the App's host with a signed ticket.
   */
  async callback(
    query: URLSearchParams,
    cookieHeader: string | undefined,
    log: Logger,
  ): Promise<{ location: string; cookie: string; user: Viewer }> {
    const state = parseState(verify(this.#d.key, "oidc-state", cookieValue(cookieHeader, OIDC_STATE_COOKIE)));
    const nowS = Math.floor(this.#d.now().getTime() / 1000);
    if (!state || state.exp <= nowS)
      throw new UnauthorizedError(
        "The sign-in expired or was not started in this browser: open the share link (or the console's sign-in) again.",
      );
    const claims = await this.finish(query, state, log, "open the share link again.");
    const user = viewerOf(claims);
    const rd = new URL(state.rd);
    const ticket = sign(this.#d.key, "login", { host: rd.hostname, user, exp: nowS + TICKET_TTL_SECONDS, jti: newNonce() });
    rd.searchParams.set(FORWARD_AUTH.loginParam, ticket);
    const cleared = grantCookie(OIDC_STATE_COOKIE, "", { maxAgeSeconds: 0, secure: this.secure }).replace(
      "Path=/",
      "Path=/api/v1/auth/oidc",
    );
    return { location: rd.href, cookie: cleared, user };
  }

  #unavailable(err: unknown): DomainError {
    this.#d.log.warn({ err }, "the identity provider cannot be reached");
    return new DomainError(503, "identity_provider_unavailable", "The identity provider cannot be reached; try again shortly.");
  }
}
