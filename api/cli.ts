// Bootstrap CLI: workspaces, workspace API keys and platform admin keys, straight against the
// database (and the cluster for namespaces). Prints JSON on stdout; errors go to stderr with a
// non-zero exit status (1 failure, 2 usage).
//
//   node api/cli.ts workspace create --name <name> [--id <wsId>]   -> {workspaceId, namespace, apiKey, ...}
//   node api/cli.ts workspace list
//   node api/cli.ts key create --workspace <wsId> --name <name>     -> {id, ..., key}
//   node api/cli.ts key list --workspace <wsId>
//   node api/cli.ts key revoke --key-id <id>
//   node api/cli.ts admin-key create --name <name>                  -> {id, ..., key}
//   node api/cli.ts admin-key list
//   node api/cli.ts admin-key revoke --key-id <id>
//
// Configuration (DATABASE_URL, KUBECONFIG) comes from the environment through api/config.ts.
import { parseArgs } from "node:util";
import type { MikroORM } from "@mikro-orm/postgresql";
import { loadConfig, type Config } from "./config.ts";
import { openOrm } from "./db/orm.ts";
import { DomainError } from "./errors.ts";
import { createLogger } from "../kube/logger.ts";
import { ApiKeyService, PlatformAdminKeyService, type KeyView } from "./auth/keys.ts";
import { KubeNamespaceEnsurer, workspaceSetup } from "./workspaces/namespaces.ts";
import { loadKubeConfig } from "../kube/client.ts";
import { WorkspaceService } from "./workspaces/service.ts";

export const USAGE = `usage: node api/cli.ts <command>
  workspace create --name <name> [--id <wsId>]   create a workspace, its namespace and a first key
                                                  (retry with the printed id to finish an interrupted create)
  workspace list
  key create --workspace <wsId> --name <name>     mint a workspace API key (ws_sk_...; printed once)
  key list --workspace <wsId>
  key revoke --key-id <id>
  admin-key create --name <name>                  mint a platform admin key (pa_sk_...; printed once)
  admin-key list
  admin-key revoke --key-id <id>`;

class UsageError extends Error {}

interface Flags {
  name?: string;
  id?: string;
  workspace?: string;
  "key-id"?: string;
}

function required(flags: Flags, name: keyof Flags): string {
  const v = flags[name];
  if (v === undefined || v.trim() === "") throw new UsageError(`--${name} is required`);
  return v;
}

function keyJson(k: KeyView & { workspaceId?: string }) {
  return {
    id: k.id,
    ...(k.workspaceId ? { workspaceId: k.workspaceId } : {}),
    name: k.name,
    prefix: k.prefix,
    createdAt: k.createdAt.toISOString(),
    lastUsedAt: k.lastUsedAt?.toISOString() ?? null,
    revokedAt: k.revokedAt?.toISOString() ?? null,
  };
}

function checkName(name: string): string {
  const n = name.trim();
  if (n.length < 1 || n.length > 100) throw new UsageError("--name must be 1 to 100 characters");
  return n;
}

async function run(command: string, flags: Flags, config: Config, orm: MikroORM): Promise<unknown> {
  const log = createLogger({ level: "warn", destination: process.stderr, base: { component: "cli" } });
  const em = orm.em.fork();
  const keys = new ApiKeyService({ log });
  const adminKeys = new PlatformAdminKeyService({ log });
  switch (command) {
    case "workspace create": {
      const name = checkName(required(flags, "name"));
      const workspaces = new WorkspaceService({
        orm,
        namespaces: new KubeNamespaceEnsurer(loadKubeConfig(config.KUBECONFIG), workspaceSetup(config)),
        log,
      });
      const { workspace, created } = await workspaces.create(em, { name, id: flags.id });
      const { key, secret } = await keys.create(em, workspace.id, "initial");
      return { workspaceId: workspace.id, name: workspace.name, namespace: workspace.namespace, created, apiKey: secret, apiKeyId: key.id };
    }
    case "workspace list": {
      const workspaces = new WorkspaceService({ orm, namespaces: { ensure: () => Promise.resolve() }, log });
      return (await workspaces.list(em)).map((w) => ({
        id: w.id,
        name: w.name,
        namespace: w.namespace,
        createdAt: w.createdAt.toISOString(),
      }));
    }
    case "key create": {
      const { key, secret } = await keys.create(em, required(flags, "workspace"), checkName(required(flags, "name")));
      return { ...keyJson(key), key: secret };
    }
    case "key list":
      return (await keys.list(em, required(flags, "workspace"))).map(keyJson);
    case "key revoke":
      return keyJson(await keys.revoke(em, required(flags, "key-id")));
    case "admin-key create": {
      const { key, secret } = await adminKeys.create(em, checkName(required(flags, "name")));
      return { ...keyJson(key), key: secret };
    }
    case "admin-key list":
      return (await adminKeys.list(em)).map(keyJson);
    case "admin-key revoke":
      return keyJson(await adminKeys.revoke(em, required(flags, "key-id")));
    default:
      throw new UsageError(`unknown command '${command}'`);
  }
}

export async function cli(argv: string[]): Promise<number> {
  let positionals: string[];
  let flags: Flags;
  try {
    const parsed = parseArgs({
      args: argv,
      allowPositionals: true,
      strict: true,
      options: {
        name: { type: "string" },
        id: { type: "string" },
        workspace: { type: "string" },
        "key-id": { type: "string" },
        help: { type: "boolean", short: "h" },
      },
    });
    if (parsed.values.help || parsed.positionals.length === 0) {
      process.stdout.write(`${USAGE}\n`);
      return parsed.values.help ? 0 : 2;
    }
    positionals = parsed.positionals;
    flags = parsed.values;
  } catch (err) {
    process.stderr.write(`error: ${err instanceof Error ? err.message : String(err)}\n${USAGE}\n`);
    return 2;
  }
  if (positionals.length !== 2) {
    process.stderr.write(`error: expected '<noun> <verb>', got '${positionals.join(" ")}'\n${USAGE}\n`);
    return 2;
  }

  let config: Config;
  try {
    config = loadConfig();
  } catch (err) {
    process.stderr.write(`error: ${err instanceof Error ? err.message : String(err)}\n`);
    return 1;
  }
  let orm: MikroORM | undefined;
  try {
    orm = await openOrm(config.DATABASE_URL, { poolMax: 2 });
    const out = await run(positionals.join(" "), flags, config, orm);
    process.stdout.write(`${JSON.stringify(out, null, 2)}\n`);
    return 0;
  } catch (err) {
    if (err instanceof UsageError) {
      process.stderr.write(`error: ${err.message}\n${USAGE}\n`);
      return 2;
    }
    if (err instanceof DomainError) {
      process.stderr.write(`error: ${err.message} (${err.code})\n`);
      return 1;
    }
    process.stderr.write(`error: ${err instanceof Error ? err.message : String(err)}\n`);
    return 1;
  } finally {
    await orm?.close();
  }
}

if (import.meta.main) process.exitCode = await cli(process.argv.slice(2));
