// Requests through the real node's ingress (Traefik, forwarded to BERTH_INGRESS_URL on the host),
// as a browser or a script sends them to https://<host> (here plain HTTP on the forwarded port).
// node:http, because fetch drops a Host header (a forbidden header name).
import { request, type IncomingHttpHeaders } from "node:http";

export interface Answer {
  status: number;
  text: string;
  headers: IncomingHttpHeaders;
}

export interface IngressRequest {
  method?: string;
  json?: unknown;
  headers?: Record<string, string>;
  timeoutMs?: number;
}

/** One request to `ingress` (http://127.0.0.1:<port>) for the virtual host `host`. Rejects on a network error or no answer in time. */
export function viaIngress(ingress: string, host: string, path = "/", opts: IngressRequest = {}): Promise<Answer> {
  const body = opts.json === undefined ? undefined : JSON.stringify(opts.json);
  const timeoutMs = opts.timeoutMs ?? 10_000;
  return new Promise((resolve, reject) => {
    const req = request(
      `${ingress}${path}`,
      {
        method: opts.method ?? "GET",
        timeout: timeoutMs,
        headers: {
          ...opts.headers,
          Host: host,
          ...(body ? { "Content-Type": "application/json", "Content-Length": Buffer.byteLength(body) } : {}),
        },
      },
      (res) => {
        let text = "";
        res
          .setEncoding("utf8")
          .on("data", (d: string) => {
            text += d;
          })
          .on("end", () => resolve({ status: res.statusCode ?? 0, text, headers: res.headers }));
      },
    );
    req.on("timeout", () => req.destroy(new Error(`no answer in ${timeoutMs} ms`))).on("error", reject);
    req.end(body);
  });
}
