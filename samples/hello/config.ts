// The sample's configuration, read once from the environment (docs/design.md §5.7). The toolkit reads
// its own variables: GOVDB_CONNECTION and GOVERNANCE_PROJECT (or BERTH_GOVERNANCE=off).
import { z } from "zod";

const Env = z.object({
  PORT: z.coerce.number().int().min(0).max(65535).default(8080),
  /** all interfaces in a pod; tests on the host use 127.0.0.1 */
  HOST: z.string().min(1).default("0.0.0.0"),
  /** shown by GET /, so that a rollout can be seen answering */
  HELLO_VERSION: z.string().min(1).default("1"),
});

/** Variables that GET /env/<name> may show: only these, so that nothing else of the environment can leak. */
export const SHOWN_ENV_PREFIX = "SAMPLE_";

export interface Config {
  port: number;
  host: string;
  version: string;
  /** The SAMPLE_* variables (an empty value included), for GET /env/<name>. */
  shown: Record<string, string>;
}

export function loadConfig(env: Record<string, string | undefined> = process.env): Config {
  const e = Env.parse(Object.fromEntries(Object.entries(env).filter(([, v]) => v !== undefined && v !== "")));
  const shown = Object.fromEntries(
    Object.entries(env).filter((kv): kv is [string, string] => kv[0].startsWith(SHOWN_ENV_PREFIX) && kv[1] !== undefined),
  );
  return { port: e.PORT, host: e.HOST, version: e.HELLO_VERSION, shown };
}
