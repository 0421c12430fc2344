// Connects the host's loopback with the real node's network namespace through unix sockets, so
// that nothing listens anywhere but on 127.0.0.1 and inside the namespace hack/cluster creates.
// Two processes run it, one per side, sharing a directory of sockets:
//   node hack/lib/netbridge.ts host <config.json>    (in the host's network namespace)
//   node hack/lib/netbridge.ts node <config.json>    (started with `nsenter --net=<netns>`)
// The config lists
//   toNode: [{ name, listen: "127.0.0.1:port", target: "host:port" }]   host TCP → node TCP
//           (the ingress, reachable from the host)
//   toHost: [{ name, listen: "0.0.0.0:port", target: "127.0.0.1:port" }] node TCP → host TCP
//           (the API server, the registry and PostgreSQL, reachable from the node and its pods)
//   egress: a unix socket on which the node side answers HTTP CONNECT, for kube-apiserver's
//           egress selector: the API server reaches kubelets, pods and services through it.
import { existsSync, readFileSync, rmSync } from "node:fs";
import { connect, createServer, type Server, type Socket } from "node:net";
import { join } from "node:path";

interface Forward {
  name: string;
  listen: string;
  target: string;
}
export interface BridgeConfig {
  dir: string;
  toNode: Forward[];
  toHost: Forward[];
  egress?: boolean;
}

const hostPort = (s: string): { host: string; port: number } => {
  const i = s.lastIndexOf(":");
  return { host: s.slice(0, i), port: Number(s.slice(i + 1)) };
};

// Nagle's algorithm off on every TCP socket (Node.js leaves it on): a relay that holds a small
// write until the previous one is acknowledged meets the peer's delayed ACK, and every
// request-response exchange through the bridge stalls ~40 ms. A build Job's gRPC session with
// buildkitd made enough of them to take 510-660 ms instead of 124-164 ms for the same build.
function pipe(a: Socket, b: Socket): void {
  a.pipe(b);
  b.pipe(a);
  const end = () => {
    a.destroy();
    b.destroy();
  };
  a.on("error", end);
  b.on("error", end);
  a.on("close", end);
  b.on("close", end);
}

function listenUnix(path: string, onConn: (s: Socket) => void): Server {
  if (existsSync(path)) rmSync(path);
  const server = createServer(onConn);
  server.listen(path);
  return server;
}

function listenTcp(spec: string, onConn: (s: Socket) => void): Server {
  const { host, port } = hostPort(spec);
  const server = createServer({ noDelay: true }, onConn);
  server.listen({ host, port, exclusive: true });
  return server;
}

const toTcp = (target: string) => (s: Socket) => {
  const { host, port } = hostPort(target);
  pipe(s, connect({ host, port, noDelay: true }));
};
const toUnix = (path: string) => (s: Socket) => pipe(s, connect({ path }));

/** HTTP CONNECT on a unix socket: one request line and headers, then a raw TCP tunnel. */
function connectProxy(s: Socket): void {
  let buf = Buffer.alloc(0);
  const onData = (chunk: Buffer) => {
    buf = Buffer.concat([buf, chunk]);
    const end = buf.indexOf("\r\n\r\n");
    if (end < 0) {
      if (buf.length > 8192) s.destroy();
      return;
    }
    s.off("data", onData);
    const m = /^CONNECT ([^\s]+) HTTP\/1\.[01]\r\n/.exec(buf.subarray(0, end).toString("latin1"));
    if (!m) {
      s.end("HTTP/1.1 405 Method Not Allowed\r\n\r\n");
      return;
    }
    const { host, port } = hostPort(m[1]!);
    const upstream = connect({ host: host.replace(/^\[|\]$/g, ""), port, noDelay: true });
    upstream.once("connect", () => {
      s.write("HTTP/1.1 200 Connection established\r\n\r\n");
      const rest = buf.subarray(end + 4);
      if (rest.length) upstream.write(rest);
      pipe(s, upstream);
    });
    upstream.once("error", () => {
      if (!s.destroyed) s.end("HTTP/1.1 502 Bad Gateway\r\n\r\n");
    });
  };
  s.on("data", onData);
  s.on("error", () => s.destroy());
}

export function startBridge(side: "host" | "node", cfg: BridgeConfig): Server[] {
  const sock = (kind: string, name: string) => join(cfg.dir, `${kind}-${name}.sock`);
  const servers: Server[] = [];
  for (const f of cfg.toNode) {
    servers.push(side === "host" ? listenTcp(f.listen, toUnix(sock("n", f.name))) : listenUnix(sock("n", f.name), toTcp(f.target)));
  }
  for (const f of cfg.toHost) {
    servers.push(side === "host" ? listenUnix(sock("h", f.name), toTcp(f.target)) : listenTcp(f.listen, toUnix(sock("h", f.name))));
  }
  if (cfg.egress && side === "node") servers.push(listenUnix(join(cfg.dir, "egress.sock"), connectProxy));
  return servers;
}

if (import.meta.main) {
  const [side, file] = process.argv.slice(2);
  if ((side !== "host" && side !== "node") || !file) {
    process.stderr.write("usage: node hack/lib/netbridge.ts host|node <config.json>\n");
    process.exit(2);
  }
  const servers = startBridge(side, JSON.parse(readFileSync(file, "utf8")) as BridgeConfig);
  for (const s of servers)
    s.on("error", (err) => {
      process.stderr.write(`netbridge ${side}: ${err.message}\n`);
      process.exit(1);
    });
  const stop = () => {
    for (const s of servers) s.close();
    process.exit(0);
  };
  process.on("SIGTERM", stop);
  process.on("SIGINT", stop);
}
