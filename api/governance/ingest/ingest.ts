// Trace ingestion (POST /governance/traces, auth "app-key"). For each valid trace, outside any
// transaction: the app's guard engine (compiled once per config version) on the prompt (phase
// input) and the response (phase output) and the evals given those decisions (scoring.ts, in
// worker threads or in-process), the cost from the price table. Then ONE transaction under the
// app's role: one statement inserts the traces (unnest arrays, ON CONFLICT (trace_id) DO NOTHING,
// so a retried trace is never stored twice) in trace-id order, and the evals and guard blocks of
// the traces actually created; then the app's audit lock is taken (held to commit, so the chain
// stays linear under concurrent batches), the chain's head read, and the created traces' audit
// entries chained in batch order and appended. Only the append is serialized per app: concurrent
// batches of one app insert their traces side by side.
//
// What is stored: the trace exactly as the client sent it (prompt and response included, even when
// a guard redacted or blocked them: the client applies the decision in its request path; the trace
// is the record of what happened). The guard evaluations record every verdict, guard blocks record
// every block and redaction (blockedContent is the engine's description, never the matched text).
// A trace whose scoring passed its deadline (scoring.ts WorkerPoolScorer) is stored all the same,
// each guard of the chain recorded with result "error" and the error (scoring.ts unscored).
import { binaryArray } from "../../db/binary-arrays.ts";
import { StatementParams } from "../../db/unnest.ts";
import type { AppPrincipal } from "../../http/route.ts";
import type { Logger } from "../../../kube/logger.ts";
import { entryHash, GENESIS_HASH, type AuditContent } from "../audit.ts";
import type pg from "pg";
import type { Client, GovernanceDb } from "../stores/db.ts";
import { identLiteral, LOCK_CLASS } from "../stores/names.ts";
import { activeStore, assertKeyProject, type EngineInputs, type KeyStore } from "./app-scope.ts";
import { carriesScores, ClassifierUnavailableError, type ScoreResult, type Scorer } from "./scoring.ts";
import { classifierUnavailable, classifierUseOf, runsOf, type ModelRuns } from "./model-runs.ts";
import type { PriceTable } from "./pricing.ts";
import type { IngestRequest, TraceInput } from "../schemas.ts";

export interface ItemResult {
  traceId: string | null;
  status: "created" | "duplicate" | "rejected";
  guardBlocked: boolean | null;
  evalScore: number | null;
  /** a created trace that the guards could not score (its scoring passed its deadline): why */
  guardError?: string;
  errors?: { field: string; message: string }[];
}

export interface IngestOutcome {
  batch: boolean;
  results: ItemResult[];
  created: number;
  duplicates: number;
  rejected: number;
}

/** A trace with everything computed for it. */
interface Scored extends ScoreResult {
  trace: TraceInput;
  /** the trace's timestamp in Unix milliseconds */
  calledAtMs: number;
  costUsd: number;
  priced: boolean;
}

export interface IngestionDeps {
  db: GovernanceDb;
  /** the engine input of the app's config at the version its key check read (shared with guard checks) */
  engines: EngineInputs;
  scorer: Scorer;
  prices: PriceTable;
  /** the app's classifier runs (one per trace without a score, under classifier_on_ingestion); no limit when absent */
  modelRuns?: ModelRuns;
  log: Logger;
  now?: () => Date;
}

// The statements of a write, prepared once per connection (named): their text names no schema, the
// transaction's search_path (the app's schema, then pg_catalog, then pg_temp) resolves the tables,
// and PostgreSQL re-plans a prepared statement by itself when the search_path differs from the
// last use. So one statement serves every app's store, and a busy app's batches skip the parse and
// plan of these statements entirely.

/** The rows of one write: the traces (in trace-id order) and their evals and guard blocks, column by column. */
interface WriteRows {
  traces: readonly Scored[];
  evals: {
    traceId: string[];
    type: string[];
    score: number[];
    passed: boolean[];
    details: string[];
    ordinal: number[];
    calledAt: number[];
  };
  blocks: {
    traceId: string[];
    guardType: string[];
    content: string[];
    confidence: number[];
    action: string[];
    phase: string[];
    source: string[];
    ordinal: number[];
  };
  priceVersion: string;
  /** ISO 8601: the traces' ingested_at, the evals' and guard blocks' created_at */
  now: string;
}

const write = new StatementParams<WriteRows>();
const writeNow = write.param((w) => w.now);
const TRACE_ROWS = write.insert("traces", [
  { column: "trace_id", type: "uuid", values: (w) => w.traces.map((i) => i.trace.traceId) },
  { column: "session_id", type: "text", values: (w) => w.traces.map((i) => i.trace.sessionId) },
  { column: "model", type: "text", values: (w) => w.traces.map((i) => i.trace.model) },
  { column: "prompt", type: "text", values: (w) => w.traces.map((i) => i.trace.input) },
  { column: "response", type: "text", values: (w) => w.traces.map((i) => i.trace.output) },
  { column: "error", type: "text", values: (w) => w.traces.map((i) => i.trace.error) },
  { column: "prompt_tokens", type: "int4", values: (w) => w.traces.map((i) => i.trace.tokens.prompt) },
  { column: "completion_tokens", type: "int4", values: (w) => w.traces.map((i) => i.trace.tokens.completion) },
  { column: "total_tokens", type: "int4", values: (w) => w.traces.map((i) => i.trace.tokens.total) },
  { column: "latency_ms", type: "float8", values: (w) => w.traces.map((i) => i.trace.latency) },
  {
    column: "metadata",
    type: "jsonb",
    values: (w) => w.traces.map((i) => (i.trace.metadata === undefined ? null : JSON.stringify(i.trace.metadata))),
  },
  { column: "guard_blocked", type: "bool", values: (w) => w.traces.map((i) => i.guardBlocked) },
  { column: "guard_evaluations", type: "jsonb", values: (w) => w.traces.map((i) => i.evaluationsJson) },
  { column: "eval_score", type: "float8", values: (w) => w.traces.map((i) => i.evalScore) },
  { column: "cost_usd", type: "float8", values: (w) => w.traces.map((i) => i.costUsd) },
  { column: "priced", type: "bool", values: (w) => w.traces.map((i) => i.priced) },
  { column: "price_version", param: write.param((w) => w.priceVersion) },
  { column: "created_at", type: "timestamptz", values: (w) => w.traces.map((i) => i.calledAtMs) },
  { column: "ingested_at", param: writeNow },
]);
const EVAL_ROWS = write.insert("evals", [
  { column: "trace_id", type: "uuid", values: (w) => w.evals.traceId },
  { column: "eval_type", type: "text", values: (w) => w.evals.type },
  { column: "score", type: "float8", values: (w) => w.evals.score },
  { column: "passed", type: "bool", values: (w) => w.evals.passed },
  { column: "details", type: "text", values: (w) => w.evals.details },
  { column: "ordinal", type: "int2", values: (w) => w.evals.ordinal },
  { column: "created_at", param: writeNow },
  { column: "called_at", type: "timestamptz", values: (w) => w.evals.calledAt },
]);
const BLOCK_ROWS = write.insert("guard_blocks", [
  { column: "trace_id", type: "uuid", values: (w) => w.blocks.traceId },
  { column: "guard_type", type: "text", values: (w) => w.blocks.guardType },
  { column: "blocked_content", type: "text", values: (w) => w.blocks.content },
  { column: "confidence", type: "float8", values: (w) => w.blocks.confidence },
  { column: "action", type: "text", values: (w) => w.blocks.action },
  { column: "phase", type: "text", values: (w) => w.blocks.phase },
  { column: "source", type: "text", values: (w) => w.blocks.source },
  { column: "ordinal", type: "int2", values: (w) => w.blocks.ordinal },
  { column: "created_at", param: writeNow },
]);

/**
 * Traces, evals and guard blocks in ONE statement (one round trip): data-modifying CTEs, the evals
 * and blocks inserted only for the traces the insert returned (a duplicate's are dropped in the
 * database). Evals carry their trace's call time for the eval rollup. Parameters: write.values().
 */
const WRITE = {
  name: "berth_ingest_write",
  text: `
    with ins as (
      ${TRACE_ROWS}
      on conflict (trace_id) do nothing
      returning trace_id),
    ev as (
      ${EVAL_ROWS}
       where u.trace_id in (select trace_id from ins)),
    gb as (
      ${BLOCK_ROWS}
       where u.trace_id in (select trace_id from ins))
    select trace_id from ins`,
};
/** What a duplicate was stored with. */
const STORED = {
  name: "berth_ingest_stored",
  text: "select trace_id, guard_blocked, eval_score from traces where trace_id = any($1::uuid[])",
};

/** The audit entries of created traces, in batch order, chained by #chain under the audit lock. */
interface AuditRows {
  entries: readonly Scored[];
  sequences: number[];
  prevHashes: string[];
  hashes: string[];
  workspaceId: string;
  appId: string;
  /** ISO 8601 */
  recordedAt: string;
}

const append = new StatementParams<AuditRows>();
const AUDIT_ROWS = append.unnest("u", [
  { column: "sequence", type: "int8", values: (a) => a.sequences },
  { column: "trace_id", type: "uuid", values: (a) => a.entries.map((i) => i.trace.traceId) },
  { column: "guard_decision", type: "jsonb", values: (a) => a.entries.map((i) => i.decisionJson) },
  { column: "prev_hash", type: "text", values: (a) => a.prevHashes },
  { column: "hash", type: "text", values: (a) => a.hashes },
]);
/** The audit entries of the created traces: prompt, response, model and call time from the trace rows just inserted. Parameters: append.values(). */
const APPEND = {
  name: "berth_ingest_append",
  text: `
    insert into audit_log (sequence, trace_id, workspace_id, app_id, model, prompt, response, guard_decision, called_at, recorded_at, prev_hash, hash)
    select u.sequence, t.trace_id, ${append.param((a) => a.workspaceId)}, ${append.param((a) => a.appId)}, t.model, t.prompt, t.response, u.guard_decision,
           t.created_at, ${append.param((a) => a.recordedAt)}, u.prev_hash, u.hash
      from ${AUDIT_ROWS}
      join traces t on t.trace_id = u.trace_id`,
};

export class IngestionService {
  readonly #d: IngestionDeps;
  readonly #now: () => Date;

  constructor(deps: IngestionDeps) {
    this.#d = deps;
    this.#now = deps.now ?? (() => new Date());
  }

  async ingest(app: AppPrincipal, req: IngestRequest): Promise<IngestOutcome> {
    assertKeyProject(app, req.projects, "a trace", "Traces go to the key's own project only.");
    const store = activeStore(app);

    // score every distinct valid trace (CPU, outside the transaction)
    const distinct = new Map<string, TraceInput>();
    for (const item of req.items) if (item.ok && !distinct.has(item.trace.traceId)) distinct.set(item.trace.traceId, item.trace);
    const traces = [...distinct.values()];
    // only what scoring reads crosses to the scoring threads (a structured clone per task)
    const inputs = traces.map((x) => ({
      input: x.input,
      output: x.output,
      latency: x.latency,
      model: x.model,
      classifierScore: x.classifierScores?.promptInjection,
      toxicityScore: x.classifierScores?.toxicity,
    }));
    let scores: ScoreResult[] = [];
    if (traces.length > 0) {
      const engine = await this.#d.engines.of(app, store.version);
      // the model on traces without the request path's score: spent before any runs (429 past the budget)
      if (classifierUseOf(engine).ingestion)
        this.#d.modelRuns?.spend(app, runsOf(inputs.filter((x) => !carriesScores(x)).map((x) => x.input)));
      scores = await this.#d.scorer.score(store.version, engine, inputs).catch((err: unknown) => {
        throw err instanceof ClassifierUnavailableError ? classifierUnavailable(err, app, this.#d.log, "ingestion") : err;
      });
    }
    const unscored = scores.filter((s) => s.guardError !== undefined).length;
    if (unscored > 0)
      // stored all the same (with the guards' error): the batch is not lost, and the queue moves on
      this.#d.log.warn(
        { workspaceId: app.workspaceId, appId: app.appId, traces: unscored, error: scores.find((s) => s.guardError)!.guardError },
        "traces stored without guard verdicts: their scoring passed its deadline",
      );
    const scored = new Map<string, Scored>();
    traces.forEach((trace, k) => {
      const s = scores[k]!;
      const cost = this.#d.prices.cost(trace.model, trace.tokens.prompt, trace.tokens.completion);
      scored.set(trace.traceId, { trace, ...s, calledAtMs: Date.parse(trace.timestamp), costUsd: cost.costUsd, priced: cost.priced });
    });

    const { created, existing } =
      scored.size === 0
        ? { created: new Set<string>(), existing: new Map<string, { guardBlocked: boolean; evalScore: number }>() }
        : await this.#d.db.appTx(store.role, (c) => this.#write(c, app, store, [...scored.values()]), { searchPath: store.schema });

    const results: ItemResult[] = [];
    const answered = new Set<string>();
    for (const item of req.items) {
      if (!item.ok) {
        results.push({ traceId: item.traceId, status: "rejected", guardBlocked: null, evalScore: null, errors: item.errors });
        continue;
      }
      const id = item.trace.traceId;
      const s = scored.get(id)!;
      if (created.has(id) && !answered.has(id))
        results.push({
          traceId: id,
          status: "created",
          guardBlocked: s.guardBlocked,
          evalScore: s.evalScore,
          ...(s.guardError === undefined ? {} : { guardError: s.guardError }),
        });
      else {
        const stored = existing.get(id) ?? { guardBlocked: s.guardBlocked, evalScore: s.evalScore };
        results.push({ traceId: id, status: "duplicate", ...stored });
      }
      answered.add(id);
    }
    const count = (st: ItemResult["status"]) => results.filter((r) => r.status === st).length;
    const outcome = { batch: req.batch, results, created: count("created"), duplicates: count("duplicate"), rejected: count("rejected") };
    this.#d.log.debug(
      {
        workspaceId: app.workspaceId,
        appId: app.appId,
        created: outcome.created,
        duplicates: outcome.duplicates,
        rejected: outcome.rejected,
      },
      "traces ingested",
    );
    return outcome;
  }

  async #write(
    c: Client,
    app: AppPrincipal,
    store: KeyStore,
    items: Scored[],
  ): Promise<{ created: Set<string>; existing: Map<string, { guardBlocked: boolean; evalScore: number }> }> {
    const nowIso = this.#now().toISOString();
    // Trace ids in one order in every transaction: two batches that share traces (a retry racing
    // the original) wait on each other's rows in that order, never in a cycle. Every lock a write
    // takes comes in one order: trace rows, the rollup rows of the statement's triggers (in key
    // order), then the audit lock, which is last and held only by the append and the commit.
    const sorted = [...items].sort((x, y) => (x.trace.traceId < y.trace.traceId ? -1 : x.trace.traceId > y.trace.traceId ? 1 : 0));

    // the eval and guard block rows, column by column, in trace order
    const ev: WriteRows["evals"] = { traceId: [], type: [], score: [], passed: [], details: [], ordinal: [], calledAt: [] };
    const gb: WriteRows["blocks"] = {
      traceId: [],
      guardType: [],
      content: [],
      confidence: [],
      action: [],
      phase: [],
      source: [],
      ordinal: [],
    };
    for (const i of sorted) {
      i.evals.forEach((e, ordinal) => {
        ev.traceId.push(i.trace.traceId);
        ev.type.push(e.evalType);
        ev.score.push(e.score);
        ev.passed.push(e.passed);
        ev.details.push(e.details);
        ev.ordinal.push(ordinal);
        ev.calledAt.push(i.calledAtMs);
      });
      let ordinal = 0;
      for (const [phase, list] of [
        ["input", i.blocks.input],
        ["output", i.blocks.output],
      ] as const) {
        for (const b of list) {
          gb.traceId.push(i.trace.traceId);
          gb.guardType.push(b.guardType);
          gb.content.push(b.blockedContent);
          gb.confidence.push(b.confidence);
          gb.action.push(b.action);
          gb.phase.push(phase);
          gb.source.push(b.source);
          gb.ordinal.push(ordinal++);
        }
      }
    }
    const inserted = await c.query<{ trace_id: string }>({
      ...WRITE,
      values: write.values({ traces: sorted, evals: ev, blocks: gb, priceVersion: this.#d.prices.version, now: nowIso }),
    });
    const created = new Set(inserted.rows.map((r) => r.trace_id));

    const existing = new Map<string, { guardBlocked: boolean; evalScore: number }>();
    const dupes = items.filter((i) => !created.has(i.trace.traceId)).map((i) => i.trace.traceId);
    if (dupes.length > 0) {
      const { rows } = await c.query<{ trace_id: string; guard_blocked: boolean; eval_score: number }>({
        ...STORED,
        values: [binaryArray("uuid", dupes)],
      });
      for (const r of rows) existing.set(r.trace_id, { guardBlocked: r.guard_blocked, evalScore: r.eval_score });
    }
    const fresh = items.filter((i) => created.has(i.trace.traceId));
    if (fresh.length > 0) {
      // in batch order, from the head read under the lock
      const head = await this.#lockChain(c, store);
      await c.query({ ...APPEND, values: append.values(this.#chain(app, fresh, head, nowIso)) });
    }
    return { created, existing };
  }

  /**
   * Takes the app's audit lock (held to the end of the transaction) and reads the chain's head: the
   * recorded head (audit_head, which the append's trigger moves forward), or the last entry if one
   * lies beyond it. Entries deleted from the end behind the API's back thus stay a gap the verifier
   * names, instead of being written over. One message (the simple protocol, no parameters: the lock
   * class is a number, the schema a checked identifier), two statements, so the read takes its
   * snapshot after the lock is granted and sees every entry committed before it.
   */
  async #lockChain(c: Client, store: KeyStore): Promise<{ sequence: number; hash: string }> {
    const results = (await c.query(`select pg_advisory_xact_lock(${LOCK_CLASS.audit}, hashtext(${identLiteral(store.schema)}));
                                   select sequence, hash from (select sequence, hash from audit_head
                                                               union all (select sequence, hash from audit_log order by sequence desc limit 1)) h
                                    order by sequence desc limit 1`)) as unknown as pg.QueryResult<{ sequence: string; hash: string }>[];
    const head = results[1]!.rows[0];
    return head ? { sequence: Number(head.sequence), hash: head.hash } : { sequence: 0, hash: GENESIS_HASH };
  }

  /**
   * The audit entries of `entries` (in that order) after `head`: their sequences, previous hashes
   * and hashes. The hash covers the prompt, response, model and call time the statement takes from
   * the trace rows.
   */
  #chain(app: AppPrincipal, entries: Scored[], head: { sequence: number; hash: string }, recordedAt: string): AuditRows {
    let sequence = head.sequence;
    let prev = head.hash;
    const sequences: number[] = [];
    const prevHashes: string[] = [];
    const hashes: string[] = [];
    for (const i of entries) {
      sequence++;
      const content: AuditContent = {
        sequence,
        traceId: i.trace.traceId,
        workspaceId: app.workspaceId,
        appId: app.appId,
        model: i.trace.model,
        prompt: i.trace.input,
        response: i.trace.output,
        guardDecision: null,
        calledAt: new Date(i.calledAtMs).toISOString(),
        recordedAt,
      };
      const hash = entryHash(prev, content, i.decisionJson); // decisionJson: canonical JSON (scoring.ts guardDecisionOf)
      sequences.push(sequence);
      prevHashes.push(prev);
      hashes.push(hash);
      prev = hash;
    }
    return { entries, sequences, prevHashes, hashes, workspaceId: app.workspaceId, appId: app.appId, recordedAt };
  }
}
