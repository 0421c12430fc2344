// The pinned binaries of hack/lib/common.sh, from the same cache as its bin_path.
import { execFile } from "node:child_process";
import { readFileSync } from "node:fs";
import { homedir } from "node:os";
import { join } from "node:path";

export const root = join(import.meta.dirname, "../..");
const commonSh = readFileSync(join(root, "hack/lib/common.sh"), "utf8");

/** A version pinned in hack/lib/common.sh (`NAME="${NAME:-v1.2.3}"`), overridable from the environment like there. */
export function pinned(name: string): string {
  const fromEnv = process.env[name];
  if (fromEnv) return fromEnv;
  const m = new RegExp(`^${name}="\\$\\{${name}:-([^}"]+)\\}"`, "m").exec(commonSh);
  if (!m?.[1]) throw new Error(`${name} is not pinned in hack/lib/common.sh`);
  return m[1];
}

export const K8S_VERSION = pinned("K8S_VERSION");
const binDir = join(process.env.BERTH_CACHE ?? join(homedir(), ".cache/berth"), "bin");
export const HELM = join(binDir, `helm-${pinned("HELM_VERSION")}`);
export const KUBECTL = join(binDir, `kubectl-${K8S_VERSION}`);

export interface Run { code: number; stdout: string; stderr: string }

/** Runs a binary; resolves with its exit status (never rejects on a non-zero exit; -1 when killed at the timeout). */
export function run(bin: string, args: string[], opts: { input?: string; env?: NodeJS.ProcessEnv; timeoutMs?: number } = {}): Promise<Run> {
  return new Promise((resolve, reject) => {
    const options = { maxBuffer: 64 * 1024 * 1024, env: opts.env ?? process.env, timeout: opts.timeoutMs ?? 60_000, killSignal: "SIGKILL" as const, cwd: root };
    const child = execFile(bin, args, options, (err, stdout, stderr) => {
      if (err && typeof err.code === "string") { reject(new Error(`${bin}: ${err.message}`)); return; } // ENOENT and the like
      resolve({ code: err ? (typeof err.code === "number" ? err.code : -1) : 0, stdout, stderr });
    });
    child.stdin?.end(opts.input ?? "");
  });
}

export const helm = (args: string[]) => run(HELM, args);
export const kubectl = (args: string[], input?: string) => run(KUBECTL, args, input === undefined ? {} : { input });
