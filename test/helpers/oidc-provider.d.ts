// The part of oidc-provider's API that test/helpers/oidc.ts uses (the package ships no types).
declare module "oidc-provider" {
  import type { IncomingMessage, ServerResponse } from "node:http";

  interface Interaction {
    uid: string;
    params: Record<string, unknown>;
    prompt: { name: string };
  }
  interface Account {
    accountId: string;
    claims: () => Record<string, unknown> | Promise<Record<string, unknown>>;
  }
  class Grant {
    constructor(props: { accountId: string; clientId: string });
    addOIDCScope(scope: string): void;
    save(): Promise<string>;
  }
  interface Configuration {
    clients: Record<string, unknown>[];
    findAccount: (ctx: unknown, id: string) => Account | Promise<Account>;
    claims?: Record<string, string[]>;
    features?: Record<string, unknown>;
    interactions?: { url: (ctx: unknown, interaction: Interaction) => string };
    cookies?: { keys: string[] };
    pkce?: { required: () => boolean };
    conformIdTokenClaims?: boolean;
  }
  export default class Provider {
    constructor(issuer: string, configuration: Configuration);
    Grant: typeof Grant;
    callback(): (req: IncomingMessage, res: ServerResponse) => void;
    interactionDetails(req: IncomingMessage, res: ServerResponse): Promise<Interaction>;
    interactionFinished(
      req: IncomingMessage,
      res: ServerResponse,
      result: Record<string, unknown>,
      opts?: { mergeWithLastSubmission?: boolean },
    ): Promise<void>;
  }
}
