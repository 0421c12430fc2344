// The one SQL template of an app's private store (pure). Provisioning runs it at run time (per-app
// DDL is not a committed migration: the set of apps is data), inside the provisioning transaction,
// so a crash half-way leaves nothing behind. Every statement is idempotent (IF NOT EXISTS, OR
// REPLACE, GRANT), so running the template on a complete store changes nothing.
//
// Ownership: the schema and its tables belong to the API's database user; the app's role is a
// NOLOGIN role with USAGE on its own schema and SELECT, INSERT on its tables, nothing else. The API
// user is a member of the role WITH SET TRUE, INHERIT FALSE: it can `SET LOCAL ROLE` to it but does
// not hold its privileges otherwise. All data access for an app runs under that role, so the
// database refuses another app's schema even if API code asked for it.
//
// evals and guard_blocks carry their trace's id without a foreign key: they are only ever written
// in the transaction that creates their trace, and traces are never deleted one by one (the store
// is dropped as a whole), so the constraint would guard nothing and cost a lookup per row.
//
// Rollups (analytics, docs/analytics.md): traces_hourly and evals_hourly hold per-hour sums of the
// traces (and of their evals) by call time, maintained by statement-level AFTER INSERT triggers
// over the transition table, so every insert keeps them exact, whoever makes it (ingestion, a
// test seeding rows, a restore), in the inserting transaction. The analytics read whole hours
// from the rollups and only the partial hours at a range's edges from the traces. A row is keyed
// by (hour, shard), shard = the backend's pid mod ROLLUP_SHARDS: concurrent ingestion
// transactions, which hold their rollup rows until commit, mostly update different rows instead of
// queueing behind one another; rows are upserted in key order, so two of them never deadlock. The
// trigger functions are SECURITY DEFINER (owned by the API's user, search_path pinned): the app's
// role only ever gets SELECT on the rollups, never UPDATE.
//
// The audit table refuses UPDATE, DELETE and TRUNCATE through triggers that raise, for every role
// including the owner; only whoever may switch the triggers off can change a row: the owner (the
// API's user: ALTER TABLE ... DISABLE TRIGGER) or a superuser (also session_replication_role =
// replica). The hash chain then names the row (api/governance/audit.ts).
import { ident, identLiteral, type StoreNames } from "./names.ts";

/** Tables of a store, in creation order. */
export const STORE_TABLES = ["traces", "evals", "guard_blocks", "audit_log"] as const;
/** The rollup tables (read-only for the app's role). */
export const ROLLUP_TABLES = ["traces_hourly", "evals_hourly"] as const;

/**
 * The version of this template. A store records the version it was made (or last completed) with
 * (governance_projects.store_version); the API completes older stores at start
 * (ProvisioningService.upgradeStores). 1: tables and audit trail; 2: hourly rollups; 3: evals carry
 * their trace's call time (called_at), so the eval rollup needs no look-up of the trace; 4: the audit
 * chain's recorded head (audit_head).
 */
export const STORE_TEMPLATE_VERSION = 4;

/** Rollup hours are aligned to this instant (a Monday, midnight UTC), which is also the origin of the analytics timeseries buckets. */
export const ROLLUP_ORIGIN = "2000-01-03T00:00:00Z";
/** Rows per hour of a rollup, one per group of ingesting connections. */
export const ROLLUP_SHARDS = 4;
/** Equal-width score buckets over [0, 1] of evals_hourly (the eval distribution's buckets). */
export const ROLLUP_SCORE_BUCKETS = 10;

/** The statements that create (or complete) a store. `pgVersion` is server_version_num. */
export function storeDdl(n: StoreNames, pgVersion: number): string[] {
  const s = ident(n.schema);
  const r = ident(n.role);
  const t = (table: string) => `${s}.${ident(table)}`;
  const membership = pgVersion >= 160000 ? `grant ${r} to current_user with inherit false, set true` : `grant ${r} to current_user`;
  // time-ordered ids (PostgreSQL 18) keep the primary-key indexes append-only
  const newId = pgVersion >= 180000 ? "uuidv7()" : "gen_random_uuid()";
  return [
    `do $$ begin
       if not exists (select from pg_catalog.pg_roles where rolname = ${identLiteral(n.role)}) then
         create role ${r} nologin noinherit;
       end if;
     end $$`,
    membership,
    `create schema if not exists ${s} authorization current_user`,
    `revoke all on schema ${s} from public`,
    `create table if not exists ${t("traces")} (
       trace_id uuid primary key,
       session_id text,
       model text not null,
       prompt text not null,
       response text not null,
       error text,
       prompt_tokens integer not null check (prompt_tokens >= 0),
       completion_tokens integer not null check (completion_tokens >= 0),
       total_tokens integer not null check (total_tokens >= 0),
       latency_ms double precision not null check (latency_ms >= 0),
       metadata jsonb,
       guard_blocked boolean not null,
       guard_evaluations jsonb not null,
       eval_score double precision not null,
       cost_usd double precision not null,
       priced boolean not null,
       price_version text not null,
       created_at timestamptz not null,
       ingested_at timestamptz not null default now())`,
    `create index if not exists traces_created_at_idx on ${t("traces")} (created_at desc, trace_id desc)`,
    `create index if not exists traces_session_idx on ${t("traces")} (session_id, created_at desc, trace_id desc) where session_id is not null`,
    `create table if not exists ${t("evals")} (
       id uuid primary key default ${newId},
       trace_id uuid not null,
       eval_type text not null,
       score double precision not null,
       passed boolean not null,
       details text not null,
       ordinal smallint not null default 0,
       created_at timestamptz not null default now(),
       called_at timestamptz)`,
    // template version 3; null in rows written before it (the rollup then looks the trace up)
    `alter table ${t("evals")} add column if not exists called_at timestamptz`,
    `create index if not exists evals_trace_idx on ${t("evals")} (trace_id)`,
    `create index if not exists evals_created_at_idx on ${t("evals")} (created_at desc, trace_id, ordinal)`,
    `create table if not exists ${t("guard_blocks")} (
       id uuid primary key default ${newId},
       trace_id uuid not null,
       guard_type text not null,
       blocked_content text not null,
       confidence double precision not null,
       action text not null,
       phase text not null,
       source text not null,
       ordinal smallint not null default 0,
       created_at timestamptz not null default now())`,
    `create index if not exists guard_blocks_created_at_idx on ${t("guard_blocks")} (created_at desc, trace_id, ordinal)`,
    `create index if not exists guard_blocks_type_idx on ${t("guard_blocks")} (guard_type, created_at desc, trace_id, ordinal)`,
    `create index if not exists guard_blocks_trace_idx on ${t("guard_blocks")} (trace_id)`,
    ...rollupDdl(s, t),
    `create table if not exists ${t("audit_log")} (
       sequence bigint primary key check (sequence > 0),
       trace_id uuid not null,
       workspace_id text not null,
       app_id text not null,
       model text not null,
       prompt text not null,
       response text not null,
       guard_decision jsonb not null,
       called_at timestamptz not null,
       recorded_at timestamptz not null,
       prev_hash char(64) not null,
       hash char(64) not null)`,
    `create or replace function ${s}.audit_log_append_only() returns trigger language plpgsql as $$
     begin
       raise exception 'the audit trail is append-only: % on %.% is refused', tg_op, tg_table_schema, tg_table_name
         using errcode = 'insufficient_privilege';
     end $$`,
    `revoke all on function ${s}.audit_log_append_only() from public`,
    `create or replace trigger audit_log_no_update_delete before update or delete on ${t("audit_log")}
       for each row execute function ${s}.audit_log_append_only()`,
    `create or replace trigger audit_log_no_truncate before truncate on ${t("audit_log")}
       for each statement execute function ${s}.audit_log_append_only()`,
    // belt and braces: not even the owning API user holds UPDATE, DELETE or TRUNCATE on the trail
    `revoke update, delete, truncate on ${t("audit_log")} from current_user`,
    ...auditHeadDdl(s, t),
    `grant usage on schema ${s} to ${r}`,
    `grant select, insert on ${STORE_TABLES.map(t).join(", ")} to ${r}`,
    `grant select on ${ROLLUP_TABLES.map(t).join(", ")} to ${r}`,
    `grant select on ${t("audit_head")} to ${r}`,
  ];
}

/**
 * The chain's recorded head (template version 4): one row, the sequence and hash of the last entry
 * appended, moved forward by a trigger on every insert into audit_log (SECURITY DEFINER: the app's
 * role only reads it). Ingestion continues the chain from it, and verification compares the chain
 * with it, so entries deleted from the end are a gap that stays, not a shorter chain that verifies.
 * A store made before it gets its head from its last entry.
 */
function auditHeadDdl(s: string, t: (table: string) => string): string[] {
  return [
    `create table if not exists ${t("audit_head")} (
       one boolean primary key default true check (one),
       sequence bigint not null check (sequence > 0),
       hash char(64) not null)`,
    `create or replace function ${s}.audit_head_advance() returns trigger language plpgsql
       security definer set search_path = pg_catalog, pg_temp as $$
     begin
       insert into ${t("audit_head")} as h (one, sequence, hash)
         select true, a.sequence, a.hash from new_rows a order by a.sequence desc limit 1
         on conflict (one) do update set sequence = excluded.sequence, hash = excluded.hash where excluded.sequence > h.sequence;
       return null;
     end $$`,
    `revoke all on function ${s}.audit_head_advance() from public`,
    `create or replace trigger audit_head_advance after insert on ${t("audit_log")} referencing new table as new_rows
       for each statement execute function ${s}.audit_head_advance()`,
    `revoke delete, truncate on ${t("audit_head")} from current_user`,
    `insert into ${t("audit_head")} (one, sequence, hash)
       select true, sequence, hash from ${t("audit_log")} where not exists (select from ${t("audit_head")})
        order by sequence desc limit 1`,
  ];
}

const hourOf = (column: string) => `date_bin('1 hour', ${column}, '${ROLLUP_ORIGIN}'::timestamptz)`;
const scoreBucket = (column: string) =>
  `least(greatest(width_bucket(${column}, 0, 1, ${ROLLUP_SCORE_BUCKETS}), 1), ${ROLLUP_SCORE_BUCKETS})`;

/**
 * The rollup tables, their triggers, and a backfill from the traces (and evals) already stored
 * when the rollup is empty: a store made by template version 1 gets complete rollups on upgrade.
 * The triggers are created before the backfill in the same transaction; CREATE TRIGGER waits for
 * inserts in flight and holds new ones until commit, so no row is counted twice or missed.
 */
function rollupDdl(s: string, t: (table: string) => string): string[] {
  const shard = `(pg_backend_pid() % ${ROLLUP_SHARDS})::int2`;
  const tracesAgg = (from: string, shardExpr: string) => `
         select ${hourOf("created_at")}, ${shardExpr}, count(*), sum(prompt_tokens), sum(completion_tokens), sum(total_tokens), sum(latency_ms), sum(cost_usd),
                count(*) filter (where guard_blocked), count(*) filter (where error is not null)
           from ${from}`;
  // an eval counts at its trace's call time: called_at, or (not given) the trace's created_at; an
  // eval whose trace does not exist is not counted (the analytics join evals to their traces)
  const evalsAgg = (from: string, shardExpr: string) => `
         select ${hourOf("e.at")}, ${shardExpr}, e.eval_type, ${scoreBucket("e.score")}, count(*), sum(e.score), count(*) filter (where e.passed)
           from (select x.eval_type, x.score, x.passed,
                        coalesce(x.called_at, (select t.created_at from ${t("traces")} t where t.trace_id = x.trace_id)) as at
                   from ${from} x) e
          where e.at is not null`;
  const definer = (name: string, body: string) => `create or replace function ${s}.${name}() returns trigger language plpgsql
       security definer set search_path = pg_catalog, pg_temp as $$
     begin
       ${body};
       return null;
     end $$`;
  return [
    `create table if not exists ${t("traces_hourly")} (
       hour timestamptz not null,
       shard smallint not null,
       calls int8 not null,
       prompt_tokens int8 not null,
       completion_tokens int8 not null,
       total_tokens int8 not null,
       latency_sum float8 not null,
       cost_usd float8 not null,
       blocked int8 not null,
       errors int8 not null,
       primary key (hour, shard))`,
    `create table if not exists ${t("evals_hourly")} (
       hour timestamptz not null,
       shard smallint not null,
       eval_type text not null,
       bucket smallint not null,
       n int8 not null,
       score_sum float8 not null,
       passed int8 not null,
       primary key (hour, shard, eval_type, bucket))`,
    definer(
      "traces_rollup",
      `insert into ${t("traces_hourly")} as h (hour, shard, calls, prompt_tokens, completion_tokens, total_tokens, latency_sum, cost_usd, blocked, errors)
       ${tracesAgg("new_rows", shard)}
          group by 1 order by 1
       on conflict (hour, shard) do update
         set calls = h.calls + excluded.calls, prompt_tokens = h.prompt_tokens + excluded.prompt_tokens,
             completion_tokens = h.completion_tokens + excluded.completion_tokens, total_tokens = h.total_tokens + excluded.total_tokens,
             latency_sum = h.latency_sum + excluded.latency_sum, cost_usd = h.cost_usd + excluded.cost_usd,
             blocked = h.blocked + excluded.blocked, errors = h.errors + excluded.errors`,
    ),
    definer(
      "evals_rollup",
      `insert into ${t("evals_hourly")} as h (hour, shard, eval_type, bucket, n, score_sum, passed)
       ${evalsAgg("new_rows", shard)}
          group by 1, 3, 4 order by 1, 3, 4
       on conflict (hour, shard, eval_type, bucket) do update
         set n = h.n + excluded.n, score_sum = h.score_sum + excluded.score_sum, passed = h.passed + excluded.passed`,
    ),
    `revoke all on function ${s}.traces_rollup(), ${s}.evals_rollup() from public`,
    `create or replace trigger traces_rollup after insert on ${t("traces")} referencing new table as new_rows
       for each statement execute function ${s}.traces_rollup()`,
    `create or replace trigger evals_rollup after insert on ${t("evals")} referencing new table as new_rows
       for each statement execute function ${s}.evals_rollup()`,
    `insert into ${t("traces_hourly")} (hour, shard, calls, prompt_tokens, completion_tokens, total_tokens, latency_sum, cost_usd, blocked, errors)
       ${tracesAgg(t("traces"), "0::int2")}
          where not exists (select from ${t("traces_hourly")})
          group by 1`,
    `insert into ${t("evals_hourly")} (hour, shard, eval_type, bucket, n, score_sum, passed)
       ${evalsAgg(t("evals"), "0::int2")}
            and not exists (select from ${t("evals_hourly")})
          group by 1, 3, 4`,
  ];
}

/** The statements that remove a store and its role (idempotent). */
export function dropStoreSql(n: StoreNames): string[] {
  return [`drop schema if exists ${ident(n.schema)} cascade`, `drop role if exists ${ident(n.role)}`];
}
