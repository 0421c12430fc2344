// A real OpenID Connect provider on loopback (the `oidc-provider` package, certified by the
// OpenID Foundation), standing in for an organisation's identity provider: discovery, the
// authorization endpoint with PKCE, the token endpoint, signed ID tokens. Its sign-in page is a
// plain form (POST login=<user>): a browser in a test fills it in like a person would.
//
//   const idp = await startOidcProvider({ redirectUri: "http://127.0.0.1:<api>/api/v1/auth/oidc/callback" });
//   idp.issuer, idp.clientId, idp.clientSecret; await idp.stop();
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import Provider from "oidc-provider";

export interface TestOidcProvider {
  issuer: string;
  clientId: string;
  clientSecret: string;
  /** Users who signed in, in order (accountIds). */
  signIns: string[];
  stop(): Promise<void>;
}

function readForm(req: IncomingMessage): Promise<URLSearchParams> {
  return new Promise((resolve, reject) => {
    let body = "";
    req
      .setEncoding("utf8")
      .on("data", (d: string) => {
        body += d;
      })
      .on("end", () => resolve(new URLSearchParams(body)))
      .on("error", reject);
  });
}

export async function startOidcProvider(opts: {
  redirectUri: string;
  clientId?: string;
  clientSecret?: string;
  port?: number;
  /** The email of a login (default `<login>@example.com`); a login starting with "unverified-" still has it unverified. */
  emailOf?: (login: string) => string;
}): Promise<TestOidcProvider> {
  const emailOf = opts.emailOf ?? ((login: string) => `${login}@example.com`);
  const clientId = opts.clientId ?? "berth";
  const clientSecret = opts.clientSecret ?? "berth-test-client-secret-0123456789";
  const signIns: string[] = [];
  const holder: { provider?: Provider } = {};
  const server: Server = createServer((req: IncomingMessage, res: ServerResponse) => {
    const url = new URL(req.url ?? "/", "http://x");
    const m = /^\/interaction\/([^/]+)(\/login)?$/.exec(url.pathname);
    const p = holder.provider;
    if (!p) {
      res.writeHead(503).end();
      return;
    }
    if (!m) {
      p.callback()(req, res);
      return;
    }
    void (async () => {
      try {
        const details = await p.interactionDetails(req, res);
        if (req.method === "GET") {
          res
            .writeHead(200, { "Content-Type": "text/html" })
            .end(`<form method="post" action="/interaction/${details.uid}/login"><input name="login"><button>Sign in</button></form>`);
          return;
        }
        const login = (await readForm(req)).get("login");
        if (!login) {
          res.writeHead(400).end("login required");
          return;
        }
        const grant = new p.Grant({ accountId: login, clientId: String(details.params.client_id) });
        grant.addOIDCScope(String(details.params.scope));
        const grantId = await grant.save();
        signIns.push(login);
        await p.interactionFinished(req, res, { login: { accountId: login }, consent: { grantId } }, { mergeWithLastSubmission: false });
      } catch (err) {
        res.writeHead(500).end(String(err));
      }
    })();
  });
  await new Promise<void>((resolve) => server.listen(opts.port ?? 0, "127.0.0.1", resolve));
  const issuer = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  holder.provider = new Provider(issuer, {
    clients: [
      {
        client_id: clientId,
        client_secret: clientSecret,
        redirect_uris: [opts.redirectUri],
        grant_types: ["authorization_code"],
        response_types: ["code"],
        token_endpoint_auth_method: "client_secret_basic",
      },
    ],
    // A login starting with "unverified-" has an email its provider did not verify.
    findAccount: (_ctx, id) => ({
      accountId: id,
      claims: () => ({ sub: id, email: emailOf(id), email_verified: !id.startsWith("unverified-") }),
    }),
    claims: { openid: ["sub"], email: ["email", "email_verified"] },
    features: { devInteractions: { enabled: false } },
    interactions: { url: (_ctx, interaction) => `/interaction/${interaction.uid}` },
    cookies: { keys: ["berth-test-idp-cookie-key"] },
    pkce: { required: () => true },
    // The email in the ID token itself, as the common identity providers put it with the email scope.
    conformIdTokenClaims: false,
  });
  return {
    issuer,
    clientId,
    clientSecret,
    signIns,
    stop: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
