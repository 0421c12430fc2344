// The builds' egress proxy (docs/builds.md "Network"). RUN steps reach the network only through
// BuildKit's proxy network, and BuildKit's proxy sends its upstream requests through the proxy in
// buildkitd's own HTTP_PROXY/HTTPS_PROXY: this one. The source policy BuildKit applies sees a URL
// and refuses private literals; a host *name* that resolves to a private address (the machine's
// own name, an internal DNS name, a public name pointed at 10.0.0.5) it cannot see. Here the name
// is resolved, every address it resolves to must be one the address policy permits
// (kube/addresses.ts: no loopback, private, shared, link-local or metadata address, plus
// BERTH_EGRESS_DENY, minus BERTH_EGRESS_ALLOW), and the connection goes to the address checked.
//
// Plain HTTP comes as absolute-form requests and is forwarded; HTTPS comes as CONNECT and is
// tunnelled (BuildKit's proxy has already ended the step's TLS with its own CA; the origin's TLS
// runs through the tunnel). A refusal is a 403 whose body says only that the destination is not
// public, and one log line to stderr naming the host and port (never the path or a header).
// Runs beside buildkitd (the builder image carries it: `node /app/operator/builder/egress.ts`);
// locally hack/lib/buildkit.sh starts it before buildkitd.
import http, { type IncomingMessage, type ServerResponse } from "node:http";
import net from "node:net";
import type { Duplex } from "node:stream";
import { once } from "node:events";
import { AddressRefused, OutboundPolicy, permittedAddresses, systemResolve, type Resolve } from "../../kube/addresses.ts";
import { egressConfig, type EgressConfig } from "./config.ts";

/** How long a connection may sit idle (a slow package download keeps it busy). */
const IDLE_MS = 5 * 60_000;
/** The answer to a refused destination: nothing about what is there. */
const REFUSED_BODY = "Berth's build egress: the destination is not a public address\n";

/** The address to connect to for `host`: the first of its addresses, every one of them permitted (else AddressRefused). */
export async function checkedAddress(host: string, policy: OutboundPolicy, resolve: Resolve = systemResolve): Promise<string> {
  return (await permittedAddresses(host, policy, resolve))[0]!.address;
}

export interface EgressProxy {
  /** host:port it listens on */
  address: string;
  close(): Promise<void>;
}

/** Starts the proxy on `listen` (host:port; port 0 picks one). */
export async function startEgressProxy(
  c: Pick<EgressConfig, "listen" | "allow" | "deny">,
  log: (line: string) => void = (l) => process.stderr.write(`${l}\n`),
  resolve: Resolve = systemResolve,
): Promise<EgressProxy> {
  const policy = new OutboundPolicy({ allow: c.allow, deny: c.deny });
  const refuse = (what: string, err: unknown) =>
    log(`[egress] refused ${what}: ${err instanceof AddressRefused ? err.message : `no connection (${(err as Error).message})`}`);

  const server = http.createServer((req: IncomingMessage, res: ServerResponse) => {
    const target = URL.parse(req.url ?? "");
    if (!target || target.protocol !== "http:") {
      res.writeHead(400, { "content-type": "text/plain" }).end("Berth's build egress: an absolute http:// URL or CONNECT\n");
      return;
    }
    const port = Number(target.port || 80);
    checkedAddress(target.hostname, policy, resolve)
      .then((address) => {
        const headers = { ...req.headers };
        delete headers["proxy-connection"];
        delete headers["proxy-authorization"];
        const upstream = http.request(
          { host: address, port, method: req.method, path: `${target.pathname}${target.search}`, headers, agent: false, timeout: IDLE_MS },
          (up) => {
            res.writeHead(up.statusCode ?? 502, up.headers);
            up.pipe(res);
          },
        );
        upstream.on("timeout", () => upstream.destroy(new Error("idle")));
        upstream.on("error", (err) => {
          refuse(`${target.hostname}:${port}`, err);
          if (!res.headersSent) res.writeHead(502, { "content-type": "text/plain" }).end("Berth's build egress: no connection\n");
          else res.destroy();
        });
        req.pipe(upstream);
      })
      .catch((err: unknown) => {
        refuse(`${target.hostname}:${port}`, err);
        res.writeHead(403, { "content-type": "text/plain" }).end(REFUSED_BODY);
      });
  });

  server.on("connect", (req: IncomingMessage, client: Duplex, head: Buffer) => {
    const m = /^(\[[^\]]+\]|[^:]+):(\d{1,5})$/.exec(req.url ?? "");
    const port = Number(m?.[2]);
    if (!m || port < 1 || port > 65535) {
      client.end("HTTP/1.1 400 Bad Request\r\n\r\n");
      return;
    }
    client.on("error", () => undefined);
    checkedAddress(m[1]!, policy, resolve)
      .then(async (address) => {
        const upstream = net.connect({ host: address, port });
        upstream.setTimeout(IDLE_MS, () => upstream.destroy());
        client.on("close", () => upstream.destroy());
        try {
          await once(upstream, "connect");
        } catch (err) {
          refuse(`${m[1]}:${port}`, err);
          client.end("HTTP/1.1 502 Bad Gateway\r\n\r\n");
          return;
        }
        upstream.on("error", () => client.destroy());
        upstream.on("close", () => client.destroy());
        client.write("HTTP/1.1 200 Connection Established\r\n\r\n");
        if (head.length) upstream.write(head);
        upstream.pipe(client);
        client.pipe(upstream);
      })
      .catch((err: unknown) => {
        refuse(`${m[1]}:${port}`, err);
        client.end(`HTTP/1.1 403 Forbidden\r\ncontent-type: text/plain\r\ncontent-length: ${REFUSED_BODY.length}\r\n\r\n${REFUSED_BODY}`);
      });
  });

  const [host = "127.0.0.1", port = "0"] = c.listen.split(/:(?=\d+$)/);
  server.listen({ host: host.replace(/^\[|\]$/g, ""), port: Number(port) });
  await once(server, "listening");
  const bound = server.address() as net.AddressInfo;
  return {
    address: `${bound.family === "IPv6" ? `[${bound.address}]` : bound.address}:${bound.port}`,
    close: () =>
      new Promise((resolveClose) => {
        server.close(() => resolveClose());
        server.closeAllConnections();
      }),
  };
}

if (import.meta.main) {
  const c = egressConfig();
  const proxy = await startEgressProxy(c);
  process.stderr.write(`[egress] listening on ${proxy.address}\n`);
  for (const signal of ["SIGTERM", "SIGINT"] as const) process.once(signal, () => void proxy.close().then(() => process.exit(0)));
}
