// The pinned binaries of hack/lib/common.sh (hack/lib/pinned.ts: the same cache as its bin_path).
import { execFile } from "node:child_process";
import { join } from "node:path";
import { binPath, pinned } from "../../hack/lib/pinned.ts";

export { binPath, pinned };
export const root = join(import.meta.dirname, "../..");

export const K8S_VERSION = pinned("K8S_VERSION");
export const HELM = binPath("helm");
export const KUBECTL = binPath("kubectl");

export interface Run {
  code: number;
  stdout: string;
  stderr: string;
}

/** Runs a binary; resolves with its exit status (never rejects on a non-zero exit; -1 when killed at the timeout). */
export function run(bin: string, args: string[], opts: { input?: string; env?: NodeJS.ProcessEnv; timeoutMs?: number } = {}): Promise<Run> {
  return new Promise((resolve, reject) => {
    const options = {
      maxBuffer: 64 * 1024 * 1024,
      env: opts.env ?? process.env,
      timeout: opts.timeoutMs ?? 60_000,
      killSignal: "SIGKILL" as const,
      cwd: root,
    };
    const child = execFile(bin, args, options, (err, stdout, stderr) => {
      if (err && typeof err.code === "string") {
        reject(new Error(`${bin}: ${err.message}`));
        return;
      } // ENOENT and the like
      resolve({ code: err ? (typeof err.code === "number" ? err.code : -1) : 0, stdout, stderr });
    });
    child.stdin?.end(opts.input ?? "");
  });
}

export const helm = (args: string[]) => run(HELM, args);
export const kubectl = (args: string[], input?: string) => run(KUBECTL, args, input === undefined ? {} : { input });
