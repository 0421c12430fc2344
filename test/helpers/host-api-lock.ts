// The node's bridge forwards one port to an API on the host (BERTH_HOST_API_PORT): end-to-end test
// files that run their API there take turns (ava runs files side by side), by an exclusive
// directory under BERTH_LOCAL.
import { mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";

const dir = () => join(process.env.BERTH_LOCAL ?? "/tmp", "host-api-port.lock");

/** Waits (up to `timeoutMs`) until this process holds the port; returns the release. */
export async function lockHostApiPort(timeoutMs = 30 * 60_000): Promise<() => void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    try {
      mkdirSync(dir());
      writeFileSync(join(dir(), "pid"), String(process.pid));
      return () => rmSync(dir(), { recursive: true, force: true });
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== "EEXIST" || Date.now() > deadline) throw err;
      if (!holderAlive()) {
        rmSync(dir(), { recursive: true, force: true });
        continue;
      } // left by a process that died
      await new Promise((r) => setTimeout(r, 500));
    }
  }
}

function holderAlive(): boolean {
  let pid: number;
  try {
    pid = Number(readFileSync(join(dir(), "pid"), "utf8"));
  } catch {
    return true;
  } // being written
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}
