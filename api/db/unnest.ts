// Multi-row statements over unnest() of binary array parameters (binary-arrays.ts), written from
// column tables: each column's name, element type and values are stated once, and the parameter
// numbers, the casts (`$n::type[]`) and the order of the values all follow from that one entry,
// so they cannot drift apart. The text is built once (a named prepared statement's, say), the
// values per execution from a context of the statement's choosing; building them allocates what
// the values themselves need (an array per column at most) and nothing per row.
import { binaryArray, type ElementType } from "./binary-arrays.ts";

/** A column sent as one array parameter: its name, its element type (also the cast) and its values for one execution. */
export interface ArrayColumn<C> {
  column: string;
  type: ElementType;
  values: (ctx: C) => readonly unknown[];
}

/** A column of an insert whose value is the same for every row: the placeholder of a `param()`. */
export interface ParamColumn {
  column: string;
  param: string;
}

/** The parameters of one statement, numbered in the order they are added while its text is written. */
export class StatementParams<C> {
  readonly #values: ((ctx: C) => unknown)[] = [];

  /** A parameter: its placeholder (`$n`), to be written where the value goes. */
  param(value: (ctx: C) => unknown): string {
    this.#values.push(value);
    return `$${this.#values.length}`;
  }

  /** `unnest($a::t1[], $b::t2[], ...) as alias(c1, c2, ...)`: one binary array parameter per column. */
  unnest(alias: string, columns: readonly ArrayColumn<C>[]): string {
    const arrays = columns.map((c) => `${this.param((ctx) => binaryArray(c.type, c.values(ctx)))}::${c.type}[]`);
    return `unnest(${arrays.join(", ")}) as ${alias}(${columns.map((c) => c.column).join(", ")})`;
  }

  /**
   * `insert into table (c1, c2, ...) select u.c1, $k, ... from unnest(...) as u(...)`: array
   * columns come from the unnest, param columns are their placeholder. The caller may append a
   * where clause on `u` (and on conflict, returning).
   */
  insert(table: string, columns: readonly (ArrayColumn<C> | ParamColumn)[]): string {
    const arrays = columns.filter((c): c is ArrayColumn<C> => "type" in c);
    return `insert into ${table} (${columns.map((c) => c.column).join(", ")})
      select ${columns.map((c) => ("type" in c ? `u.${c.column}` : c.param)).join(", ")}
        from ${this.unnest("u", arrays)}`;
  }

  /** The values of one execution, in parameter order. */
  values(ctx: C): unknown[] {
    return this.#values.map((v) => v(ctx));
  }
}
