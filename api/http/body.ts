// JSON request bodies: application/json only (charset, when given, must be UTF-8), read with
// raw-body under the configured byte limit, strictly UTF-8, parsed with JSON.parse.
import type { IncomingMessage } from "node:http";
import getRawBody, { type RawBodyError } from "raw-body";
import { BadRequestError, DomainError } from "../errors.ts";

export class PayloadTooLargeError extends DomainError {
  constructor(limit: number) {
    super(413, "payload_too_large", `The request body is larger than the limit of ${limit} bytes.`, { details: { limitBytes: limit } });
  }
}

/** 408: the request was not received in BERTH_REQUEST_TIMEOUT_MS (the server cut the connection). */
export class RequestTimeoutError extends DomainError {
  constructor() {
    super(408, "request_timeout", "The request was not received in time; the connection was closed.");
  }
}

export class UnsupportedMediaTypeError extends DomainError {
  constructor(got: string) {
    super(
      415,
      "unsupported_media_type",
      got === ""
        ? "A request body needs 'Content-Type: application/json'."
        : `Content-Type '${got.slice(0, 100)}' is not supported; send 'application/json' (UTF-8).`,
    );
  }
}

/** True when the request announces a body (a non-zero Content-Length or chunked transfer). */
export function hasBody(req: IncomingMessage): boolean {
  if (req.headers["transfer-encoding"] !== undefined) return true;
  const len = req.headers["content-length"];
  return len !== undefined && len !== "0";
}

/** Whether a Content-Type header value is JSON we accept: application/json, charset absent or UTF-8. */
export function isJsonContentType(value: string): boolean {
  const [media, ...params] = value.split(";");
  if (media?.trim().toLowerCase() !== "application/json") return false;
  for (const p of params) {
    const [k, v] = p.split("=");
    if (k === undefined || v === undefined) continue;
    if (k.trim().toLowerCase() === "charset" && !/^"?utf-?8"?$/i.test(v.trim())) return false;
  }
  return true;
}

/** The parsed body, and its bytes as received (for signatures over the raw body: webhooks). */
export type JsonBody = { present: false } | { present: true; value: unknown; raw: Buffer };

/**
 * Reads the request body as JSON. An absent or whitespace-only body is `{ present: false }`;
 * the caller decides whether that is allowed. Throws 415, 413 and 400 (invalid_json) domain errors.
 */
export async function readJsonBody(req: IncomingMessage, limit: number): Promise<JsonBody> {
  if (!hasBody(req)) return { present: false };
  const contentType = req.headers["content-type"] ?? "";
  if (!isJsonContentType(contentType)) throw new UnsupportedMediaTypeError(contentType);

  let raw: Buffer;
  try {
    raw = await getRawBody(req, { length: req.headers["content-length"] ?? null, limit });
  } catch (err) {
    const type = (err as RawBodyError).type;
    if (type === "entity.too.large") throw new PayloadTooLargeError(limit);
    if (type === "request.size.invalid")
      throw new BadRequestError("invalid_content_length", "The body's length does not match its Content-Length header.");
    if (type === "request.aborted" && (req.socket.errored as { code?: string } | null)?.code === "ERR_HTTP_REQUEST_TIMEOUT")
      throw new RequestTimeoutError();
    if (type === "request.aborted") throw new BadRequestError("request_aborted", "The client aborted the request while sending the body.");
    throw err;
  }

  let text: string;
  try {
    text = new TextDecoder("utf-8", { fatal: true, ignoreBOM: false }).decode(raw);
  } catch {
    throw new BadRequestError("invalid_json", "The request body is not valid UTF-8.");
  }
  if (text.trim() === "") return { present: false };
  try {
    return { present: true, value: JSON.parse(text) as unknown, raw };
  } catch (err) {
    const msg = err instanceof SyntaxError ? err.message.slice(0, 200) : "parse error";
    throw new BadRequestError("invalid_json", `The request body is not valid JSON: ${msg}`);
  }
}
