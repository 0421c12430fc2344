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
// The audit table refuses UPDATE, DELETE and TRUNCATE through triggers that raise, for every role
// including the owner; only a superuser who switches triggers off (session_replication_role =
// replica, or ALTER TABLE ... DISABLE TRIGGER) can change a row, and the hash chain then names it.
import { ident, identLiteral, type StoreNames } from "./names.ts";

/** Tables of a store, in creation order. */
export const STORE_TABLES = ["traces", "evals", "guard_blocks", "audit_log"] as const;

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
       created_at timestamptz not null default now())`,
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
    `grant usage on schema ${s} to ${r}`,
    `grant select, insert on ${STORE_TABLES.map(t).join(", ")} to ${r}`,
  ];
}

/** The statements that remove a store and its role (idempotent). */
export function dropStoreSql(n: StoreNames): string[] {
  return [
    `drop schema if exists ${ident(n.schema)} cascade`,
    `drop role if exists ${ident(n.role)}`,
  ];
}
