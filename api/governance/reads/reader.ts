// Reads of one app's store (traces, evals, guard blocks, audit verification, last eval time), each
// in a read-only transaction under the app's role.
import type { z } from "zod";
import type { Client, GovernanceDb } from "../stores/db.ts";
import { isoSql } from "../stores/db.ts";
import { ChainVerifier, type ChainVerification, type StoredEntry } from "../audit.ts";
import { ident } from "../stores/names.ts";
import type { Eval, GuardBlock, TraceDetail, TraceList, TraceListItem } from "../schemas.ts";

export interface StoreRef {
  schema: string;
  role: string;
}

type Row = Record<string, unknown>;
const GUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

const LIST_COLUMNS = `trace_id, session_id, model, prompt_tokens, completion_tokens, total_tokens, latency_ms, guard_blocked, eval_score, ${isoSql("created_at")} as created_at`;

function listItem(r: Row): z.input<typeof TraceListItem> {
  return {
    traceId: r.trace_id as string,
    sessionId: (r.session_id as string | null) ?? null,
    model: r.model as string,
    promptTokens: r.prompt_tokens as number,
    completionTokens: r.completion_tokens as number,
    totalTokens: r.total_tokens as number,
    latencyMs: r.latency_ms as number,
    guardBlocked: r.guard_blocked as boolean,
    evalScore: r.eval_score as number,
    createdAt: r.created_at as string,
  };
}

export class StoreReader {
  readonly #db: GovernanceDb;

  constructor(db: GovernanceDb) {
    this.#db = db;
  }

  async traces(
    store: StoreRef,
    appId: string,
    q: { limit: number; offset: number; project?: string | undefined; session_id?: string | undefined },
  ): Promise<z.input<typeof TraceList>> {
    // the store holds one project's traces: another project filter matches nothing
    if (q.project !== undefined && q.project !== appId) return { data: [], total: 0, limit: q.limit, offset: q.offset };
    const s = ident(store.schema);
    const where = q.session_id !== undefined ? "where session_id = $1" : "";
    const args: unknown[] = q.session_id !== undefined ? [q.session_id] : [];
    return this.#db.appTx(
      store.role,
      async (c) => {
        const total = await c.query<{ n: string }>(`select count(*) as n from ${s}.traces ${where}`, args);
        const page = await c.query(
          `select ${LIST_COLUMNS} from ${s}.traces ${where} order by created_at desc, trace_id desc limit ${q.limit} offset ${q.offset}`,
          args,
        );
        return { data: page.rows.map(listItem), total: Number(total.rows[0]!.n), limit: q.limit, offset: q.offset };
      },
      { readOnly: true, repeatableRead: true },
    );
  }

  async trace(store: StoreRef, traceId: string): Promise<z.input<typeof TraceDetail> | undefined> {
    if (!GUID.test(traceId)) return undefined;
    const s = ident(store.schema);
    return this.#db.appTx(
      store.role,
      async (c) => {
        const { rows } = await c.query(
          `select ${LIST_COLUMNS}, prompt, response, guard_evaluations, error, metadata, cost_usd, priced, price_version, ${isoSql("ingested_at")} as ingested_at
           from ${s}.traces where trace_id = $1`,
          [traceId],
        );
        const r = rows[0] as Row | undefined;
        if (!r) return undefined;
        return {
          ...listItem(r),
          prompt: r.prompt as string,
          response: r.response as string,
          guardEvaluations: r.guard_evaluations as z.input<typeof TraceDetail>["guardEvaluations"],
          error: (r.error as string | null) ?? null,
          metadata: (r.metadata as z.input<typeof TraceDetail>["metadata"]) ?? null,
          costUsd: r.cost_usd as number,
          costKnown: r.priced as boolean,
          priceTableVersion: r.price_version as string,
          ingestedAt: r.ingested_at as string,
        };
      },
      { readOnly: true },
    );
  }

  async evals(store: StoreRef, q: { limit: number; offset: number; trace_id?: string | undefined }): Promise<z.input<typeof Eval>[]> {
    return this.#page(
      store,
      "evals",
      "id, trace_id, eval_type, score, passed, details",
      { column: "trace_id", value: q.trace_id?.toLowerCase() },
      q,
      (r) => ({
        id: r.id as string,
        traceId: r.trace_id as string,
        evalType: r.eval_type as z.input<typeof Eval>["evalType"],
        score: r.score as number,
        passed: r.passed as boolean,
        details: r.details as string,
        createdAt: r.created_at as string,
      }),
    );
  }

  async guardBlocks(
    store: StoreRef,
    q: { limit: number; offset: number; guard_type?: string | undefined },
  ): Promise<z.input<typeof GuardBlock>[]> {
    return this.#page(
      store,
      "guard_blocks",
      "id, trace_id, guard_type, blocked_content, confidence, action, phase, source",
      { column: "guard_type", value: q.guard_type },
      q,
      (r) => ({
        id: r.id as string,
        traceId: r.trace_id as string,
        guardType: r.guard_type as z.input<typeof GuardBlock>["guardType"],
        blockedContent: r.blocked_content as string,
        confidence: r.confidence as number,
        action: r.action as "block" | "redact",
        phase: r.phase as "input" | "output",
        source: r.source as string,
        createdAt: r.created_at as string,
      }),
    );
  }

  /** A page of a store table's rows of one trace's scoring (evals, guard blocks), newest first, optionally filtered on one column. */
  async #page<T>(
    store: StoreRef,
    table: "evals" | "guard_blocks",
    columns: string,
    filter: { column: string; value: string | undefined },
    q: { limit: number; offset: number },
    map: (r: Row) => T,
  ): Promise<T[]> {
    const where = filter.value !== undefined ? `where ${filter.column} = $1` : "";
    return this.#db.appTx(
      store.role,
      async (c) => {
        const { rows } = await c.query(
          `select ${columns}, ${isoSql("created_at")} as created_at from ${ident(store.schema)}.${table} ${where}
          order by created_at desc, trace_id, ordinal limit ${q.limit} offset ${q.offset}`,
          filter.value !== undefined ? [filter.value] : [],
        );
        return rows.map(map);
      },
      { readOnly: true },
    );
  }

  async verifyAudit(store: StoreRef, onPage?: (rows: number, bytes: number) => void): Promise<ChainVerification> {
    return this.#db.appTx(store.role, (c) => verifyChain(c, store.schema, onPage), { readOnly: true, repeatableRead: true });
  }

  async lastEvalAt(store: StoreRef): Promise<string | null> {
    const s = ident(store.schema);
    return this.#db.appTx(
      store.role,
      async (c) => {
        const { rows } = await c.query<{ at: string | null }>(`select ${isoSql("max(created_at)")} as at from ${s}.evals`);
        return rows[0]?.at ?? null;
      },
      { readOnly: true },
    );
  }
}

/** A page of the chain holds about this many bytes of entries (prompts and responses) at most. */
export const AUDIT_PAGE_BYTES = 8 * 1024 * 1024;
const AUDIT_PAGE_MAX_ROWS = 1000;
const AUDIT_FIRST_PAGE_ROWS = 4;

/**
 * Reads one app's chain in order, page by page, inside the caller's (read-only) transaction, in
 * bounded memory: entries may carry a prompt and a response of up to the ingestion body limit
 * (1 MiB) each, so a page's length follows the size of the entries read so far, to hold about
 * AUDIT_PAGE_BYTES (a first page of 4 entries, then budget / the average entry, 1 to 1000).
 * `onPage` sees each page's length and bytes (tests).
 */
async function verifyChain(client: Client, schema: string, onPage?: (rows: number, bytes: number) => void): Promise<ChainVerification> {
  const {
    rows: [head],
  } = await client.query<{ sequence: string; hash: string }>(`select sequence, hash from ${ident(schema)}.audit_head`);
  const v = new ChainVerifier(head ? { sequence: Number(head.sequence), hash: head.hash } : null);
  let after = 0;
  let limit = AUDIT_FIRST_PAGE_ROWS;
  let seenRows = 0,
    seenBytes = 0;
  for (;;) {
    const { rows } = await client.query<{
      sequence: string;
      trace_id: string;
      workspace_id: string;
      app_id: string;
      model: string;
      prompt: string;
      response: string;
      guard_decision: unknown;
      called_at: string;
      recorded_at: string;
      prev_hash: string;
      hash: string;
    }>(
      `select sequence, trace_id, workspace_id, app_id, model, prompt, response, guard_decision,
              ${isoSql("called_at")} as called_at, ${isoSql("recorded_at")} as recorded_at, prev_hash, hash
         from ${ident(schema)}.audit_log where sequence > $1 order by sequence limit ${limit}`,
      [after],
    );
    let bytes = 0;
    for (const r of rows) {
      bytes += r.prompt.length + r.response.length + 512;
      const e: StoredEntry = {
        sequence: Number(r.sequence),
        traceId: r.trace_id,
        workspaceId: r.workspace_id,
        appId: r.app_id,
        model: r.model,
        prompt: r.prompt,
        response: r.response,
        guardDecision: r.guard_decision,
        calledAt: r.called_at,
        recordedAt: r.recorded_at,
        prevHash: r.prev_hash,
        hash: r.hash,
      };
      v.push(e);
    }
    onPage?.(rows.length, bytes);
    if (rows.length < limit) break;
    after = Number(rows[rows.length - 1]!.sequence);
    seenRows += rows.length;
    seenBytes += bytes;
    limit = Math.max(1, Math.min(AUDIT_PAGE_MAX_ROWS, Math.floor(AUDIT_PAGE_BYTES / Math.max(1, seenBytes / seenRows))));
  }
  return v.result();
}
