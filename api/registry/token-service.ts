// The registry's token service (docs/images.md "Pull credentials"): the realm of distribution's
// token authentication (https://distribution.github.io/distribution/spec/auth/token/) for the
// registry endpoint the nodes pull from. A client that the registry answered 401 asks
//
//   GET /token?service=<service>&scope=repository:<name>:pull[&scope=...]
//
// with HTTP Basic credentials (a namespace's pull credential, kube/registry-credentials.ts) or none
// (anonymous), and gets a short-lived JWT, signed with an Ed25519 key whose public half the registry
// trusts (its `jwks` file), that carries what grants.ts allows. Bad credentials are refused with 401;
// credentials are never logged, only the caller's namespace and what it was granted.
import { createPublicKey, randomUUID, type KeyObject } from "node:crypto";
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import { SignJWT, exportJWK, calculateJwkThumbprint, type JWK } from "jose";
import type { Logger } from "../../kube/logger.ts";
import { namespaceOfPullUsername, passwordMatches, pullUsername } from "../../kube/registry-credentials.ts";
import { addressCaller, type RateLimiter } from "../http/limits.ts";
import { grant, parseScopes, type Caller } from "./grants.ts";

export interface TokenServiceOptions {
  /** the HMAC key of the pull credentials */
  key: Buffer;
  /** the Ed25519 private key tokens are signed with */
  signingKey: KeyObject;
  /** the `service` the registry names (its auth.token.service), the tokens' audience */
  service: string;
  /** the tokens' issuer (the registry's auth.token.issuer) */
  issuer: string;
  /** the workspaces' images are <prefix>/<namespace>/<app> */
  prefix: string;
  /** how long a token is valid; 300 s by default */
  ttlSeconds?: number;
  /**
   * Each caller's budget of token requests: a namespace's credential is one caller, a request
   * without valid credentials is its address's (addressCaller), so one pod's flood or guesses
   * spend only its own budget. None: unlimited.
   */
  limiter?: RateLimiter | undefined;
  log: Logger;
  now?: () => Date;
}

/** Longest request target accepted (16 scopes of long names fit). */
const MAX_URL = 8192;
const DEFAULT_TTL = 300;

/**
 * The JWK set the registry trusts (auth.token.jwks): the signing key's public half, its `kid` the
 * key's RFC 7638 thumbprint, which the tokens' headers carry.
 */
export async function jwksOf(publicKey: KeyObject): Promise<{ keys: [JWK & { kid: string }] }> {
  const jwk = await exportJWK(publicKey);
  return { keys: [{ ...jwk, kid: await calculateJwkThumbprint(jwk), alg: "EdDSA", use: "sig" }] };
}

/** The caller of a request: anonymous without Authorization; undefined when its credentials are bad. */
export function callerOf(header: string | undefined, key: Buffer): Caller | undefined {
  if (header === undefined) return { kind: "anonymous" };
  const m = /^Basic +([A-Za-z0-9+/]+={0,2}) *$/i.exec(header);
  if (!m) return undefined;
  const text = Buffer.from(m[1]!, "base64").toString("utf8");
  const colon = text.indexOf(":");
  if (colon < 0) return undefined;
  const username = text.slice(0, colon);
  const namespace = namespaceOfPullUsername(username);
  if (!namespace || !passwordMatches(key, username, text.slice(colon + 1))) return undefined;
  return { kind: "namespace", namespace };
}

function send(res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}): void {
  const text = JSON.stringify(body);
  res.writeHead(status, { "content-type": "application/json", "cache-control": "no-store", ...headers });
  res.end(text);
}

const error = (code: string, message: string) => ({ errors: [{ code, message }] });

/** The request handler (the server's, and tests'). */
export async function tokenHandler(o: TokenServiceOptions): Promise<(req: IncomingMessage, res: ServerResponse) => void> {
  const { kid } = (await jwksOf(createPublicKey(o.signingKey))).keys[0];
  const ttl = o.ttlSeconds ?? DEFAULT_TTL;
  const now = o.now ?? (() => new Date());
  return (req, res) => {
    void (async () => {
      if ((req.url ?? "").length > MAX_URL) return send(res, 414, error("UNSUPPORTED", "the request target is too long"));
      const url = new URL(req.url ?? "/", "http://token.invalid");
      if (url.pathname === "/healthz") return send(res, 200, { ok: true });
      if (url.pathname !== "/token") return send(res, 404, error("NAME_UNKNOWN", "no such endpoint: the token endpoint is /token"));
      if (req.method !== "GET") return send(res, 405, error("UNSUPPORTED", "only GET is served"), { allow: "GET" });
      if (url.searchParams.get("service") !== o.service)
        return send(res, 400, error("DENIED", `this service issues tokens for the service "${o.service}" only`));
      const scopes = parseScopes(url.searchParams.getAll("scope"));
      if (!scopes) return send(res, 400, error("DENIED", "too many scopes in one request"));
      const caller = callerOf(req.headers.authorization, o.key);
      const namespace = caller?.kind === "namespace" ? caller.namespace : undefined;
      const budget = o.limiter?.take(namespace ? `ns:${namespace}` : addressCaller(req.socket.remoteAddress), now().getTime());
      if (budget && !budget.allowed) {
        o.log.warn({ event: "registry_token_limited", caller: namespace ?? "address" }, "registry token request over budget");
        return send(res, 429, error("TOOMANYREQUESTS", "too many token requests: try again later"), {
          "retry-after": String(budget.retryAfterSeconds),
        });
      }
      if (!caller) {
        o.log.info({ event: "registry_token_refused" }, "registry token refused: bad credentials");
        return send(res, 401, error("UNAUTHORIZED", "the credentials are not a valid pull credential"), {
          "www-authenticate": `Basic realm="${o.service}"`,
        });
      }
      const access = grant(caller, scopes, o.prefix);
      const issued = now();
      const at = Math.floor(issued.getTime() / 1000);
      const token = await new SignJWT({ access })
        .setProtectedHeader({ alg: "EdDSA", typ: "JWT", kid })
        .setIssuer(o.issuer)
        .setSubject(namespace ? pullUsername(namespace) : "")
        .setAudience(o.service)
        .setIssuedAt(at)
        .setNotBefore(at)
        .setExpirationTime(at + ttl)
        .setJti(randomUUID())
        .sign(o.signingKey);
      o.log.info(
        {
          event: "registry_token",
          caller: namespace ?? "anonymous",
          granted: access.map((a) => a.name),
          denied: scopes.length - access.length,
        },
        "registry token issued",
      );
      send(res, 200, { token, access_token: token, expires_in: ttl, issued_at: issued.toISOString() });
    })().catch((err: unknown) => {
      o.log.error({ err }, "registry token service failed");
      if (!res.headersSent) send(res, 500, error("UNKNOWN", "the token service failed"));
      else res.destroy();
    });
  };
}

/** Starts the token service on `host:port`; resolves once it listens. */
export async function startTokenService(o: TokenServiceOptions, host: string, port: number): Promise<Server> {
  const server = createServer({ requestTimeout: 10_000, headersTimeout: 10_000, maxHeaderSize: 16_384 }, await tokenHandler(o));
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(port, host, () => resolve());
  });
  return server;
}
