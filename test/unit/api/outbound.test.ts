// api/http/outbound.ts: a user-chosen URL reaches only public addresses (unless allow-listed),
// whatever its host name resolves to and wherever it redirects, with a capped body and a deadline.
// The servers here are real HTTP servers on loopback; the resolver is the test's, so that a name can
// resolve to the addresses an attacker's DNS server would give.
import test from "ava";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { Outbound, type OutboundError } from "../../../api/http/outbound.ts";
import { embeddedIpv4, OutboundPolicy, parseCidrList } from "../../../kube/addresses.ts";

test("refused: loopback, private, link-local (metadata), shared, reserved, and IPv6 forms of them; public passes", (t) => {
  const p = new OutboundPolicy();
  for (const a of [
    "127.0.0.1",
    "127.1.2.3",
    "10.96.0.1",
    "172.16.0.1",
    "172.31.255.255",
    "192.168.1.1",
    "169.254.169.254",
    "100.64.0.1",
    "0.0.0.0",
    "224.0.0.1",
    "255.255.255.255",
    "::1",
    "::",
    "fe80::1",
    "fd00:ec2::254",
    "fc00::1",
    "::ffff:127.0.0.1",
    "::ffff:7f00:1",
    "::ffff:10.0.0.1",
    "64:ff9b::a9fe:a9fe",
    "2002:7f00:1::1",
    "::127.0.0.1",
  ]) {
    t.false(p.permits(a), a);
  }
  for (const a of ["93.184.216.34", "8.8.8.8", "172.32.0.1", "2606:4700::1111", "::ffff:8.8.8.8"]) t.true(p.permits(a), a);
  t.false(p.permits("not-an-address"));
});

test("the allow list opens ranges, the deny list closes more; CIDRs are checked", (t) => {
  const p = new OutboundPolicy({ allow: ["127.0.0.1/32", "10.244.0.0/16"], deny: ["8.8.8.0/24"] });
  t.true(p.permits("127.0.0.1"));
  t.false(p.permits("127.0.0.2"));
  t.true(p.permits("10.244.3.4"));
  t.false(p.permits("10.96.0.1"));
  t.false(p.permits("8.8.8.8"));
  t.true(p.permits("8.8.4.4"));
  t.deepEqual(parseCidrList(" 10.0.0.0/8, ::1/128 ,1.2.3.4"), ["10.0.0.0/8", "::1/128", "1.2.3.4"]);
  t.deepEqual(parseCidrList(""), []);
  t.throws(() => parseCidrList("10.0.0.0/33"), { message: /prefix length/ });
  t.throws(() => parseCidrList("git.example.com"), { message: /not an IP address/ });
  t.is(embeddedIpv4("::ffff:169.254.169.254"), "169.254.169.254");
  t.is(embeddedIpv4("2606:4700::1111"), undefined);
});

async function serve(host: string, handler: Parameters<typeof createServer>[1]): Promise<{ server: Server; url: string }> {
  const server = createServer(handler);
  await new Promise<void>((r) => server.listen(0, host, r));
  return { server, url: `http://${host}:${(server.address() as AddressInfo).port}` };
}

const request = { timeoutMs: 5000, maxBytes: 1024 };
const detailOf = async (p: Promise<unknown>) =>
  (
    (await p.then(
      () => undefined,
      (e: unknown) => e,
    )) as OutboundError | undefined
  )?.detail;

test("a name that resolves to a refused address is refused before connecting; allow-listed, the same request goes through", async (t) => {
  let hits = 0;
  const { server, url } = await serve("127.0.0.1", (_req, res) => {
    hits++;
    res.end("secret");
  });
  t.teardown(() => server.close());
  const port = new URL(url).port;
  const attacker = () => Promise.resolve([{ address: "127.0.0.1", family: 4 }]);
  const refused = new Outbound(new OutboundPolicy(), attacker);
  t.regex((await detailOf(refused.get(`http://git.attacker.test:${port}/x`, request)))!, /resolves to a refused address \(127\.0\.0\.1\)/);
  t.regex((await detailOf(refused.get(`${url}/x`, request)))!, /127\.0\.0\.1 is a refused address/);
  // one address of several refused is enough (a rebinding answer mixes them)
  const mixed = new Outbound(new OutboundPolicy(), () =>
    Promise.resolve([
      { address: "93.184.216.34", family: 4 },
      { address: "127.0.0.1", family: 4 },
    ]),
  );
  t.regex((await detailOf(mixed.get(`http://git.attacker.test:${port}/x`, request)))!, /refused address/);
  t.is(hits, 0);
  // the protection off (the address allow-listed): the very same request reads the server
  const open = new Outbound(new OutboundPolicy({ allow: ["127.0.0.1/32"] }), attacker);
  const r = await open.get(`http://git.attacker.test:${port}/x`, request);
  t.is(r.status, 200);
  t.is(r.body.toString(), "secret");
  t.is(hits, 1);
});

test("a redirect is checked like the first hop: an allowed server cannot send the request to a refused one", async (t) => {
  let inside = 0;
  const target = await serve("127.0.0.1", (_req, res) => {
    inside++;
    res.end("inside");
  });
  const front = await serve("127.0.0.2", (req, res) => {
    res.writeHead(302, { Location: req.url === "/loop" ? "/loop" : `${target.url}/metadata` });
    res.end();
  });
  t.teardown(() => {
    target.server.close();
    front.server.close();
  });
  const policy = new OutboundPolicy({ allow: ["127.0.0.2/32"] });
  t.regex((await detailOf(new Outbound(policy).get(`${front.url}/x`, request)))!, /127\.0\.0\.1 is a refused address/);
  t.is(inside, 0);
  t.regex((await detailOf(new Outbound(policy).get(`${front.url}/loop`, request)))!, /more than 3 redirects/);
  // both allowed: the redirect is followed
  const both = await new Outbound(new OutboundPolicy({ allow: ["127.0.0.0/30"] })).get(`${front.url}/x`, request);
  t.is(both.body.toString(), "inside");
  t.is(inside, 1);
});

test("the body is capped and the request has a deadline", async (t) => {
  const endless = await serve("127.0.0.1", (req, res) => {
    if (req.url === "/silent") return; // never answers
    if (req.url === "/declared") {
      res.writeHead(200, { "Content-Length": String(10 * 1024 * 1024) });
      res.write("x");
      return;
    }
    const chunk = Buffer.alloc(64 * 1024, 97);
    const pump = () => {
      while (res.write(chunk)) {
        /* until the socket pushes back */
      }
    };
    res.on("drain", pump);
    pump();
  });
  t.teardown(() => {
    endless.server.closeAllConnections();
    endless.server.close();
  });
  const o = new Outbound(new OutboundPolicy({ allow: ["127.0.0.1/32"] }));
  t.regex((await detailOf(o.get(`${endless.url}/endless`, { timeoutMs: 5000, maxBytes: 256 * 1024 })))!, /over the cap of 262144 bytes/);
  t.regex((await detailOf(o.get(`${endless.url}/declared`, { timeoutMs: 5000, maxBytes: 256 * 1024 })))!, /10485760 bytes, over the cap/);
  t.regex((await detailOf(o.get(`${endless.url}/silent`, { timeoutMs: 300, maxBytes: 1024 })))!, /no answer before the deadline/);
  t.regex((await detailOf(o.get("ftp://example.com/x", request)))!, /not an http\(s\) URL/);
});
