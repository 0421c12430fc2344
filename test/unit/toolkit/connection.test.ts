// GOVDB_CONNECTION parsing and the environment the toolkit reads (toolkit/src/client/connection.ts,
// config.ts): the scheme choice, the typed errors, and that the key never shows.
import test from "ava";
import { inspect } from "node:util";
import { configure, Governance, GovdbConnectionError, isLoopback, parseConnection, readEnv, shutdown } from "../../../toolkit/src/index.ts";
import { isClusterLocal } from "../../../toolkit/src/client/connection.ts";

const KEY = "gov_sk_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8S9t0U1v";

const ok: [string, { host: string; database: string; tls: boolean; baseUrl: string }][] = [
  [
    `govdb://${KEY}@127.0.0.1:8080/gov_ws1_shop`,
    { host: "127.0.0.1:8080", database: "gov_ws1_shop", tls: false, baseUrl: "http://127.0.0.1:8080" },
  ],
  [`govdb://${KEY}@localhost/db`, { host: "localhost", database: "db", tls: false, baseUrl: "http://localhost" }],
  [`govdb://${KEY}@[::1]:9000/db`, { host: "[::1]:9000", database: "db", tls: false, baseUrl: "http://[::1]:9000" }],
  [`govdb://${KEY}@127.10.0.3:80/db`, { host: "127.10.0.3:80", database: "db", tls: false, baseUrl: "http://127.10.0.3:80" }],
  [
    `govdb://${KEY}@Governance.Example.COM/db`,
    { host: "governance.example.com", database: "db", tls: true, baseUrl: "https://governance.example.com" },
  ],
  [
    `govdb://${KEY}@berth-api.berth-system.svc:8080/db`,
    { host: "berth-api.berth-system.svc:8080", database: "db", tls: false, baseUrl: "http://berth-api.berth-system.svc:8080" },
  ],
  [
    `govdb://${KEY}@governance.example.com/db`,
    { host: "governance.example.com", database: "db", tls: true, baseUrl: "https://governance.example.com" },
  ],
  [
    `govdb://${KEY}@berth-api.berth-system.svc:8080/db?tls=false`,
    { host: "berth-api.berth-system.svc:8080", database: "db", tls: false, baseUrl: "http://berth-api.berth-system.svc:8080" },
  ],
  [`govdb://${KEY}@127.0.0.1:8443/db?tls=true`, { host: "127.0.0.1:8443", database: "db", tls: true, baseUrl: "https://127.0.0.1:8443" }],
  [`  govdb://${KEY}@localhost:1/db  `, { host: "localhost:1", database: "db", tls: false, baseUrl: "http://localhost:1" }],
];

for (const [value, want] of ok) {
  test(`parses ${value.trim().replace(KEY, "<key>")}`, (t) => {
    const c = parseConnection(value);
    t.is(c.key, KEY);
    t.like(c, want);
  });
}

const bad: [string, RegExp][] = [
  ["postgres://u:p@127.0.0.1/db", /scheme is not govdb/],
  [`govdb://127.0.0.1:8080/db`, /no key before @/],
  [`govdb://ws_sk_abc@127.0.0.1/db`, /does not start with gov_sk_/],
  [`govdb://gov_sk_a$b@127.0.0.1/db`, /characters other than/],
  [`govdb://${KEY}:secret@127.0.0.1/db`, /password/],
  [`govdb://${KEY}@127.0.0.1:8080`, /no database/],
  [`govdb://${KEY}@127.0.0.1:8080/`, /no database/],
  [`govdb://${KEY}@127.0.0.1:8080/a/b`, /not a plain name/],
  [`govdb://${KEY}@127.0.0.1:99999/db`, /not a URL/],
  [`govdb://${KEY}@127.0.0.1/db?tls=yes`, /tls must be true or false/],
  [`govdb://${KEY}@127.0.0.1/db#x`, /fragment/],
  ["govdb://", /not a URL|no key/],
];

for (const [value, message] of bad) {
  test(`refuses ${value.replace(KEY, "<key>")}`, (t) => {
    const err = t.throws(() => parseConnection(value), { instanceOf: GovdbConnectionError, message });
    t.is(err?.reason, "malformed");
    t.false(err?.message.includes(KEY), "the message never repeats the key");
    t.false(err?.message.includes("secret"));
  });
}

test("the key is never printed, serialised or inspected", (t) => {
  const c = parseConnection(`govdb://${KEY}@127.0.0.1:8080/db`);
  for (const shown of [String(c), JSON.stringify(c), JSON.stringify({ c }), inspect(c), inspect({ c }, { depth: 5 }), `${c.toString()}`]) {
    t.false(shown.includes(KEY), shown);
    t.true(shown.includes("127.0.0.1:8080"), shown);
  }
  t.is(c.keyPrefix, KEY.slice(0, 13));
  t.is(String(parseConnection(`govdb://${KEY}@example.com/db?tls=false`)), `govdb://${KEY.slice(0, 13)}…@example.com/db?tls=false`);
});

test("loopback hosts", (t) => {
  for (const h of ["127.0.0.1", "127.0.0.1:8080", "localhost", "localhost:3000", "[::1]", "[::1]:80", "127.255.0.9"])
    t.true(isLoopback(h), h);
  for (const h of ["10.0.0.1", "example.com", "localhost.example.com", "[::2]", "128.0.0.1", "1127.0.0.1"]) t.false(isLoopback(h), h);
});

test("readEnv: the two variables and the off switch", (t) => {
  t.deepEqual(readEnv({}), { connection: undefined, project: undefined, off: false, guardModelDir: undefined });
  t.deepEqual(readEnv({ GOVDB_CONNECTION: " x ", GOVERNANCE_PROJECT: "shop", BERTH_GOVERNANCE: "OFF", BERTH_GUARD_MODEL_DIR: "/m" }), {
    connection: "x",
    project: "shop",
    off: true,
    guardModelDir: "/m",
  });
  for (const v of ["off", "0", "false", "no", "disabled", "noop"]) t.true(readEnv({ BERTH_GOVERNANCE: v }).off, v);
  for (const v of ["on", "1", "", "true"]) t.false(readEnv({ BERTH_GOVERNANCE: v }).off, v);
  t.is(readEnv({ GOVDB_CONNECTION: "  " }).connection, undefined);
});

test("a Governance without GOVDB_CONNECTION is a typed error that says how to run without governance", (t) => {
  const err = t.throws(() => new Governance({ env: {} }), { instanceOf: GovdbConnectionError });
  t.is(err?.reason, "missing");
  t.regex(err?.message ?? "", /GOVDB_CONNECTION is not set/);
  t.regex(err?.message ?? "", /BERTH_GOVERNANCE=off/);
  t.throws(() => new Governance({ env: { GOVDB_CONNECTION: "govdb://nope" } }), { instanceOf: GovdbConnectionError, message: /malformed/ });
});

test("no-op mode needs no connection, by option or by BERTH_GOVERNANCE=off", async (t) => {
  for (const g of [
    new Governance({ env: {}, mode: "noop" }),
    new Governance({ env: { BERTH_GOVERNANCE: "off", GOVDB_CONNECTION: "garbage" } }),
  ]) {
    await g.start();
    t.is(g.mode, "noop");
    t.is(g.connection, undefined);
    t.is(g.engine, undefined);
    t.is(g.submit({ input: "a", output: "b", model: "m", latency: 1, tokens: { prompt: 1, completion: 1 } }), undefined);
    t.true(await g.flush());
    t.like(g.stats(), { mode: "noop", config: "none", submitted: 0 });
    t.true(await g.shutdown());
  }
});

test.serial("configure() rejects with the typed error and can be retried after fixing it", async (t) => {
  await t.throwsAsync(configure({ env: {} }), { instanceOf: GovdbConnectionError });
  const g = await configure({ env: {}, mode: "noop" });
  t.is(g.mode, "noop");
  t.is(await configure(), g, "configure once: later calls return the same Governance");
  t.true(await shutdown());
});

test("cluster Service addresses default to plain HTTP, like loopback; tls overrides", (t) => {
  for (const h of ["berth-api.berth-system.svc:80", "berth-api.berth-system.svc.cluster.local", "api.ns.svc.corp.example:8080"])
    t.true(isClusterLocal(h), h);
  for (const h of ["svc.example.com", "api.svc", "api.ns.svcx.local", "evil.example.com/x.ns.svc", "[::1]"]) t.false(isClusterLocal(h), h);
  const key = `gov_sk_${"a".repeat(43)}`;
  t.is(parseConnection(`govdb://${key}@berth-api.berth-system.svc:80/gov_x`).baseUrl, "http://berth-api.berth-system.svc:80");
  t.is(parseConnection(`govdb://${key}@berth-api.berth-system.svc:80/gov_x?tls=true`).baseUrl, "https://berth-api.berth-system.svc:80");
  t.is(parseConnection(`govdb://${key}@governance.example.com/gov_x`).baseUrl, "https://governance.example.com");
});
