// Raw SQL for the governance module, on the `pg` pool that backs MikroORM (one pool per process).
//
// Why not the EntityManager here: an app's data lives in a schema of its own, created at run time,
// and is read and written inside a transaction that first runs `SET LOCAL ROLE <app role>`. Both
// need one connection held for the whole transaction with statements MikroORM has no entity
// metadata for, and ingestion needs server-side parameters for arbitrary prompt text and multi-row
// inserts (`unnest($1::uuid[], ...)`): MikroORM's `em.execute` interpolates parameters into the SQL
// text on the client. So these paths take a client from the same pool, run parameterised SQL and
// release it. The module's tables in the public schema are reached the same way, each through one
// module (configs/entities.ts lists them), except the guard templates, which go through the
// forked EntityManager of each request.
import { AsyncLocalStorage } from "node:async_hooks";
import type { MikroORM } from "@mikro-orm/postgresql";
import type pg from "pg";
import { ConflictError } from "../../errors.ts";
import { ident } from "./names.ts";

export type Client = pg.PoolClient;

/** Timestamps as ISO 8601 UTC with milliseconds (the pool leaves timestamptz as raw strings). */
export function isoSql(column: string): string {
  return `to_char(${column} at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')`;
}

/**
 * PostgreSQL puts row values into some errors ("Failing row contains (...)" in `detail`): with
 * prompts and responses in those rows, such an error must not reach a log as is.
 */
function scrub(err: unknown): unknown {
  if (err && typeof err === "object") {
    for (const k of ["detail", "where", "internalQuery"])
      if (k in err && (err as Record<string, unknown>)[k] !== undefined) (err as Record<string, unknown>)[k] = "[redacted]";
  }
  return err;
}

/** PostgreSQL errors that mean the app's store or role is gone (a concurrent de-provisioning). */
const STORE_GONE = new Set(["3F000", "42P01", "42704", "22023"]);

/**
 * Set while a transaction's `fn` runs. A transaction that asks the pool for a second connection
 * can deadlock the whole process: with every connection held by such transactions, each waits
 * for a connection that only their own commits would free (seen in a test, with a pool of 5 and
 * 7 concurrent provisionings, when the first server-version look-up went to the pool). pool()
 * refuses inside one, so the mistake fails at once in every test that takes the path.
 */
const inTransaction = new AsyncLocalStorage<true>();

export class GovernanceDb {
  readonly #orm: MikroORM;
  #pool: Promise<pg.Pool> | undefined;
  #version: Promise<number> | undefined;

  constructor(orm: MikroORM) {
    this.#orm = orm;
  }

  /** The pool, for statements outside a transaction; inside one, use its client (see inTransaction). */
  pool(): Promise<pg.Pool> {
    if (inTransaction.getStore())
      return Promise.reject(new Error("a connection from the pool was asked for inside a transaction: use the transaction's client"));
    return (this.#pool ??= this.#orm.em.getConnection().getNativeClient());
  }

  /**
   * server_version_num, e.g. 180004: read once, on the caller's transaction `c` (never on another
   * connection of the pool: see inTransaction). A failed read is not kept: the next call reads again.
   */
  serverVersion(c: Client): Promise<number> {
    if (!this.#version) {
      const version = c.query<{ v: string }>("select current_setting('server_version_num') as v").then((r) => Number(r.rows[0]!.v));
      this.#version = version;
      version.catch(() => {
        if (this.#version === version) this.#version = undefined;
      });
    }
    return this.#version;
  }

  /** Runs `fn` in one transaction on one connection (rolled back when it throws). */
  async tx<T>(fn: (c: Client) => Promise<T>, opts: { begin?: string } = {}): Promise<T> {
    const client = await (await this.pool()).connect();
    let broken: Error | undefined;
    try {
      await client.query(opts.begin ?? "begin");
      try {
        const out = await inTransaction.run(true, () => fn(client));
        await client.query("commit");
        return out;
      } catch (err) {
        await client.query("rollback").catch((e: unknown) => {
          broken = e instanceof Error ? e : new Error(String(e));
        });
        throw scrub(err);
      }
    } finally {
      client.release(broken);
    }
  }

  /**
   * Runs `fn` in a transaction under `SET LOCAL ROLE <role>`: every statement has exactly the
   * privileges of that app's role, so another app's schema is out of reach whatever `fn` asks for.
   * With `searchPath`, unqualified table names resolve in that schema.
   */
  async appTx<T>(
    role: string,
    fn: (c: Client) => Promise<T>,
    opts: { readOnly?: boolean; repeatableRead?: boolean; searchPath?: string } = {},
  ): Promise<T> {
    const mode = [opts.repeatableRead ? "isolation level repeatable read" : "", opts.readOnly ? "read only" : ""].filter(Boolean).join(" ");
    // searchPath: the store's schema, for statements that name its tables without a schema (the
    // prepared statements of ingestion); pg_catalog next and pg_temp last, so that nothing
    // shadows a built-in or a store table
    const path = opts.searchPath === undefined ? "" : `; set local search_path = ${ident(opts.searchPath)}, pg_catalog, pg_temp`;
    try {
      return await this.tx(fn, { begin: `begin ${mode}; set local role ${ident(role)}${path}` });
    } catch (err) {
      const code = pgCode(err);
      if (code && STORE_GONE.has(code)) {
        throw new ConflictError("governance_store_unavailable", "The app's governance store was removed or is being re-created; retry.", {
          cause: err,
        });
      }
      throw err;
    }
  }
}

/** The SQLSTATE of a PostgreSQL error (pg's DatabaseError.code), if it is one. */
export function pgCode(err: unknown): string | undefined {
  const code = (err as { code?: unknown } | null)?.code;
  return typeof code === "string" ? code : undefined;
}
