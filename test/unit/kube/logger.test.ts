// The logger: secrets and AI payloads redacted by field name, and credentials scrubbed by their
// shape from every serialized line, wherever they sit (an error's message or stack, a URL, a value
// deeper than the redact paths reach).
import test from "ava";
import { createLogger, scrubTokens } from "../../../kube/logger.ts";

const KEY = `ws_sk_${"A1b2-C3d4_".repeat(4)}xyz`;
const JWT = "eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJzeXN0ZW06c2VydmljZWFjY291bnQifQ.c2lnbmF0dXJlLXBhcnQ";

function capture() {
  const lines: string[] = [];
  const log = createLogger({
    level: "trace",
    destination: {
      write: (l: string) => {
        lines.push(l);
      },
    },
  });
  return { log, lines };
}

test("scrubTokens replaces keys (keeping their kind) and JWTs, and nothing else", (t) => {
  t.is(scrubTokens(`/api/v1/workspaces/${KEY}/apps`), "/api/v1/workspaces/ws_sk_[redacted]/apps");
  t.is(scrubTokens(`govdb://gov_sk_abcDEF123-_@host/db and pa_sk_Zz9`), "govdb://gov_sk_[redacted]@host/db and pa_sk_[redacted]");
  t.is(scrubTokens(`Bearer ${JWT}`), "Bearer [redacted]");
  for (const benign of ["/api/v1/workspaces/wsabcdefghij/apps/shop", "traces ingested", "task_sk", "ask_sk_", "eyJustice.is.blind"])
    t.is(scrubTokens(benign), benign);
});

test("a key or token anywhere in a line is scrubbed: message, error message and stack, deep values", (t) => {
  const { log, lines } = capture();
  log.error({ err: new Error(`request to https://h/x failed: Authorization: Bearer ${JWT}`) }, "failed");
  log.info({ a: { b: { c: { d: KEY } } } }, `using ${KEY}`);
  log.debug({ url: `govdb://${KEY.replace("ws_", "gov_")}@host/db` }, "connecting");
  t.is(lines.length, 3);
  for (const l of lines) {
    t.false(l.includes(KEY.slice(6)), l);
    t.false(l.includes(JWT.slice(20)), l);
    JSON.parse(l); // still JSON
  }
  t.true(lines[1]!.includes("ws_sk_[redacted]"));
});

test("fields named like secrets or AI payloads are redacted by name, one level down too", (t) => {
  const { log, lines } = capture();
  log.info(
    { prompt: "the violet umbrella", trace: { output: "the harbour ferryman" }, headers: { authorization: "Basic abc" }, key: "hunter2" },
    "x",
  );
  const line = JSON.parse(lines[0]!) as Record<string, unknown>;
  t.like(line, { prompt: "[redacted]", trace: { output: "[redacted]" }, headers: { authorization: "[redacted]" }, key: "[redacted]" });
});

test("redaction by name reaches two levels down, arrays included, and child bindings; the caller's objects are left as they were", (t) => {
  const { log, lines } = capture();
  const obj = { a: { b: { secret: "s3" } }, items: [{ token: "t1" }, { name: "ok" }], deep: { b: { c: { password: "p4" } } } };
  const before = JSON.stringify(obj);
  log.child({ cookie: "berth_share=abc", requestId: "r1" }).info(obj, "x");
  const line = JSON.parse(lines[0]!) as Record<string, unknown>;
  t.like(line, {
    cookie: "[redacted]",
    requestId: "r1",
    a: { b: { secret: "[redacted]" } },
    items: [{ token: "[redacted]" }, { name: "ok" }],
  });
  t.deepEqual(line.deep, { b: { c: { password: "p4" } } }, "three levels down is past the name rule (the shape scrub still applies)");
  t.is(JSON.stringify(obj), before);
  const err = Object.assign(new Error("boom"), { code: "E1" });
  log.error({ err }, "failed");
  t.like(JSON.parse(lines[1]!), { err: { message: "boom", code: "E1", type: "Error" } }, "errors still go through their serializer");
});
