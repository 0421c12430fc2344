// The only place the toolkit reads the environment (docs/design.md §5.7): the two variables injected
// into every governed service (docs/spec.md part 1), the switch that turns governance off, and where the
// prompt-injection classifier's files are (BERTH_GUARD_MODEL_DIR).
import { GovdbConnectionError } from "./errors.ts";
import type { GovdbConnection } from "./connection.ts";
import { parseConnection } from "./connection.ts";

export interface GovernanceEnv {
  /** GOVDB_CONNECTION, undefined when unset or empty */
  connection: string | undefined;
  /** GOVERNANCE_PROJECT, undefined when unset or empty */
  project: string | undefined;
  /** BERTH_GOVERNANCE=off (also 0, false, no, disabled, noop): run without governance */
  off: boolean;
  /** BERTH_GUARD_MODEL_DIR: the classifier's directory, undefined for the package's own model/ */
  guardModelDir: string | undefined;
}

const OFF = new Set(["off", "0", "false", "no", "disabled", "noop"]);

/** Reads the variables from `env` (default process.env). */
export function readEnv(env: Record<string, string | undefined> = process.env): GovernanceEnv {
  const value = (name: string) => {
    const v = env[name]?.trim();
    return v === undefined || v === "" ? undefined : v;
  };
  const mode = value("BERTH_GOVERNANCE");
  return {
    connection: value("GOVDB_CONNECTION"),
    project: value("GOVERNANCE_PROJECT"),
    off: mode !== undefined && OFF.has(mode.toLowerCase()),
    guardModelDir: value("BERTH_GUARD_MODEL_DIR"),
  };
}

/** The connection from an explicit value or GOVDB_CONNECTION; GovdbConnectionError when missing or malformed. */
export function resolveConnection(explicit: string | GovdbConnection | undefined, env: GovernanceEnv): GovdbConnection {
  if (explicit !== undefined && typeof explicit !== "string") return explicit;
  const raw = explicit ?? env.connection;
  if (raw === undefined || raw.trim() === "") {
    throw new GovdbConnectionError(
      "missing",
      "GOVDB_CONNECTION is not set: the service has no governance credential. Deploy it through Berth (which injects the variable), " +
        'pass configure({ connection }), or run without governance with BERTH_GOVERNANCE=off or configure({ mode: "noop" }).',
    );
  }
  return parseConnection(raw);
}
