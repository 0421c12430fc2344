// Berth's processes as they run in production, for the fault tests: `node operator/main.ts` and
// `node api/main.ts` as child processes under the chart's identities (helpers/identities.ts), so a
// test can SIGKILL them mid-work and start them again. Their output (JSON log lines) is kept in
// memory for assertions and failure messages.
import { spawn, type ChildProcess } from "node:child_process";
import { join } from "node:path";
import { root } from "./binaries.ts";
import { bindOperatorWorkspaceRole, identity } from "./identities.ts";
import { eventually } from "./kube.ts";
import { freePort } from "../../hack/bench/proc.ts";
export { freePort };

export interface NodeProcess {
  readonly name: string;
  readonly child: ChildProcess;
  readonly pid: number;
  /** Every line the process wrote (stdout and stderr), in order. */
  readonly lines: string[];
  /** Resolves with the exit code (or the signal's name) once the process has exited. */
  readonly exited: Promise<number | string>;
  /** Sends `signal` and waits for the exit (SIGKILL after `timeoutMs` if it lingers). */
  stop(signal?: NodeJS.Signals, timeoutMs?: number): Promise<void>;
  /** The last lines, for failure messages. */
  tail(n?: number): string;
}

/** Runs `node <script>` from the repository with `env` (on top of PATH and HOME only: nothing else leaks in). */
export function spawnNode(name: string, script: string, env: Record<string, string>, args: string[] = []): NodeProcess {
  const child = spawn(process.execPath, [join(root, script), ...args], {
    cwd: root,
    stdio: ["ignore", "pipe", "pipe"],
    env: { PATH: process.env.PATH ?? "", HOME: process.env.HOME ?? "", ...env },
  });
  const lines: string[] = [];
  const collect = (stream: NodeJS.ReadableStream) => {
    let rest = "";
    stream.setEncoding("utf8");
    stream.on("data", (chunk: string) => {
      const parts = (rest + chunk).split("\n");
      rest = parts.pop() ?? "";
      lines.push(...parts);
    });
    stream.on("end", () => {
      if (rest) lines.push(rest);
    });
  };
  collect(child.stdout);
  collect(child.stderr);
  const exited = new Promise<number | string>((resolve) => child.once("exit", (code, signal) => resolve(code ?? signal ?? -1)));
  if (child.pid === undefined) throw new Error(`${name} did not start`);
  const pid = child.pid;
  return {
    name,
    child,
    pid,
    lines,
    exited,
    async stop(signal: NodeJS.Signals = "SIGTERM", timeoutMs = 15_000) {
      if (child.exitCode !== null || child.signalCode !== null) return;
      child.kill(signal);
      const timer = setTimeout(() => child.kill("SIGKILL"), timeoutMs);
      await exited;
      clearTimeout(timer);
    },
    tail: (n = 30) => lines.slice(-n).join("\n"),
  };
}

/** Waits until the process has written a log line whose `msg` is `msg`; fails with its last lines if it exits first. */
export async function waitForLog(p: NodeProcess, msg: string, timeoutMs = 60_000): Promise<Record<string, unknown>> {
  let exit: number | string | undefined;
  void p.exited.then((e) => {
    exit = e;
  });
  try {
    return await eventually(
      `${p.name} to log "${msg}"`,
      () => {
        if (exit !== undefined) throw new Error(`${p.name} exited (${exit})`);
        return Promise.resolve(logLines(p).find((l) => l.msg === msg));
      },
      timeoutMs,
      100,
    );
  } catch (err) {
    throw new Error(`${(err as Error).message}\n--- last lines of ${p.name} ---\n${p.tail()}`, { cause: err });
  }
}

/** The process's JSON log lines, parsed (other lines are skipped). */
export function logLines(p: NodeProcess): Record<string, unknown>[] {
  const out: Record<string, unknown>[] = [];
  for (const l of p.lines) {
    if (!l.startsWith("{")) continue;
    try {
      out.push(JSON.parse(l) as Record<string, unknown>);
    } catch {
      /* a partial line */
    }
  }
  return out;
}

export interface OperatorProcessOptions {
  /** BERTH_WATCH_NAMESPACE */
  namespace: string;
  /** Leader election on the chart's Lease (berth-system/berth-operator); default off. */
  leaderElection?: boolean;
  /** BERTH_OPERATOR_IDENTITY (the Lease holder and the Events' reporting instance). */
  identity?: string;
  env?: Record<string, string>;
}

/** `node operator/main.ts` under the chart's operator ServiceAccount; resolves once its caches are synced. */
export async function spawnOperator(opts: OperatorProcessOptions): Promise<NodeProcess> {
  const id = await identity("operator");
  await bindOperatorWorkspaceRole(opts.namespace);
  const p = spawnNode(`operator ${opts.identity ?? ""}`.trim(), "operator/main.ts", {
    KUBECONFIG: id.kubeconfig,
    BERTH_OPERATOR_TOKEN_FILE: id.tokenFile,
    BERTH_WATCH_NAMESPACE: opts.namespace,
    BERTH_LEADER_ELECTION: String(opts.leaderElection ?? false),
    BERTH_OPERATOR_HEALTH_PORT: "0",
    BERTH_LOG_LEVEL: "info",
    ...(opts.identity ? { BERTH_OPERATOR_IDENTITY: opts.identity } : {}),
    ...opts.env,
  });
  try {
    await waitForLog(p, "operator started");
  } catch (err) {
    await p.stop("SIGKILL");
    throw err;
  }
  return p;
}

/** The port of the operator's health server (from its "operator started" line). */
export function healthPortOf(p: NodeProcess): number {
  const line = logLines(p).find((l) => l.msg === "operator started");
  if (typeof line?.healthPort !== "number") throw new Error(`${p.name} has not logged its health port`);
  return line.healthPort;
}
