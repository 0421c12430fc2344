// HTTP to the governance API with the app key of GOVDB_CONNECTION: the boot-time configuration
// (GET /api/v1/governance/config), trace batches (POST /api/v1/governance/traces) and, for a
// service without the classifier's files, the classifier's score of a prompt (POST
// /api/v1/governance/guard-check). Uses the
// global fetch of Node 24. Error messages name the status and the problem code, never the key.
import type { EngineConfigInput, HeadScores } from "../engine.ts";
import type { GovdbConnection } from "./connection.ts";
import type { ItemResult, SendOutcome, TraceTransport } from "./queue.ts";

/** GET /api/v1/governance/config */
export interface ToolkitConfig {
  /** the app id (GOVERNANCE_PROJECT) the key belongs to */
  project: string;
  /** the app's observability config, every default applied */
  observability: Record<string, unknown>;
  /** the EngineConfig the API evaluates this app's traces with (templates resolved) */
  engine: EngineConfigInput;
}

export type ConfigOutcome =
  { ok: true; config: ToolkitConfig } | { ok: false; error: string; status?: number; retryable: boolean; retryAfterMs?: number };

export interface HttpTransportOptions {
  connection: GovdbConnection;
  /** default globalThis.fetch */
  fetch?: typeof fetch;
  /** per request; default 10 s */
  timeoutMs?: number;
  userAgent?: string;
}

const RETRYABLE = (status: number) => status === 408 || status === 429 || status >= 500;

/** Retry-After: delay-seconds or an HTTP date; undefined when absent or unreadable. */
export function parseRetryAfter(value: string | null, now = Date.now()): number | undefined {
  if (value === null || value.trim() === "") return undefined;
  const v = value.trim();
  if (/^\d+$/.test(v)) return Number(v) * 1000;
  const at = Date.parse(v);
  return Number.isNaN(at) ? undefined : Math.max(0, at - now);
}

/** "HTTP 422 validation_failed: The request is invalid..." from a problem document, else the status. */
function describeFailure(status: number, text: string): string {
  try {
    const p = JSON.parse(text) as { code?: unknown; detail?: unknown };
    const parts = [`HTTP ${status}`, typeof p.code === "string" ? p.code : undefined].filter(Boolean).join(" ");
    return typeof p.detail === "string" ? `${parts}: ${p.detail.slice(0, 300)}` : parts;
  } catch {
    return `HTTP ${status}`;
  }
}

function networkError(err: unknown): string {
  if (err instanceof Error) {
    if (err.name === "TimeoutError") return "the request timed out";
    const cause = (err as { cause?: { code?: unknown; message?: unknown } }).cause;
    const code = typeof cause?.code === "string" ? cause.code : undefined;
    return `network error: ${code ?? (typeof cause?.message === "string" ? cause.message : err.message)}`;
  }
  return `network error: ${String(err)}`;
}

export class HttpTransport implements TraceTransport {
  readonly #connection: GovdbConnection;
  readonly #fetch: typeof fetch;
  readonly #timeoutMs: number;
  readonly #userAgent: string;

  constructor(opts: HttpTransportOptions) {
    this.#connection = opts.connection;
    this.#fetch = opts.fetch ?? globalThis.fetch;
    this.#timeoutMs = opts.timeoutMs ?? 10_000;
    this.#userAgent = opts.userAgent ?? "berth-toolkit";
  }

  #headers(body: boolean): Record<string, string> {
    const h: Record<string, string> = {
      Authorization: `Bearer ${this.#connection.key}`,
      Accept: "application/json",
      "User-Agent": this.#userAgent,
    };
    if (body) h["Content-Type"] = "application/json";
    return h;
  }

  #signal(signal?: AbortSignal): AbortSignal {
    const timeout = AbortSignal.timeout(this.#timeoutMs);
    return signal ? AbortSignal.any([signal, timeout]) : timeout;
  }

  /**
   * One request to `path` under /api/v1/governance with the key, and its answer's text; or, when no
   * answer came (network error, timeout), why, as networkError says it.
   */
  async #exchange(
    path: string,
    body: string | undefined,
    signal: AbortSignal | undefined,
  ): Promise<{ res: Response; text: string; error?: undefined } | { error: string }> {
    try {
      const res = await this.#fetch(`${this.#connection.baseUrl}/api/v1/governance/${path}`, {
        ...(body === undefined ? {} : { method: "POST", body }),
        headers: this.#headers(body !== undefined),
        signal: this.#signal(signal),
      });
      return { res, text: await res.text() };
    } catch (err) {
      return { error: networkError(err) };
    }
  }

  async send(body: string, _count: number, signal: AbortSignal): Promise<SendOutcome> {
    const answer = await this.#exchange("traces", body, signal);
    if (answer.error !== undefined) return { kind: "retry", error: answer.error };
    const { res, text } = answer;
    if (res.ok) {
      try {
        const parsed = JSON.parse(text) as {
          results?: { traceId?: unknown; status?: unknown; errors?: { field?: unknown; message?: unknown }[] }[];
        };
        const results: ItemResult[] = [];
        for (const r of parsed.results ?? []) {
          if (typeof r.traceId !== "string" || (r.status !== "created" && r.status !== "duplicate" && r.status !== "rejected")) continue;
          const item: ItemResult = { traceId: r.traceId, status: r.status };
          if (r.errors?.length) item.reason = r.errors.map((e) => `${String(e.field)}: ${String(e.message)}`).join(", ");
          results.push(item);
        }
        return { kind: "accepted", results };
      } catch {
        // a 2xx we cannot read: the API took the batch
        return { kind: "accepted", results: [] };
      }
    }
    const error = describeFailure(res.status, text);
    if (RETRYABLE(res.status)) {
      const retryAfterMs = parseRetryAfter(res.headers.get("retry-after"));
      return { kind: "retry", error, status: res.status, ...(retryAfterMs !== undefined ? { retryAfterMs } : {}) };
    }
    if (res.status === 413) return { kind: "too_large", error };
    return { kind: "rejected", error, status: res.status };
  }

  /**
   * The classifier's scores of a prompt, from the API's model (POST /api/v1/governance/guard-check,
   * phase input): the prompt-injection score and, when a toxicity template with classifier had a
   * say, the toxicity score; undefined when the API's guards did not need the model (its patterns
   * blocked, or its config turns the classifier off). Throws with the reason when the API does not
   * answer a score: the caller decides what an unscored prompt means.
   */
  async classifierScore(text: string, signal?: AbortSignal): Promise<HeadScores | undefined> {
    const answer = await this.#exchange("guard-check", JSON.stringify({ phase: "input", text }), signal);
    if (answer.error !== undefined) throw new Error(`the guard check failed: ${answer.error}`);
    const { res, text: body } = answer;
    if (!res.ok) throw new Error(`the guard check failed: ${describeFailure(res.status, body)}`);
    let parsed: { classifierScore?: unknown; classifierScores?: { promptInjection?: unknown; toxicity?: unknown } };
    try {
      parsed = JSON.parse(body) as typeof parsed;
    } catch {
      parsed = { classifierScore: NaN };
    }
    const score = (v: unknown): number | undefined => {
      if (v === undefined) return undefined;
      if (typeof v !== "number" || !(v >= 0 && v <= 1))
        throw new Error(`the guard check's answer (HTTP ${res.status}) has no classifier score`);
      return v;
    };
    const promptInjection = score(parsed.classifierScore);
    const toxicity = score(parsed.classifierScores?.toxicity);
    if (promptInjection === undefined && toxicity === undefined) return undefined;
    return { ...(promptInjection === undefined ? {} : { promptInjection }), ...(toxicity === undefined ? {} : { toxicity }) };
  }

  /** GET /api/v1/governance/config. Never throws. */
  async config(signal?: AbortSignal): Promise<ConfigOutcome> {
    const answer = await this.#exchange("config", undefined, signal);
    if (answer.error !== undefined) return { ok: false, error: answer.error, retryable: true };
    const { res, text } = answer;
    if (!res.ok) {
      const retryAfterMs = parseRetryAfter(res.headers.get("retry-after"));
      return {
        ok: false,
        error: describeFailure(res.status, text),
        status: res.status,
        retryable: RETRYABLE(res.status),
        ...(retryAfterMs !== undefined ? { retryAfterMs } : {}),
      };
    }
    try {
      const body = JSON.parse(text) as Partial<ToolkitConfig>;
      if (typeof body.project !== "string" || typeof body.engine !== "object" || body.engine === null)
        throw new Error("not a toolkit config");
      return { ok: true, config: { project: body.project, observability: body.observability ?? {}, engine: body.engine } };
    } catch {
      return { ok: false, error: `HTTP ${res.status}: the answer is not a governance config`, status: res.status, retryable: false };
    }
  }
}
