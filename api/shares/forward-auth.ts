// The edge check of private services (docs/shares.md): the ingress (Traefik's ForwardAuth
// middleware, or ingress-nginx's auth-url) asks, before each request to a private App, whether it
// may pass. Answers: 200 (pass; X-Berth-Share and X-Berth-User go on to the App), 302 (a share
// token or sign-in ticket taken: the cookie set and the viewer sent back to the same URL without
// it, or sent to sign in), 401/403 problem (refused). Every decision is logged, never a token or
// cookie. Per request the work is a map lookup of the verified cookie (verified once, then
// remembered) and of its Share in the watch cache, which a revoked share has left (this process's
// own revocations at once, other replicas' within the watch's delay).
import { FORWARD_AUTH } from "../../crds/app.ts";
import type { Logger } from "../../kube/logger.ts";
import type { ReadYourWritesCache } from "../../kube/read-your-writes.ts";
import { DomainError } from "../errors.ts";
import type { OidcSignIn } from "./oidc.ts";
import type { TicketLedger } from "./tickets.ts";
import { shareView, type ShareObject } from "./service.ts";
import {
  cookieValue,
  decide,
  grantCookie,
  grantExpiry,
  isShareToken,
  parseGrant,
  parseTicket,
  shareLive,
  sign,
  tokenMatches,
  verify,
  withoutParams,
  type Decision,
  type DenyReason,
  type Grant,
  type ShareView,
} from "./grants.ts";

/** What the ingress tells about the request it holds. */
export interface EdgeRequest {
  namespace: string;
  app: string;
  /** X-Forwarded-Method (Traefik), X-Original-Method (nginx), or the request's own. */
  method: string;
  /** X-Forwarded-Proto */
  proto: string;
  /** X-Forwarded-Host, with its port if any. */
  host: string;
  /** X-Forwarded-Uri: path and query. */
  uri: string;
  cookie: string | undefined;
  /** ingress-nginx: it cannot pass a redirect on, so a token is taken with a 200 and sign-in is its auth-signin's 401. */
  nginx: boolean;
}

export interface EdgeAnswer {
  status: 200 | 302;
  headers: Record<string, string>;
}

export interface ForwardAuthDeps {
  cache: ReadYourWritesCache;
  key: Buffer;
  sessionSeconds: number;
  signIn: OidcSignIn | undefined;
  /** Sign-in tickets already taken, shared by the replicas. */
  tickets: TicketLedger;
  log: Logger;
  now: () => Date;
}

/** The name of the grant cookie for a request's scheme: `__Host-berth_share` over https, `berth_share` over http. */
export function grantCookieName(proto: string): string {
  return proto === "https" ? FORWARD_AUTH.secureCookie : FORWARD_AUTH.cookie;
}

/** Verified cookies remembered (value → grant), so that a cookie's HMAC is computed once. */
const VERIFIED_CAP = 10_000;

const MESSAGES: Record<DenyReason, string> = {
  no_grant: "This service is private: open it with a share link.",
  invalid_token: "This share link is not valid: it was revoked or never existed.",
  invalid_grant: "This share session is not valid: open the share link again.",
  wrong_app: "This share session belongs to another service: open this service's share link.",
  grant_expired: "This share session expired: open the share link again.",
  share_expired: "This share link has expired.",
  share_revoked: "This share link was revoked.",
  login_required: "This share link requires signing in with a platform account.",
};

export class EdgeDenied extends DomainError {
  readonly reason: DenyReason;
  constructor(reason: DenyReason, status = 403) {
    super(status, `share_${reason}`, MESSAGES[reason], { details: { reason } });
    this.reason = reason;
  }
}

export class ForwardAuth {
  readonly #d: ForwardAuthDeps;
  readonly #verified = new Map<string, Grant>();

  constructor(d: ForwardAuthDeps) {
    this.#d = d;
  }

  #share(ns: string, name: string): ShareView | undefined {
    return shareView(this.#d.cache.get<ShareObject>("Share", ns, name));
  }

  #grantOf(cookie: string | undefined, proto: string): { grant?: Grant; forged: boolean } {
    // over https only the __Host- cookie counts: a plain one could have been tossed by a sibling host
    const value = cookieValue(cookie, grantCookieName(proto));
    if (!value) return { forged: false };
    const known = this.#verified.get(value);
    if (known) return { grant: known, forged: false };
    const grant = parseGrant(verify(this.#d.key, "grant", value));
    if (!grant) return { forged: true };
    if (this.#verified.size >= VERIFIED_CAP) this.#verified.clear();
    this.#verified.set(value, grant);
    return { grant, forged: false };
  }

  #setCookie(req: EdgeRequest, grant: Grant, nowMs: number): string {
    return grantCookie(grantCookieName(req.proto), sign(this.#d.key, "grant", grant), {
      maxAgeSeconds: grant.exp - nowMs / 1000,
      secure: req.proto === "https",
    });
  }

  #log(req: EdgeRequest, d: Decision | { allow: false; reason: DenyReason }, how: string, extra: Record<string, unknown> = {}): void {
    const share = "share" in d ? d.share?.name : undefined;
    const user = d.allow ? d.user?.sub : undefined;
    this.#d.log.info(
      {
        decision: d.allow ? "allow" : "deny",
        ...(d.allow ? {} : { reason: d.reason }),
        how,
        namespace: req.namespace,
        app: req.app,
        host: req.host,
        method: req.method,
        ...(share ? { share } : {}),
        ...(user ? { user } : {}),
        ...extra,
      },
      d.allow ? "share access allowed" : "share access denied",
    );
  }

  /**
   * The decision on one request; throws EdgeDenied (rendered as a problem) when it is refused. Only
   * a sign-in ticket's hand-back waits on anything (the shared ledger of used tickets): a cookie or
   * a share token is decided from memory.
   */
  check(req: EdgeRequest): EdgeAnswer | Promise<EdgeAnswer> {
    const now = this.#d.now();
    const nowMs = now.getTime();
    const hostname = req.host.replace(/:\d+$/, "").toLowerCase();
    const url = new URL(`${req.proto === "https" ? "https" : "http"}://${req.host}${req.uri.startsWith("/") ? req.uri : `/${req.uri}`}`);
    const at = { ns: req.namespace, app: req.app, host: hostname };
    const { grant: cookieGrant, forged } = this.#grantOf(req.cookie, req.proto);

    // A sign-in ticket handed back by the sign-in flow: the viewer now carries a user.
    const ticketValue = url.searchParams.get(FORWARD_AUTH.loginParam);
    if (ticketValue !== null) return this.#ticket(req, url, at, ticketValue, cookieGrant, nowMs);

    // A share link's first visit.
    const token = url.searchParams.get(FORWARD_AUTH.shareParam);
    if (token !== null) return this.#token(req, url, at, token, cookieGrant, nowMs);

    if (forged) return this.#deny(req, { allow: false, reason: "invalid_grant" }, "cookie");
    const grant = cookieGrant;
    const d = decide(at, grant, grant ? this.#share(grant.ns, grant.share) : undefined, nowMs);
    if (d.allow) return this.#allow(req, d, "cookie");
    if (d.reason === "login_required" && grant) return this.#signIn(req, url, d, undefined, "cookie");
    return this.#deny(req, d, "cookie");
  }

  #token(
    req: EdgeRequest,
    url: URL,
    at: { ns: string; app: string; host: string },
    token: string,
    cookieGrant: Grant | undefined,
    nowMs: number,
  ): EdgeAnswer {
    // Only shares of this App can match: the path names it, and each Share names its App.
    const match = isShareToken(token)
      ? this.#d.cache
          .list<ShareObject>("Share", at.ns)
          .find((s) => s.spec?.appRef?.name === at.app && typeof s.spec.tokenHash === "string" && tokenMatches(token, s.spec.tokenHash))
      : undefined;
    const view = shareView(match);
    if (!view) return this.#deny(req, { allow: false, reason: "invalid_token" }, "token");
    const live = shareLive(view, at.app, nowMs);
    if (!live.ok) return this.#deny(req, { allow: false, reason: live.reason, share: view }, "token");
    // A viewer already signed in on this host keeps their user.
    const user = cookieGrant && cookieGrant.host === at.host && cookieGrant.exp * 1000 > nowMs ? cookieGrant.user : undefined;
    const grant: Grant = {
      ns: at.ns,
      app: at.app,
      share: view.name,
      uid: view.uid,
      host: at.host,
      exp: grantExpiry(view, nowMs, this.#d.sessionSeconds),
      ...(user ? { user } : {}),
    };
    const cookie = this.#setCookie(req, grant, nowMs);
    const d = decide(at, grant, view, nowMs);
    if (!d.allow) return this.#signIn(req, url, d, cookie, "token");
    return this.#exchange(req, url, d, cookie, "token");
  }

  async #ticket(
    req: EdgeRequest,
    url: URL,
    at: { ns: string; app: string; host: string },
    value: string,
    cookieGrant: Grant | undefined,
    nowMs: number,
  ): Promise<EdgeAnswer> {
    const ticket = parseTicket(verify(this.#d.key, "login", value));
    if (
      !ticket ||
      ticket.host !== at.host ||
      ticket.exp <= nowMs / 1000 ||
      ticket.jti.length > 64 ||
      !(await this.#d.tickets.take(ticket.jti, ticket.exp))
    ) {
      return this.#deny(req, { allow: false, reason: "invalid_grant" }, "sign-in");
    }
    if (!cookieGrant) return this.#deny(req, { allow: false, reason: "no_grant" }, "sign-in");
    const grant: Grant = { ...cookieGrant, user: ticket.user };
    const d = decide(at, grant, this.#share(grant.ns, grant.share), nowMs);
    if (!d.allow) return this.#deny(req, d, "sign-in");
    return this.#exchange(req, url, d, this.#setCookie(req, grant, nowMs), "sign-in");
  }

  /** A token or ticket taken: the cookie, and back to the same URL without it (nginx: on to the App). */
  #exchange(req: EdgeRequest, url: URL, d: Decision & { allow: true }, cookie: string, how: string): EdgeAnswer {
    const navigation = req.method === "GET" || req.method === "HEAD";
    if (req.nginx || !navigation) {
      const a = this.#allow(req, d, how);
      return { ...a, headers: { ...a.headers, "Set-Cookie": cookie } };
    }
    this.#log(req, d, how, { redirect: true });
    return {
      status: 302,
      headers: {
        Location: withoutParams(url, [FORWARD_AUTH.shareParam, FORWARD_AUTH.loginParam]),
        "Set-Cookie": cookie,
        "Cache-Control": "no-store",
      },
    };
  }

  /** The share requires a signed-in viewer: off to sign in (with the cookie that holds the share so far). */
  #signIn(req: EdgeRequest, url: URL, d: Decision & { allow: false }, cookie: string | undefined, how: string): EdgeAnswer {
    const navigation = req.method === "GET" || req.method === "HEAD";
    if (!this.#d.signIn || req.nginx || !navigation) {
      // nginx turns a 401 into its auth-signin redirect; without a provider nobody can sign in.
      this.#log(req, d, how);
      throw new EdgeDenied(d.reason, req.nginx ? 401 : 403);
    }
    this.#log(req, d, how, { redirect: "sign-in" });
    const back = withoutParams(url, [FORWARD_AUTH.shareParam, FORWARD_AUTH.loginParam]);
    return {
      status: 302,
      headers: { Location: this.#d.signIn.loginUrl(back), ...(cookie ? { "Set-Cookie": cookie } : {}), "Cache-Control": "no-store" },
    };
  }

  #allow(req: EdgeRequest, d: Decision & { allow: true }, how: string): EdgeAnswer {
    this.#log(req, d, how);
    return { status: 200, headers: { "X-Berth-Share": d.share.name, ...(d.user ? { "X-Berth-User": d.user.email ?? d.user.sub } : {}) } };
  }

  #deny(req: EdgeRequest, d: { allow: false; reason: DenyReason; share?: ShareView | undefined }, how: string): never {
    this.#log(req, d, how);
    throw new EdgeDenied(d.reason, d.reason === "login_required" ? 401 : 403);
  }
}
