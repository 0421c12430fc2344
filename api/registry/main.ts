// The registry's token service as a process (docs/images.md "Pull credentials"). In the berth-api
// image: `node api/registry/main.ts`; hack/lib/realnode.sh runs it on the host for the local node.
//
//   node api/registry/main.ts keys DIR   makes DIR/registry.key (the pull credentials' HMAC key),
//                                        DIR/signing.pem (Ed25519) and DIR/jwks.json (the registry's
//                                        auth.token.jwks) where missing, and exits; files never change
//   node api/registry/main.ts            serves, configured by the variables below
import { createPrivateKey, createPublicKey, generateKeyPairSync, randomBytes } from "node:crypto";
import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { createLogger } from "../../kube/logger.ts";
import { readRegistryKey } from "../../kube/registry-credentials.ts";
import { RateLimiter } from "../http/limits.ts";
import { loadTokenServiceConfig } from "./config.ts";
import { jwksOf, startTokenService } from "./token-service.ts";

/** Makes what is missing of DIR/registry.key, DIR/signing.pem and DIR/jwks.json. */
export async function makeKeys(dir: string): Promise<void> {
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  const keyFile = join(dir, "registry.key");
  if (!existsSync(keyFile)) writeFileSync(keyFile, randomBytes(32).toString("hex") + "\n", { mode: 0o600 });
  const signing = join(dir, "signing.pem");
  if (!existsSync(signing)) {
    const { privateKey } = generateKeyPairSync("ed25519");
    writeFileSync(signing, privateKey.export({ type: "pkcs8", format: "pem" }), { mode: 0o600 });
  }
  const jwks = join(dir, "jwks.json");
  const publicKey = createPublicKey(createPrivateKey(readFileSync(signing)));
  writeFileSync(jwks, JSON.stringify(await jwksOf(publicKey)) + "\n");
}

async function main(): Promise<void> {
  if (process.argv[2] === "keys") {
    if (!process.argv[3]) throw new Error("usage: node api/registry/main.ts keys DIR");
    await makeKeys(process.argv[3]);
    return;
  }
  const c = loadTokenServiceConfig();
  const log = createLogger({ level: c.BERTH_LOG_LEVEL, base: { component: "registry-auth" } });
  const server = await startTokenService(
    {
      key: readRegistryKey(c.BERTH_REGISTRY_AUTH_KEY_FILE),
      signingKey: createPrivateKey(readFileSync(c.BERTH_REGISTRY_AUTH_SIGNING_KEY_FILE)),
      service: c.BERTH_REGISTRY_AUTH_SERVICE,
      issuer: c.BERTH_REGISTRY_AUTH_ISSUER,
      prefix: c.BERTH_BUILD_REPOSITORY_PREFIX,
      limiter: new RateLimiter({ perSecond: c.BERTH_REGISTRY_AUTH_RATE_PER_SECOND, burst: c.BERTH_REGISTRY_AUTH_BURST }),
      log,
    },
    c.BERTH_REGISTRY_AUTH_LISTEN.host,
    c.BERTH_REGISTRY_AUTH_LISTEN.port,
  );
  log.info({ listen: c.BERTH_REGISTRY_AUTH_LISTEN }, "registry token service listening");
  const stop = () => server.close(() => process.exit(0));
  process.once("SIGTERM", stop);
  process.once("SIGINT", stop);
}

if (import.meta.main) {
  main().catch((err: unknown) => {
    process.stderr.write(`${err instanceof Error ? err.message : String(err)}\n`);
    process.exit(1);
  });
}
