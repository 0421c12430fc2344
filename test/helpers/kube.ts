// Test helpers for the real API server started by hack/cluster (KUBECONFIG is set by hack/test).
import * as k8s from "@kubernetes/client-node";
import { randomBytes } from "node:crypto";
import type { ExecutionContext } from "ava";
import { loadKubeConfig } from "../../kube/client.ts";

export function kubeConfig(): k8s.KubeConfig {
  if (!process.env.KUBECONFIG) throw new Error("KUBECONFIG is not set: run the tests through ./hack/test");
  return loadKubeConfig(process.env.KUBECONFIG);
}

export interface Kube {
  kc: k8s.KubeConfig;
  core: k8s.CoreV1Api;
  apps: k8s.AppsV1Api;
  batch: k8s.BatchV1Api;
  objects: k8s.KubernetesObjectApi;
}

export function kube(): Kube {
  const kc = kubeConfig();
  return {
    kc,
    core: kc.makeApiClient(k8s.CoreV1Api),
    apps: kc.makeApiClient(k8s.AppsV1Api),
    batch: kc.makeApiClient(k8s.BatchV1Api),
    objects: k8s.KubernetesObjectApi.makeApiClient(kc),
  };
}

export function uniqueName(prefix: string): string {
  return `${prefix}-${randomBytes(4).toString("hex")}`;
}

/** A fresh namespace for one test file, deleted when the file's tests end. */
export async function testNamespace(k: Kube, prefix = "t", labels: Record<string, string> = {}): Promise<string> {
  const name = uniqueName(prefix);
  await k.core.createNamespace({ body: { metadata: { name, labels } } });
  return name;
}

export async function deleteNamespace(k: Kube, name: string): Promise<void> {
  await k.core.deleteNamespace({ name }).catch(() => undefined);
}

/** Polls `fn` until it returns a truthy value; fails the test with `what` on timeout. */
export async function eventually<T>(
  what: string,
  fn: () => Promise<T | undefined | null | false>,
  timeoutMs = 30_000,
  intervalMs = 200,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let last: unknown;
  for (;;) {
    try {
      const v = await fn();
      if (v) return v;
    } catch (err) {
      last = err;
    }
    if (Date.now() > deadline)
      throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}${last instanceof Error ? `: ${last.message}` : ""}`);
    await new Promise((r) => setTimeout(r, intervalMs));
  }
}

/** The API server's error body (a Status) from a client-node ApiException. */
export function apiError(err: unknown): { code: number; message: string } {
  const e = err as { code?: number; body?: unknown };
  let body: { message?: string } = {};
  if (typeof e.body === "string") {
    try {
      body = JSON.parse(e.body) as { message?: string };
    } catch {
      body = { message: e.body };
    }
  } else if (e.body && typeof e.body === "object") body = e.body;
  return { code: e.code ?? 0, message: body.message ?? String(err) };
}

export type T = ExecutionContext<unknown>;
