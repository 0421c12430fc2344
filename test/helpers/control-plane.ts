// A Kubernetes control plane of a test's own (etcd, kube-apiserver and a kube-controller-manager
// running the garbage collector), for tests that restart the API server or compact etcd: the
// suite's shared control plane serves every other test file at the same time and must never go
// down. The same pinned binaries and flags as hack/cluster (kwok mode), the same certificates
// (its PKI, under $BERTH_LOCAL/cluster/pki: the admin kubeconfig works with another port), fresh
// etcd data, free ports. The test points KUBECONFIG at it (each ava test file is a process).
import { spawn, type ChildProcess } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import * as yaml from "js-yaml";
import { binPath, root, run } from "./binaries.ts";
import { eventually } from "./kube.ts";
import { freePort } from "./processes.ts";

export interface DedicatedControlPlane {
  /** The admin kubeconfig of this control plane. */
  kubeconfig: string;
  /** https://127.0.0.1:<port> */
  server: string;
  etcdUrl: string;
  /** Stops kube-apiserver (SIGKILL by default) and leaves it down. */
  stopApiServer(signal?: NodeJS.Signals): Promise<void>;
  /** Starts kube-apiserver again on the same port and etcd; resolves once /readyz answers ok. */
  startApiServer(): Promise<void>;
  /** etcd's current revision. */
  revision(): Promise<number>;
  /** Compacts etcd's history up to its current revision (physically); returns that revision. */
  compact(): Promise<number>;
  stop(): Promise<void>;
}

interface Proc {
  child: ChildProcess;
  exited: Promise<void>;
}

function start(bin: string, args: string[], log: string): Proc {
  const child = spawn(binPath(bin), args, { stdio: ["ignore", "pipe", "pipe"] });
  // keep the last output for failure messages, nothing on the test's own output
  const lines: string[] = [];
  const keep = (b: Buffer) => {
    lines.push(...b.toString().split("\n"));
    if (lines.length > 400) lines.splice(0, lines.length - 400);
  };
  child.stdout.on("data", keep);
  child.stderr.on("data", keep);
  const exited = new Promise<void>((r) =>
    child.once("exit", () => {
      writeFileSync(log, lines.join("\n"));
      r();
    }),
  );
  return { child, exited };
}

async function kill(p: Proc | undefined, signal: NodeJS.Signals = "SIGTERM"): Promise<void> {
  if (!p || p.child.exitCode !== null || p.child.signalCode !== null) return;
  p.child.kill(signal);
  const t = setTimeout(() => p.child.kill("SIGKILL"), 10_000);
  await p.exited;
  clearTimeout(t);
}

export async function dedicatedControlPlane(): Promise<DedicatedControlPlane> {
  const local = process.env.BERTH_LOCAL;
  if (!local || !process.env.KUBECONFIG) throw new Error("BERTH_LOCAL and KUBECONFIG are not set: run the tests through ./hack/test");
  const pki = join(local, "cluster/pki");
  const dir = mkdtempSync(join(tmpdir(), "berth-cp-"));
  const [etcdPort, peerPort, apiPort, kcmPort] = [await freePort(), await freePort(), await freePort(), await freePort()];
  const etcdUrl = `http://127.0.0.1:${etcdPort}`;
  const server = `https://127.0.0.1:${apiPort}`;

  // the shared cluster's admin kubeconfig, pointed at this API server
  const kc = yaml.load(readFileSync(process.env.KUBECONFIG, "utf8")) as { clusters: { cluster: { server: string } }[] };
  for (const c of kc.clusters) c.cluster.server = server;
  const kubeconfig = join(dir, "kubeconfig");
  writeFileSync(kubeconfig, yaml.dump(kc), { mode: 0o600 });

  const procs: { etcd?: Proc; api?: Proc; kcm?: Proc } = {};
  const stop = async () => {
    await kill(procs.kcm);
    await kill(procs.api);
    await kill(procs.etcd);
    rmSync(dir, { recursive: true, force: true });
  };
  const etcdArgs = [
    "--name",
    "default",
    "--data-dir",
    join(dir, "etcd"),
    "--listen-client-urls",
    etcdUrl,
    "--advertise-client-urls",
    etcdUrl,
    "--listen-peer-urls",
    `http://127.0.0.1:${peerPort}`,
    "--initial-advertise-peer-urls",
    `http://127.0.0.1:${peerPort}`,
    "--initial-cluster",
    `default=http://127.0.0.1:${peerPort}`,
    "--unsafe-no-fsync",
  ];
  const apiArgs = [
    "--etcd-servers",
    etcdUrl,
    "--bind-address",
    "127.0.0.1",
    "--advertise-address",
    "127.0.0.1",
    "--disable-admission-plugins",
    "ServiceAccount",
    "--secure-port",
    String(apiPort),
    "--tls-cert-file",
    join(pki, "apiserver.crt"),
    "--tls-private-key-file",
    join(pki, "apiserver.key"),
    "--client-ca-file",
    join(pki, "ca.crt"),
    "--service-account-issuer",
    server,
    "--service-account-key-file",
    join(pki, "sa.pub"),
    "--service-account-signing-key-file",
    join(pki, "sa.key"),
    "--service-cluster-ip-range",
    "10.96.0.0/16",
    "--authorization-mode",
    "Node,RBAC",
    "--allow-privileged=true",
    "--cert-dir",
    join(dir, "apiserver-certs"),
    "--profiling=false",
  ];
  const kcmArgs = [
    "--kubeconfig",
    kubeconfig,
    "--authentication-kubeconfig",
    kubeconfig,
    "--authorization-kubeconfig",
    kubeconfig,
    "--bind-address",
    "127.0.0.1",
    "--secure-port",
    String(kcmPort),
    "--leader-elect=false",
    "--controllers",
    "garbagecollector,namespace",
    "--kube-api-qps",
    "200",
    "--kube-api-burst",
    "400",
    "--profiling=false",
  ];

  const etcdCall = async <R>(path: string, body: unknown): Promise<R> => {
    const res = await fetch(`${etcdUrl}${path}`, { method: "POST", body: JSON.stringify(body) });
    if (!res.ok) throw new Error(`etcd ${path}: ${res.status} ${await res.text()}`);
    return (await res.json()) as R;
  };
  const revision = async () =>
    Number(
      (await etcdCall<{ header: { revision: string } }>("/v3/kv/range", { key: Buffer.from("/").toString("base64") })).header.revision,
    );

  const startApiServer = async () => {
    procs.api = start("kube-apiserver", apiArgs, join(dir, "kube-apiserver.log"));
    const api = procs.api;
    await eventually(
      "the dedicated kube-apiserver to be ready",
      async () => {
        if (api.child.exitCode !== null) throw new Error("kube-apiserver exited");
        return (
          (await run(binPath("kubectl"), ["--kubeconfig", kubeconfig, "get", "--raw", "/readyz"], { timeoutMs: 10_000 })).stdout.trim() ===
          "ok"
        );
      },
      120_000,
      500,
    );
  };

  try {
    procs.etcd = start("etcd", etcdArgs, join(dir, "etcd.log"));
    await eventually("the dedicated etcd", async () => (await fetch(`${etcdUrl}/health`).catch(() => undefined))?.ok, 30_000, 200);
    await startApiServer();
    procs.kcm = start("kube-controller-manager", kcmArgs, join(dir, "kube-controller-manager.log"));
    // Berth's CRDs, and the others the operator watches (Traefik's, cert-manager's), copied from
    // the suite's control plane (hack/cluster applied them from their Go modules)
    const others = await run(binPath("kubectl"), ["get", "crd", "-o", "json"]);
    if (others.code !== 0) throw new Error(`listing the suite's CRDs failed: ${others.stderr}`);
    const list = JSON.parse(others.stdout) as { items: { metadata: Record<string, unknown>; spec: { group: string }; status?: unknown }[] };
    const copies = list.items
      .filter((c) => c.spec.group !== "berth.dev")
      .map((c) => ({
        apiVersion: "apiextensions.k8s.io/v1",
        kind: "CustomResourceDefinition",
        metadata: { name: c.metadata.name },
        spec: c.spec,
      }));
    const copied = await run(binPath("kubectl"), ["--kubeconfig", kubeconfig, "apply", "--server-side", "-f", "-"], {
      input: JSON.stringify({ apiVersion: "v1", kind: "List", items: copies }),
    });
    if (copied.code !== 0) throw new Error(`copying the CRDs failed: ${copied.stderr}`);
    const crds = await run(binPath("kubectl"), [
      "--kubeconfig",
      kubeconfig,
      "apply",
      "--server-side",
      "--force-conflicts",
      "-f",
      join(root, "crds/generated"),
    ]);
    if (crds.code !== 0) throw new Error(`applying the CRDs failed: ${crds.stderr}`);
    const est = await run(binPath("kubectl"), [
      "--kubeconfig",
      kubeconfig,
      "wait",
      "--for",
      "condition=Established",
      "--timeout=60s",
      "-f",
      join(root, "crds/generated"),
    ]);
    if (est.code !== 0) throw new Error(`the CRDs are not established: ${est.stderr}`);
  } catch (err) {
    await stop();
    throw err;
  }
  return {
    kubeconfig,
    server,
    etcdUrl,
    stopApiServer: (signal: NodeJS.Signals = "SIGKILL") => kill(procs.api, signal),
    startApiServer,
    revision,
    async compact() {
      const rev = await revision();
      await etcdCall("/v3/kv/compaction", { revision: String(rev), physical: true });
      return rev;
    },
    stop,
  };
}
