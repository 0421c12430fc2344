// One-dimensional PostgreSQL arrays in the binary wire format, as query parameters.
//
// node-postgres sends a parameter given as a Buffer in the binary format (its other values as
// text). For the multi-row inserts of ingestion (`unnest($1::uuid[], $2::text[], ...)`) that
// saves work on both sides of the connection: no quoting and escaping of every element into an
// array literal here, no parsing of it (and of each uuid, number and timestamp in it) in the
// server, and fewer bytes on the wire (a uuid is 16 bytes instead of 38).
//
// The format is array_send's: int32 ndim (1, or 0 for an empty array), int32 has-nulls flag,
// int32 element type oid, then per dimension int32 length and int32 lower bound (1), then each
// element as int32 byte length (-1 for NULL) and its binary form (the type's send function):
// uuid 16 bytes; text UTF-8; int2/int4/int8 big-endian integers; float8 big-endian IEEE 754; bool
// one byte; jsonb a version byte (1) and the JSON text; timestamptz int64 microseconds since
// 2000-01-01T00:00:00Z. The parameter's type must be the array type these oids name (a cast in
// the SQL, e.g. `$1::uuid[]`): the server refuses an element type that does not match.

const OID = { bool: 16, int8: 20, int2: 21, int4: 23, text: 25, float8: 701, timestamptz: 1184, uuid: 2950, jsonb: 3802 } as const;
/** The element types an array parameter may have: PostgreSQL type names, also what the SQL casts to (`$1::uuid[]`). */
export type ElementType = keyof typeof OID;

/** PostgreSQL's epoch (2000-01-01T00:00:00Z) in Unix milliseconds. */
const PG_EPOCH_MS = Date.UTC(2000, 0, 1);
const TWO_32 = 2 ** 32;

/** Bytes each element of a fixed-width type takes. */
const FIXED: Partial<Record<ElementType, number>> = { bool: 1, int2: 2, int4: 4, int8: 8, float8: 8, timestamptz: 8, uuid: 16 };

function header(buf: Buffer, type: ElementType, length: number, hasNulls: boolean): number {
  if (length === 0) {
    buf.writeInt32BE(0, 0);
    buf.writeInt32BE(0, 4);
    buf.writeInt32BE(OID[type], 8);
    return 12;
  }
  buf.writeInt32BE(1, 0);
  buf.writeInt32BE(hasNulls ? 1 : 0, 4);
  buf.writeInt32BE(OID[type], 8);
  buf.writeInt32BE(length, 12);
  buf.writeInt32BE(1, 16);
  return 20;
}

function hexValue(c: number): number {
  if (c >= 48 && c <= 57) return c - 48;
  const l = c | 0x20;
  if (l >= 97 && l <= 102) return l - 87;
  return -1;
}

/** Writes the 16 bytes of a canonical uuid string (8-4-4-4-12 hex digits). */
function writeUuid(buf: Buffer, at: number, s: string): void {
  if (s.length !== 36) throw new TypeError(`not a uuid: ${JSON.stringify(s.slice(0, 40))}`);
  let o = at;
  for (let i = 0; i < 36;) {
    if (i === 8 || i === 13 || i === 18 || i === 23) {
      if (s.charCodeAt(i) !== 45) throw new TypeError(`not a uuid: ${JSON.stringify(s)}`);
      i++;
      continue;
    }
    const hi = hexValue(s.charCodeAt(i));
    const lo = hexValue(s.charCodeAt(i + 1));
    if (hi < 0 || lo < 0) throw new TypeError(`not a uuid: ${JSON.stringify(s)}`);
    buf[o++] = (hi << 4) | lo;
    i += 2;
  }
}

function writeFixed(buf: Buffer, at: number, type: ElementType, v: unknown): void {
  switch (type) {
    case "bool":
      buf[at] = v ? 1 : 0;
      return;
    case "int2":
      buf.writeInt16BE(v as number, at);
      return;
    case "int4":
      buf.writeInt32BE(v as number, at);
      return;
    case "int8": {
      const n = v as number;
      if (!Number.isSafeInteger(n)) throw new TypeError(`not a safe integer: ${n}`);
      const hi = Math.floor(n / TWO_32);
      buf.writeInt32BE(hi, at);
      buf.writeUInt32BE(n - hi * TWO_32, at + 4);
      return;
    }
    case "float8":
      buf.writeDoubleBE(v as number, at);
      return;
    case "timestamptz": {
      // Unix milliseconds, an ISO 8601 string or a Date; millisecond precision
      const ms = typeof v === "number" ? v : typeof v === "string" ? Date.parse(v) : (v as Date).getTime();
      if (!Number.isFinite(ms)) throw new TypeError(`not a timestamp: ${String(v)}`);
      const us = (ms - PG_EPOCH_MS) * 1000;
      const hi = Math.floor(us / TWO_32);
      buf.writeInt32BE(hi, at);
      buf.writeUInt32BE(us - hi * TWO_32, at + 4);
      return;
    }
    case "uuid":
      writeUuid(buf, at, v as string);
      return;
    default:
      throw new Error(`${type} is not fixed-width`);
  }
}

// Text and jsonb arrays are written into one scratch buffer, reused from call to call, and copied
// out at their exact size: sized from an upper bound (3 bytes of UTF-8 per UTF-16 unit), a
// buffer of its own would be up to three times too large, and each is memory outside the
// JavaScript heap that V8 counts towards starting a full garbage collection. An array whose bound
// exceeds SCRATCH_MAX gets a buffer of its own instead, so that the scratch buffer stays small.
const SCRATCH_MAX = 4 * 1024 * 1024;
let scratch = Buffer.allocUnsafe(64 * 1024);

/**
 * A one-dimensional array parameter in the binary format. Elements: strings for uuid, text and
 * jsonb (JSON text); numbers for int2, int4, int8 and float8; booleans; Unix milliseconds, ISO
 * 8601 strings or Dates for timestamptz; null (or undefined) for NULL.
 */
export function binaryArray(type: ElementType, values: readonly unknown[]): Buffer {
  const n = values.length;
  let hasNulls = false;
  const width = FIXED[type];
  let size = n === 0 ? 12 : 20;
  if (width !== undefined) {
    for (let i = 0; i < n; i++) {
      if (values[i] == null) {
        hasNulls = true;
        size += 4;
      } else size += 4 + width;
    }
    const buf = Buffer.allocUnsafe(size);
    let at = header(buf, type, n, hasNulls);
    for (let i = 0; i < n; i++) {
      const v = values[i];
      if (v == null) {
        buf.writeInt32BE(-1, at);
        at += 4;
        continue;
      }
      buf.writeInt32BE(width, at);
      // a uuid repeated from the element before (the rows of one trace): its 16 bytes again
      if (type === "uuid" && i > 0 && v === values[i - 1]) buf.copy(buf, at + 4, at - 16, at);
      else writeFixed(buf, at + 4, type, v);
      at += 4 + width;
    }
    return buf;
  }
  // text and jsonb: at most 3 bytes of UTF-8 per UTF-16 code unit (a surrogate pair is 4 bytes for 2 units)
  const extra = type === "jsonb" ? 1 : 0;
  for (let i = 0; i < n; i++) {
    const v = values[i];
    if (v == null) {
      hasNulls = true;
      size += 4;
      continue;
    }
    if (typeof v !== "string") throw new TypeError(`a ${type} element must be a string, not ${typeof v}`);
    size += 4 + extra + v.length * 3;
  }
  const own = size > SCRATCH_MAX;
  if (!own && scratch.length < size) scratch = Buffer.allocUnsafe(Math.min(SCRATCH_MAX, Math.max(size, scratch.length * 2)));
  const buf = own ? Buffer.allocUnsafe(size) : scratch;
  let at = header(buf, type, n, hasNulls);
  for (let i = 0; i < n; i++) {
    const v = values[i] as string | null | undefined;
    if (v == null) {
      buf.writeInt32BE(-1, at);
      at += 4;
      continue;
    }
    const start = at + 4;
    let o = start;
    if (extra) buf[o++] = 1; // jsonb version
    o += buf.write(v, o, "utf8");
    buf.writeInt32BE(o - start, at);
    at = o;
  }
  return own ? buf.subarray(0, at) : Buffer.from(buf.subarray(0, at));
}
