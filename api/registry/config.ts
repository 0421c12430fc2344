// The registry token service's configuration, parsed once with zod (api/registry/main.ts).
import { z } from "zod";

export const TokenServiceConfigSchema = z.object({
  BERTH_REGISTRY_AUTH_LISTEN: z
    .string()
    .regex(/^(\[[0-9a-fA-F:.]+\]|[0-9a-zA-Z.-]+):\d{1,5}$/, "must be host:port")
    .default("0.0.0.0:5001")
    .transform((v) => {
      const colon = v.lastIndexOf(":");
      return { host: v.slice(0, colon).replace(/^\[|\]$/g, ""), port: Number(v.slice(colon + 1)) };
    })
    .describe("Where the token service listens, host:port"),
  BERTH_REGISTRY_AUTH_KEY_FILE: z
    .string()
    .min(1)
    .describe("The pull credentials' HMAC key (at least 32 bytes): the operator's BERTH_REGISTRY_AUTH_KEY_FILE holds the same"),
  BERTH_REGISTRY_AUTH_SIGNING_KEY_FILE: z.string().min(1).describe("The Ed25519 private key (PKCS #8 PEM) tokens are signed with"),
  BERTH_REGISTRY_AUTH_SERVICE: z.string().min(1).max(253).default("berth-registry").describe("The registry's auth.token.service"),
  BERTH_REGISTRY_AUTH_ISSUER: z.string().min(1).max(253).default("berth-registry-auth").describe("The registry's auth.token.issuer"),
  BERTH_BUILD_REPOSITORY_PREFIX: z
    .string()
    .regex(/^[a-z0-9._-]+(\/[a-z0-9._-]+)*$/, "must be a repository path, not empty")
    .default("apps")
    .describe("The workspaces' images are <prefix>/<namespace>/<app> (the operator's variable of the same name)"),
  BERTH_REGISTRY_AUTH_RATE_PER_SECOND: z.coerce
    .number()
    .min(0)
    .max(100000)
    .default(20)
    .describe("Token requests a caller (a namespace's credential, or an address without one) may make per second; 0 turns the limit off"),
  BERTH_REGISTRY_AUTH_BURST: z.coerce
    .number()
    .int()
    .min(1)
    .max(100000)
    .default(200)
    .describe("Token requests a caller may make at once before BERTH_REGISTRY_AUTH_RATE_PER_SECOND applies"),
  BERTH_LOG_LEVEL: z.enum(["fatal", "error", "warn", "info", "debug", "trace", "silent"]).default("info"),
});

export type TokenServiceConfig = z.output<typeof TokenServiceConfigSchema>;

export function loadTokenServiceConfig(env: NodeJS.ProcessEnv = process.env): TokenServiceConfig {
  const parsed = TokenServiceConfigSchema.safeParse(env);
  if (!parsed.success)
    throw new Error(`invalid configuration:\n${parsed.error.issues.map((i) => `  ${i.path.join(".")}: ${i.message}`).join("\n")}`);
  return parsed.data;
}
