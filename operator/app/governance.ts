// The operator's side of governance provisioning: it asks the API (which owns the database) to
// provision an App's store and mint its scoped key, authenticated with its ServiceAccount token,
// and writes the answer into the `<app>-governance` Secret. Contract: crds/governance.ts and
// docs/governance.md. The calls go over node:http(s), as the operator's Kubernetes client does
// (kube/transport.ts); with a CA file (BERTH_OPERATOR_API_CA_FILE) the API's certificate is
// verified against that CA only, over https:// only (docs/security.md "The operator's calls").
import http from "node:http";
import https from "node:https";
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
  readonly #caFile: string | undefined;
  readonly #timeoutMs: number;
  /** The connection pool of the CA last read: a new one when the file's content changes (cert-manager renewed the CA). */
  #tls: { ca: string; agent: https.Agent } | undefined;

  constructor(opts: { baseUrl: string; tokenFile: string; caFile?: string | undefined; timeoutMs?: number }) {
    this.#baseUrl = opts.baseUrl.replace(/\/+$/, "");
    const protocol = new URL(this.#baseUrl).protocol;
    if (protocol !== "https:" && protocol !== "http:") throw new Error(`the API URL must be http(s)://, not ${protocol}`);
    if (opts.caFile && protocol !== "https:")
      throw new Error("a CA file is given for the API: its URL must be https:// (the token is never sent over plain HTTP then)");
    this.#tokenFile = opts.tokenFile;
    this.#caFile = opts.caFile;
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

  /** The agent for the API's URL: with the CA file, one that trusts that CA only (read again on every call, as the token is). */
  async #agent(secure: boolean): Promise<http.Agent> {
    if (!secure) return http.globalAgent; // keep-alive, as fetch's pool was
    if (!this.#caFile) return https.globalAgent;
    const ca = await readFile(this.#caFile, "utf8");
    if (this.#tls?.ca !== ca) {
      // the old pool's idle connections are closed by the API's keep-alive timeout
      this.#tls = { ca, agent: new https.Agent({ keepAlive: true, ca }) };
    }
    return this.#tls.agent;
  }

  async #call(method: "POST" | "DELETE", body: object, signal: AbortSignal | undefined): Promise<unknown> {
    const what = method === "POST" ? "provisioning" : "de-provisioning";
    // Projected ServiceAccount tokens rotate: read the file on every call.
    const token = (await readFile(this.#tokenFile, "utf8")).trim();
    const timeout = AbortSignal.timeout(this.#timeoutMs);
    const url = new URL(`${this.#baseUrl}${PROVISION_PATH}`);
    const secure = url.protocol === "https:";
    let res: { status: number; text: string };
    try {
      res = await send(url, {
        method,
        agent: await this.#agent(secure),
        headers: { Authorization: `Bearer ${token}`, "Content-Type": "application/json", Accept: "application/json" },
        body: JSON.stringify(body),
        signal: signal ? AbortSignal.any([signal, timeout]) : timeout,
      });
    } catch (err) {
      if (signal?.aborted) throw err; // the reconcile was cancelled
      // Unreachable, timed out, or a certificate the CA did not sign or of another name: the code (ECONNREFUSED, SELF_SIGNED_CERT_IN_CHAIN, ...) stays.
      const e = err as NodeJS.ErrnoException;
      throw Object.assign(
        new Error(`governance ${what}: no answer from the API at ${url.origin}: ${e.message}${e.code ? ` (${e.code})` : ""}`, {
          cause: err,
        }),
        { code: e.code },
      );
    }
    const text = res.text;
    if (res.status >= 200 && res.status < 300) {
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

/** One request, its answer read whole. A TLS failure (an API certificate the CA did not sign) rejects with Node's error. */
function send(
  url: URL,
  opts: { method: string; agent: http.Agent; headers: Record<string, string>; body: string; signal: AbortSignal },
): Promise<{ status: number; text: string }> {
  return new Promise((resolve, reject) => {
    const req = (url.protocol === "https:" ? https : http).request(
      url,
      {
        method: opts.method,
        agent: opts.agent,
        headers: { ...opts.headers, "Content-Length": String(Buffer.byteLength(opts.body)) },
        signal: opts.signal,
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on("data", (c: Buffer) => chunks.push(c));
        res.on("end", () => resolve({ status: res.statusCode ?? 0, text: Buffer.concat(chunks).toString("utf8") }));
        res.on("error", reject);
      },
    );
    req.on("error", reject);
    req.end(opts.body);
  });
}
