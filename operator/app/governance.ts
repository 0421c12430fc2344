// The operator's side of governance provisioning: it asks the API (which owns the database) to
// provision an App's store and mint its scoped key, authenticated with its ServiceAccount token,
// and writes the answer into the `<app>-governance` Secret. Contract: crds/governance.ts and
// docs/governance.md.
import { readFile } from "node:fs/promises";
import {
  GOVERNANCE_DISABLED_CODE,
  PROVISION_PATH,
  Provisioned,
  type DeprovisionRequest,
  type ProvisionRequest,
} from "../../crds/governance.ts";

export interface GovernanceClient {
  provision(req: ProvisionRequest, signal?: AbortSignal): Promise<Provisioned>;
  deprovision(req: DeprovisionRequest, signal?: AbortSignal): Promise<void>;
}

/** The API refused because governance was switched off for the App (public DELETE .../provision). */
export class GovernanceDisabledError extends Error {}

export class HttpGovernanceClient implements GovernanceClient {
  readonly #baseUrl: string;
  readonly #tokenFile: string;
  readonly #timeoutMs: number;

  constructor(opts: { baseUrl: string; tokenFile: string; timeoutMs?: number }) {
    this.#baseUrl = opts.baseUrl.replace(/\/+$/, "");
    this.#tokenFile = opts.tokenFile;
    this.#timeoutMs = opts.timeoutMs ?? 10_000;
  }

  async provision(req: ProvisionRequest, signal?: AbortSignal): Promise<Provisioned> {
    const answer = Provisioned.safeParse(await this.#call("POST", req, signal));
    if (!answer.success)
      throw new Error(
        `governance provisioning answered an unexpected body: ${answer.error.issues.map((i) => `${i.path.join(".")}: ${i.message}`).join("; ")}`,
      );
    return answer.data;
  }

  async deprovision(req: DeprovisionRequest, signal?: AbortSignal): Promise<void> {
    await this.#call("DELETE", req, signal);
  }

  async #call(method: "POST" | "DELETE", body: object, signal: AbortSignal | undefined): Promise<unknown> {
    const what = method === "POST" ? "provisioning" : "de-provisioning";
    // Projected ServiceAccount tokens rotate: read the file on every call.
    const token = (await readFile(this.#tokenFile, "utf8")).trim();
    const timeout = AbortSignal.timeout(this.#timeoutMs);
    const res = await fetch(`${this.#baseUrl}${PROVISION_PATH}`, {
      method,
      headers: { Authorization: `Bearer ${token}`, "Content-Type": "application/json", Accept: "application/json" },
      body: JSON.stringify(body),
      signal: signal ? AbortSignal.any([signal, timeout]) : timeout,
    });
    const text = await res.text();
    if (res.ok) {
      try {
        return text ? (JSON.parse(text) as unknown) : undefined;
      } catch {
        throw new Error(`governance ${what} answered HTTP ${res.status} with a body that is not JSON`);
      }
    }
    let problem: { code?: string; detail?: string } = {};
    try {
      problem = JSON.parse(text) as typeof problem;
    } catch {
      /* not a problem document */
    }
    if (res.status === 409 && problem.code === GOVERNANCE_DISABLED_CODE)
      throw new GovernanceDisabledError(problem.detail ?? "governance is disabled for this App");
    throw new Error(`governance ${what} failed: HTTP ${res.status} ${problem.code ?? ""} ${problem.detail ?? ""}`.trim());
  }
}
