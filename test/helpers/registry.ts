// A local OCI registry for a test: distribution's `registry` binary (hack/binaries registry,
// REGISTRY_VERSION of hack/lib/common.sh) on a free 127.0.0.1 port, with its own temporary storage.
//
//   const reg = await startRegistry();
//   t.teardown(() => reg.stop());
//   await pushImages(reg.host, [image]);
import { spawn } from "node:child_process";
import { existsSync } from "node:fs";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { freePort } from "../../hack/bench/proc.ts";
import { binPath } from "../../hack/lib/pinned.ts";
import { Registry } from "../../hack/lib/registry.ts";
import { eventually } from "./kube.ts";

export interface TestRegistry {
  /** 127.0.0.1:<port> */
  host: string;
  client: Registry;
  /** what the registry wrote (warnings and errors) */
  output(): string;
  /** stops the registry and removes its storage */
  stop(): Promise<void>;
}

export async function startRegistry(): Promise<TestRegistry> {
  const bin = binPath("registry");
  if (!existsSync(bin)) throw new Error(`${bin} is missing: build it with hack/binaries registry`);
  const dir = await mkdtemp(join(tmpdir(), "berth-registry-"));
  const port = await freePort();
  const host = `127.0.0.1:${port}`;
  const config = join(dir, "config.yml");
  await writeFile(
    config,
    [
      "version: 0.1",
      "log:",
      "  level: warn",
      "storage:",
      "  filesystem:",
      `    rootdirectory: ${join(dir, "data")}`,
      "http:",
      `  addr: ${host}`,
      "  secret: berth-test-registry",
      "",
    ].join("\n"),
  );
  // no telemetry: the registry's OpenTelemetry exporter stays off
  const child = spawn(bin, ["serve", config], {
    stdio: ["ignore", "pipe", "pipe"],
    env: { ...process.env, OTEL_TRACES_EXPORTER: "none", OTEL_SDK_DISABLED: "true" },
  });
  let output = "";
  child.stdout.on("data", (d: Buffer) => {
    output += d.toString();
  });
  child.stderr.on("data", (d: Buffer) => {
    output += d.toString();
  });
  const exited = new Promise<void>((r) => child.once("exit", () => r()));
  const stop = async () => {
    if (child.exitCode === null && child.signalCode === null) child.kill("SIGTERM");
    await Promise.race([exited, new Promise((r) => setTimeout(r, 5000))]);
    if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
    await rm(dir, { recursive: true, force: true });
  };
  const client = new Registry(host);
  try {
    // an exit ends the wait at once: returned, not thrown (eventually retries what throws until its timeout)
    const state = await eventually(
      `the registry at ${host}`,
      async () => {
        if (child.exitCode !== null || child.signalCode !== null) return "exited";
        await client.ping();
        return "up";
      },
      15_000,
      100,
    );
    if (state === "exited") throw new Error(`the registry exited (${child.exitCode ?? child.signalCode}): ${output}`);
  } catch (err) {
    await stop();
    throw err;
  }
  return { host, client, output: () => output, stop };
}
