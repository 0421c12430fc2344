// The operator's side of governance provisioning: it asks the API (which owns the database) to
// provision an App's store and mint its scoped key, authenticated with its ServiceAccount token,
// and writes the answer into the `<app>-governance` Secret. Contract: docs/governance.md.
import { readFile } from "node:fs/promises";

export interface ProvisionRequest { namespace: string; appName: string; appUid: string; generation: number }
export interface Provisioned { project: string; workspaceId: string; database: string; generation: number; connectionString: string }

export interface GovernanceClient {
  provision(req: ProvisionRequest): Promise<Provisioned>;
  deprovision(req: Omit<ProvisionRequest, "generation">): Promise<void>;
}

/** The API refused because governance was switched off for the App (public DELETE .../provision). */
export class GovernanceDisabledError extends Error {}

/** Annotations on the App through which the API asks for a fresh key or switches governance off. */
export const GOVERNANCE_GENERATION_ANNOTATION = "berth.dev/governance-generation";
export const GOVERNANCE_DISABLED_ANNOTATION = "berth.dev/governance-disabled";
/** Finalizer that drops the App's store when the App is deleted. */
export const GOVERNANCE_FINALIZER = "berth.dev/governance";

export function governanceGeneration(annotations: Record<string, string> | undefined): number {
  const n = Number(annotations?.[GOVERNANCE_GENERATION_ANNOTATION] ?? 1);
  return Number.isInteger(n) && n >= 1 ? n : 1;
}

export function governanceDisabled(annotations: Record<string, string> | undefined): boolean {
  return annotations?.[GOVERNANCE_DISABLED_ANNOTATION] === "true";
}

export class HttpGovernanceClient implements GovernanceClient {
  readonly #baseUrl: string;
  readonly #tokenFile: string;
  readonly #timeoutMs: number;

  constructor(opts: { baseUrl: string; tokenFile: string; timeoutMs?: number }) {
    this.#baseUrl = opts.baseUrl.replace(/\/+$/, "");
    this.#tokenFile = opts.tokenFile;
    this.#timeoutMs = opts.timeoutMs ?? 10_000;
  }

  async provision(req: ProvisionRequest): Promise<Provisioned> {
    return (await this.#call("POST", req)) as Provisioned;
  }

  async deprovision(req: Omit<ProvisionRequest, "generation">): Promise<void> {
    await this.#call("DELETE", req);
  }

  async #call(method: "POST" | "DELETE", body: object): Promise<unknown> {
    // Projected ServiceAccount tokens rotate: read the file on every call.
    const token = (await readFile(this.#tokenFile, "utf8")).trim();
    const res = await fetch(`${this.#baseUrl}/api/v1/internal/governance/provision`, {
      method,
      headers: { Authorization: `Bearer ${token}`, "Content-Type": "application/json", Accept: "application/json" },
      body: JSON.stringify(body),
      signal: AbortSignal.timeout(this.#timeoutMs),
    });
    const text = await res.text();
    if (res.ok) return text ? JSON.parse(text) : undefined;
    let problem: { code?: string; detail?: string } = {};
    try { problem = JSON.parse(text) as typeof problem; } catch { /* not a problem document */ }
    if (res.status === 409 && problem.code === "governance_disabled") throw new GovernanceDisabledError(problem.detail ?? "governance is disabled for this App");
    throw new Error(`governance ${method === "POST" ? "provisioning" : "de-provisioning"} failed: HTTP ${res.status} ${problem.code ?? ""} ${problem.detail ?? ""}`.trim());
  }
}
