// What the benchmarks read about processes and the machine (Linux /proc), and a free local port.
// CPU figures are in seconds, from clock ticks of 1/100 s.
import type { ChildProcess } from "node:child_process";
import { readdirSync, readFileSync } from "node:fs";
import { createServer } from "node:net";

interface Stat {
  name: string;
  ppid: number;
  cpu: number;
  childrenCpu: number;
}

/** A /proc/<pid>/stat (or a task's) line: the name is between the first "(" and the last ")". */
function stat(path: string): Stat {
  const text = readFileSync(path, "utf8");
  const close = text.lastIndexOf(")");
  // fields after the name, from state (index 0): ppid 1, utime 11, stime 12, cutime 13, cstime 14
  const f = text.slice(close + 2).split(" ");
  return {
    name: text.slice(text.indexOf("(") + 1, close),
    ppid: Number(f[1]),
    cpu: (Number(f[11]) + Number(f[12])) / 100,
    childrenCpu: (Number(f[13]) + Number(f[14])) / 100,
  };
}

/** CPU seconds a process has used (all its threads). */
export function cpuSeconds(pid: number): number {
  return stat(`/proc/${pid}/stat`).cpu;
}

/** CPU seconds of a process's threads by thread name (Node: MainThread, WorkerThread, V8Worker for GC and compiler helpers). */
export function threadCpuSeconds(pid: number): Map<string, number> {
  const out = new Map<string, number>();
  for (const tid of readdirSync(`/proc/${pid}/task`)) {
    try {
      const s = stat(`/proc/${pid}/task/${tid}/stat`);
      out.set(s.name, (out.get(s.name) ?? 0) + s.cpu);
    } catch {
      /* the thread ended */
    }
  }
  return out;
}

/** Every process on the machine now, by pid (those that end while it is read are left out). */
function processes(): Map<number, Stat> {
  const out = new Map<number, Stat>();
  for (const pid of readdirSync("/proc")) {
    if (!/^\d+$/.test(pid)) continue;
    try {
      out.set(Number(pid), stat(`/proc/${pid}/stat`));
    } catch {
      /* the process ended */
    }
  }
  return out;
}

/**
 * CPU seconds of every PostgreSQL process on the machine (postmaster, backends, background
 * workers), including the processes that have exited: the postmaster's reaped children's time.
 */
export function postgresCpuSeconds(): number {
  const all = processes();
  let sum = 0;
  for (const s of all.values()) {
    if (s.name !== "postgres") continue;
    sum += s.cpu;
    if (all.get(s.ppid)?.name !== "postgres") sum += s.childrenCpu; // the postmaster
  }
  return sum;
}

/** Busy and total CPU time of the whole machine (all cores), in clock ticks. */
export function machineTicks(): { busy: number; total: number } {
  const cpu = readFileSync("/proc/stat", "utf8").split("\n")[0]!.trim().split(/\s+/).slice(1).map(Number);
  const idle = cpu[3]! + cpu[4]!; // idle + iowait
  const total = cpu.reduce((a, b) => a + b, 0);
  return { busy: total - idle, total };
}

/** Resident memory of a process in MiB. */
export function rssMiB(pid: number): number {
  return (Number(readFileSync(`/proc/${pid}/statm`, "utf8").split(" ")[1]) * 4096) / 2 ** 20;
}

/**
 * Waits until the API that `child` runs answers GET /healthz on 127.0.0.1:`port` (tries every
 * 100 ms, `tries` times), and returns it; else kills it and throws.
 */
export async function untilHealthy(child: ChildProcess, port: number, tries = 200): Promise<ChildProcess> {
  for (let i = 0; i < tries; i++) {
    try {
      if ((await fetch(`http://127.0.0.1:${port}/healthz`)).ok) return child;
    } catch {
      /* not yet */
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  child.kill();
  throw new Error("the API did not start");
}

/** A TCP port on 127.0.0.1 that was free a moment ago. */
export async function freePort(): Promise<number> {
  const srv = createServer();
  await new Promise<void>((r) => srv.listen(0, "127.0.0.1", r));
  const port = (srv.address() as { port: number }).port;
  await new Promise((r) => srv.close(r));
  return port;
}

/**
 * CPU seconds of every process on the machine by name, each counting the children it has reaped
 * (a container's shim counts its runc calls; whoever reaps a shim counts the shim). The difference
 * of two readings shows where the machine's CPU went between them, short-lived processes included.
 */
export function cpuByProcessName(): Map<string, number> {
  const out = new Map<string, number>();
  for (const s of processes().values()) {
    // kernel workers are named after what they last did (kworker/u8:1-events_unbound): one entry
    const name = s.name.startsWith("kworker/") ? "kworker" : s.name;
    out.set(name, (out.get(name) ?? 0) + s.cpu + s.childrenCpu);
  }
  return out;
}
