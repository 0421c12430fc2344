// Establishes the caller of a route from its Authorization header, according to the route's
// AuthMode, and scopes workspace-bound callers to the workspace named in the path. On workspace
// routes, a request without an Authorization header may instead carry a console session cookie
// (api/console/sessions.ts): it acts as the workspace key that opened the session, or, for a
// member's sign-in with the identity provider, as the member's workspace (a caller without a key).
//
//   no header / other scheme / malformed / unknown / revoked  -> 401 unauthorized
//   a valid key of another kind (e.g. pa_sk_ on a workspace route) -> 403 insufficient_scope
//   a workspace-bound caller on another workspace's path        -> 404 workspace_not_found
//
// "operator" routes take a Kubernetes ServiceAccount token (checked by the OperatorVerifier with a
// TokenReview). A Berth key sent there is never forwarded to Kubernetes: it is a 403 when it is a
// valid key (of the wrong kind), else a 401. With the internal TLS listener configured, they are
// served on it only: on the plain listener they are a 403 tls_required before the token is looked
// at, so an operator left on plain HTTP fails loudly instead of sending its token in the clear.
import type { EntityManager } from "@mikro-orm/postgresql";
import { ForbiddenError, NotFoundError, UnauthorizedError } from "../errors.ts";
import type { Logger } from "../../kube/logger.ts";
import type { AppKeyVerifier, AuthMode, Caller, OperatorVerifier } from "../http/route.ts";
import type { ApiKeyService, PlatformAdminKeyService } from "./keys.ts";
import type { ConsoleSessions } from "../console/sessions.ts";
import { APP_KEY_PREFIX, PLATFORM_ADMIN_KEY_PREFIX, WORKSPACE_KEY_PREFIX, bearerToken } from "./tokens.ts";

/** Path parameters that name a workspace (docs/spec.md uses both spellings). */
export const WORKSPACE_PARAMS = ["wsId", "workspaceId"] as const;

export interface AuthRequest {
  authorization: string | undefined;
  /** The Cookie header: a console session stands for its workspace key (or member) when no Authorization is sent. */
  cookie?: string | undefined;
  method?: string;
  /** The X-Berth-CSRF header, which a write through a console session must carry. */
  csrf?: string | undefined;
  params: Readonly<Record<string, string>>;
  em: EntityManager;
  log: Logger;
  /** The request came over TLS (the internal listener). */
  tls?: boolean;
}

export interface AuthenticatorDeps {
  keys: ApiKeyService;
  adminKeys: PlatformAdminKeyService;
  appKeyVerifier?: AppKeyVerifier | undefined;
  operatorVerifier?: OperatorVerifier | undefined;
  /** Console sessions (api/console/sessions.ts); without them a session cookie is ignored. */
  sessions?: ConsoleSessions | undefined;
  /** "operator" routes only over TLS (BERTH_INTERNAL_TLS_PORT is configured). */
  operatorOverTlsOnly?: boolean | undefined;
}

export class Authenticator {
  readonly #deps: AuthenticatorDeps;

  constructor(deps: AuthenticatorDeps) {
    this.#deps = deps;
  }

  get hasAppKeyVerifier(): boolean {
    return this.#deps.appKeyVerifier !== undefined;
  }

  get hasOperatorVerifier(): boolean {
    return this.#deps.operatorVerifier !== undefined;
  }

  /**
   * The caller of a route with this auth mode; undefined for "none". Throws 401/403. The router
   * then spends the caller's rate-limit budget and checks the workspace scope (assertScope).
   */
  async identify(mode: AuthMode, req: AuthRequest): Promise<Caller | undefined> {
    if (mode === "none") return undefined;
    const { sessions } = this.#deps;
    if (mode === "operator" && this.#deps.operatorOverTlsOnly && !req.tls) {
      throw new ForbiddenError(
        "tls_required",
        "This operation is served only on the API's internal TLS listener (BERTH_INTERNAL_TLS_PORT): send it over HTTPS there.",
      );
    }
    if (!req.authorization && (mode === "workspace" || mode === "workspace-or-platform-admin") && sessions?.hasCookie(req.cookie)) {
      return sessions.authenticate(req.em, { cookie: req.cookie, method: req.method ?? "GET", csrf: req.csrf });
    }
    const token = bearerToken(req.authorization);
    if (!token) {
      throw new UnauthorizedError(
        req.authorization
          ? "The Authorization header must be 'Bearer <key>'."
          : "This operation needs an API key: send 'Authorization: Bearer <key>'.",
      );
    }
    return this.#verify(mode, token, req);
  }

  /** A workspace-bound caller on another workspace's path: 404 workspace_not_found. */
  assertScope(caller: Caller, params: Readonly<Record<string, string>>): void {
    for (const name of WORKSPACE_PARAMS) {
      const wanted = params[name];
      if (wanted !== undefined && "workspaceId" in caller && caller.workspaceId !== wanted) {
        throw new NotFoundError("workspace_not_found", `Workspace ${wanted} does not exist.`);
      }
    }
  }

  async #verify(mode: Exclude<AuthMode, "none">, token: string, req: AuthRequest): Promise<Caller> {
    const { keys, adminKeys, appKeyVerifier, operatorVerifier } = this.#deps;
    const invalid = () => new UnauthorizedError("The API key is invalid or has been revoked.");
    switch (mode) {
      case "workspace": {
        const p = await keys.verify(req.em, token);
        if (p) return p;
        if (token.startsWith(PLATFORM_ADMIN_KEY_PREFIX) && (await adminKeys.verify(req.em, token))) {
          throw new ForbiddenError(
            "insufficient_scope",
            "This operation needs a workspace API key (ws_sk_...); platform admin keys only manage the platform.",
          );
        }
        if (token.startsWith(APP_KEY_PREFIX) && appKeyVerifier && (await appKeyVerifier(token, { em: req.em, log: req.log, params: {} }))) {
          throw new ForbiddenError(
            "insufficient_scope",
            "This operation needs a workspace API key (ws_sk_...); an app's governance key (gov_sk_...) only submits traces.",
          );
        }
        throw invalid();
      }
      case "workspace-or-platform-admin": {
        const p = (await keys.verify(req.em, token)) ?? (await adminKeys.verify(req.em, token));
        if (p) return p;
        if (token.startsWith(APP_KEY_PREFIX) && appKeyVerifier && (await appKeyVerifier(token, { em: req.em, log: req.log, params: {} }))) {
          throw new ForbiddenError(
            "insufficient_scope",
            "This operation needs a workspace API key (ws_sk_...) or a platform admin key (pa_sk_...); an app's governance key (gov_sk_...) only submits traces.",
          );
        }
        throw invalid();
      }
      case "platform-admin": {
        const p = await adminKeys.verify(req.em, token);
        if (p) return p;
        if (token.startsWith(WORKSPACE_KEY_PREFIX) && (await keys.verify(req.em, token))) {
          throw new ForbiddenError("insufficient_scope", "This operation needs a platform admin key (pa_sk_...).");
        }
        throw invalid();
      }
      case "app-key": {
        if (!appKeyVerifier) throw new Error("an app-key route is mounted but no AppKeyVerifier was given to buildServer");
        const p = await appKeyVerifier(token, { em: req.em, log: req.log, params: req.params });
        if (p) return p;
        throw invalid();
      }
      case "operator": {
        if (!operatorVerifier) throw new Error("an operator route is mounted but no OperatorVerifier was given to buildServer");
        if ([WORKSPACE_KEY_PREFIX, PLATFORM_ADMIN_KEY_PREFIX, APP_KEY_PREFIX].some((prefix) => token.startsWith(prefix))) {
          const valid =
            (await keys.verify(req.em, token)) ??
            (await adminKeys.verify(req.em, token)) ??
            (appKeyVerifier ? await appKeyVerifier(token, { em: req.em, log: req.log, params: {} }) : undefined);
          if (valid)
            throw new ForbiddenError(
              "insufficient_scope",
              "This operation is reserved for the Berth operator's Kubernetes ServiceAccount.",
            );
          throw invalid();
        }
        const r = await operatorVerifier(token, { log: req.log });
        if (r.ok) return r.principal;
        if (r.reason === "forbidden")
          throw new ForbiddenError("insufficient_scope", "This operation is reserved for the Berth operator's Kubernetes ServiceAccount.");
        throw new UnauthorizedError("The bearer token is not a valid Kubernetes ServiceAccount token.");
      }
    }
  }
}
