// The builds' egress proxy (operator/builder/egress.ts): a host name is resolved and judged by its
// addresses, so a name that leads to loopback or a private address is refused like the literal,
// for plain HTTP (absolute-form requests) and HTTPS (CONNECT). Against real sockets on loopback;
// names resolve through an injected resolver, as a DNS server would answer them.
import test from "ava";
import http from "node:http";
import type net from "node:net";
import { once } from "node:events";
import type { LookupAddress } from "node:dns";
import { checkedAddress, startEgressProxy } from "../../../operator/builder/egress.ts";
import { egressConfig } from "../../../operator/builder/config.ts";
import { OutboundPolicy, type Resolve } from "../../../kube/addresses.ts";

/** The names a DNS server would answer: the machine's own name and an internal one lead to loopback. */
const DNS: Record<string, LookupAddress[]> = {
  "buildhost.internal": [{ address: "127.0.0.1", family: 4 }],
  "db.corp.example": [{ address: "10.0.0.5", family: 4 }],
  "mixed.example": [
    { address: "93.184.215.14", family: 4 },
    { address: "127.0.0.1", family: 4 },
  ],
  "metadata.example": [{ address: "169.254.169.254", family: 4 }],
};
const resolve: Resolve = (host) => (DNS[host] ? Promise.resolve(DNS[host]) : Promise.reject(new Error(`ENOTFOUND ${host}`)));

let origin: http.Server;
let originPort: number;
test.before(async () => {
  origin = http.createServer((req, res) => res.end(`origin saw ${req.method} ${req.url} host=${req.headers.host}`));
  origin.listen(0, "127.0.0.1");
  await once(origin, "listening");
  originPort = (origin.address() as net.AddressInfo).port;
});
test.after.always(() => origin?.close());

async function proxy(allow: string[] = [], lines: string[] = []) {
  const p = await startEgressProxy({ listen: "127.0.0.1:0", allow, deny: [] }, (l) => lines.push(l), resolve);
  const [host, port] = p.address.split(":");
  return { ...p, host: host!, port: Number(port) };
}

/** A plain-HTTP request through the proxy (absolute form), as BuildKit's proxy sends it upstream. */
function viaProxy(p: { host: string; port: number }, url: string): Promise<{ status: number; body: string }> {
  return new Promise((resolveReq, reject) => {
    const req = http.request({ host: p.host, port: p.port, path: url, headers: { host: new URL(url).host } }, (res) => {
      let body = "";
      res.on("data", (c: Buffer) => (body += c.toString()));
      res.on("end", () => resolveReq({ status: res.statusCode ?? 0, body }));
    });
    req.on("error", reject);
    req.end();
  });
}

/** A CONNECT through the proxy; on 200, an HTTP request through the tunnel. */
function connect(p: { host: string; port: number }, target: string): Promise<{ status: number; body: string }> {
  return new Promise((resolveReq, reject) => {
    const req = http.request({ host: p.host, port: p.port, method: "CONNECT", path: target });
    req.on("connect", (res, socket) => {
      if (res.statusCode !== 200) {
        let body = "";
        res.on("data", (c: Buffer) => (body += c.toString()));
        socket.on("data", (c: Buffer) => (body += c.toString()));
        socket.on("close", () => resolveReq({ status: res.statusCode ?? 0, body }));
        socket.resume();
        return;
      }
      let raw = "";
      socket.on("data", (c: Buffer) => (raw += c.toString()));
      socket.on("end", () => resolveReq({ status: 200, body: raw.slice(raw.indexOf("\r\n\r\n") + 4) }));
      socket.write(`GET /through-tunnel HTTP/1.1\r\nHost: ${target}\r\nConnection: close\r\n\r\n`);
    });
    req.on("error", reject);
    req.end();
  });
}

test("a name that resolves to loopback is refused like the literal, over HTTP and CONNECT; the log names host and port only", async (t) => {
  const lines: string[] = [];
  const p = await proxy([], lines);
  t.teardown(() => p.close());
  for (const host of ["buildhost.internal", "127.0.0.1", "db.corp.example", "metadata.example", "mixed.example"]) {
    const plain = await viaProxy(p, `http://${host}:${originPort}/secret-path?token=x`);
    t.is(plain.status, 403, host);
    t.is(plain.body, "Berth's build egress: the destination is not a public address\n");
    const tunnel = await connect(p, `${host}:${originPort}`);
    t.is(tunnel.status, 403, host);
    t.false(tunnel.body.includes("origin saw"), host);
  }
  t.true(lines.some((l) => l.includes(`refused buildhost.internal:${originPort}`)));
  t.false(
    lines.some((l) => l.includes("secret-path") || l.includes("token")),
    "no path or query in the log",
  );
});

test("the protection off for one range (BERTH_EGRESS_ALLOW): the same name reaches the origin, so the refusal above is the policy's", async (t) => {
  const p = await proxy(["127.0.0.1/32"]);
  t.teardown(() => p.close());
  const plain = await viaProxy(p, `http://buildhost.internal:${originPort}/pkg?v=1`);
  t.is(plain.status, 200);
  t.is(plain.body, `origin saw GET /pkg?v=1 host=buildhost.internal:${originPort}`);
  const tunnel = await connect(p, `buildhost.internal:${originPort}`);
  t.is(tunnel.status, 200);
  t.true(tunnel.body.startsWith("origin saw GET /through-tunnel"), tunnel.body);
  // still refused: what the allow list does not open
  t.is((await viaProxy(p, `http://db.corp.example:${originPort}/`)).status, 403);
});

test("checkedAddress: literals and every resolved address judged; the address returned is the one checked", async (t) => {
  const policy = new OutboundPolicy();
  await t.throwsAsync(checkedAddress("[::1]", policy, resolve), { message: /refused address/ });
  await t.throwsAsync(checkedAddress("mixed.example", policy, resolve), { message: /resolves to a refused address/ });
  t.is(await checkedAddress("93.184.215.14", policy, resolve), "93.184.215.14");
  const publicOnly: Resolve = () => Promise.resolve([{ address: "93.184.215.14", family: 4 }]);
  t.is(await checkedAddress("registry.npmjs.org", policy, publicOnly), "93.184.215.14");
});

test("a request that is neither absolute http:// nor CONNECT is a 400", async (t) => {
  const p = await proxy();
  t.teardown(() => p.close());
  const res = await fetch(`http://${p.address}/relative`);
  t.is(res.status, 400);
});

test("egressConfig: defaults, CIDR lists, and bad values named", (t) => {
  t.deepEqual(egressConfig({}), { listen: "0.0.0.0:3128", allow: [], deny: [] });
  t.deepEqual(egressConfig({ BERTH_EGRESS_LISTEN: "127.0.0.1:9", BERTH_EGRESS_ALLOW: "10.1.0.0/16, 127.0.0.1", BERTH_EGRESS_DENY: "" }), {
    listen: "127.0.0.1:9",
    allow: ["10.1.0.0/16", "127.0.0.1"],
    deny: [],
  });
  t.throws(() => egressConfig({ BERTH_EGRESS_ALLOW: "10.0.0.0/99" }), { message: /^BERTH_EGRESS_ALLOW: .*prefix/ });
  t.throws(() => egressConfig({ BERTH_EGRESS_LISTEN: "nope" }), { message: /host:port/ });
});
