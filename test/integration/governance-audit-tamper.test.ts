// Audit chain tamper detection: rows altered, deleted and reordered behind the API, by the database
// owner (the API's own user: it grants itself back the privileges the store revoked and switches
// the append-only triggers off, as any owner can), are each detected by GET .../audit/verify, which
// names the first broken link. Entries deleted from the end are detected too (the chain's recorded
// head), and stay a gap when ingestion goes on.
import test, { type ExecutionContext } from "ava";
import pg from "pg";
import { entryHash } from "../../api/governance/audit.ts";
import { startApi, type TestApi } from "../helpers/api.ts";
import { identity } from "../helpers/identities.ts";
import { provisionApp } from "../helpers/governance.ts";
import { query } from "../helpers/db.ts";

let api: TestApi;
let operator: string;

test.before(async () => {
  api = await startApi();
  operator = (await identity("operator")).token;
});
test.after.always(async () => {
  await api?.stop();
});

const N = 10;
const trace = (i: number) => ({
  traceId: crypto.randomUUID(),
  input: `Question ${i} about the invoice`,
  output: `Answer ${i}: it is attached.`,
  model: "gpt-4o",
  latency: 100 + i,
  tokens: { prompt: 10, completion: 20, total: 30 },
  timestamp: new Date(Date.now() - 60_000 + i).toISOString(),
});
const schemaOf = (app: string) => `"gov_${api.workspaceId}_${app}"`;
const verify = (app: string) => api.fetchJson("GET", `/workspaces/${api.workspaceId}/governance/apps/${app}/audit/verify`);
const ISO = (col: string) => `to_char(${col} at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')`;

/** An app whose chain holds N verified entries; returns the trace id of each sequence number (index 1..N). */
async function chainOf(t: ExecutionContext, app: string, n = N): Promise<{ key: string; traceAt: string[] }> {
  const { key } = await provisionApp(api, operator, app);
  const r = await api.fetchJson("POST", "/governance/traces", { key, body: { traces: Array.from({ length: n }, (_, i) => trace(i)) } });
  t.is(r.body.created, n, r.text);
  const v = await verify(app);
  t.like(v.body, { valid: true, entries: n }, "intact before tampering");
  const rows = await query<{ sequence: string; trace_id: string }>(
    api.db.url,
    `select sequence, trace_id from ${schemaOf(app)}.audit_log order by sequence`,
  );
  return { key, traceAt: ["", ...rows.map((x) => x.trace_id)] };
}

/** Runs statements on the app's audit_log as its owner: privileges granted back, triggers off, then restored. */
async function asOwner(app: string, ...statements: string[]): Promise<void> {
  const log = `${schemaOf(app)}.audit_log`;
  const c = new pg.Client({ connectionString: api.db.url });
  await c.connect();
  try {
    await c.query("begin");
    await c.query(`grant update, delete on ${log} to current_user`);
    await c.query(`alter table ${log} disable trigger user`);
    for (const sql of statements) await c.query(sql.replaceAll("$log", log));
    await c.query(`alter table ${log} enable trigger user`);
    await c.query(`revoke update, delete on ${log} from current_user`);
    await c.query("commit");
  } finally {
    await c.end();
  }
}

async function broken(
  t: ExecutionContext,
  app: string,
  link: { sequence: number; traceId: string | null; reason: string },
  entries: number,
): Promise<void> {
  const v = await verify(app);
  t.is(v.status, 200, v.text);
  t.deepEqual(v.body, { valid: false, entries, firstBrokenLink: link, headHash: null, restarts: [] });
}

const CONTENT = "the entry's content does not match its hash";
const PREV = "prev_hash does not match the previous entry's hash";

test("the owner is refused by the triggers until it switches them off", async (t) => {
  await chainOf(t, "owner");
  const c = new pg.Client({ connectionString: api.db.url });
  await c.connect();
  t.teardown(() => c.end());
  await c.query(`grant update, delete on ${schemaOf("owner")}.audit_log to current_user`);
  const e = await t.throwsAsync(c.query(`delete from ${schemaOf("owner")}.audit_log where sequence = 3`));
  t.regex(e.message, /append-only/);
  await c.query(`revoke update, delete on ${schemaOf("owner")}.audit_log from current_user`);
  t.like((await verify("owner")).body, { valid: true, entries: N });
});

test("altered: a changed prompt, response, model or guard decision names that entry", async (t) => {
  const { traceAt } = await chainOf(t, "altered");
  await asOwner(
    "altered",
    `update $log set response = 'a different answer' where sequence = 4`,
    `update $log set model = 'gpt-3' where sequence = 7`,
  );
  await broken(t, "altered", { sequence: 4, traceId: traceAt[4]!, reason: CONTENT }, N);

  const { traceAt: d } = await chainOf(t, "decision");
  await asOwner("decision", `update $log set guard_decision = jsonb_set(guard_decision, '{blocked}', 'true') where sequence = 1`);
  await broken(t, "decision", { sequence: 1, traceId: d[1]!, reason: CONTENT }, N);
});

test("altered with its own hash recomputed: the next link breaks; for the last entry, the recorded head", async (t) => {
  for (const [app, seq, named, reason] of [
    ["rehashed", 4, 5, PREV],
    ["rehashedlast", N, N, "the entry's hash is not the chain's recorded head: the last entry was rewritten"],
  ] as const) {
    const { traceAt } = await chainOf(t, app);
    const [e] = await query<Record<string, string>>(
      api.db.url,
      `select *, ${ISO("called_at")} as c, ${ISO("recorded_at")} as r from ${schemaOf(app)}.audit_log where sequence = ${seq}`,
    );
    const content = {
      sequence: seq,
      traceId: e!.trace_id!,
      workspaceId: api.workspaceId,
      appId: app,
      model: e!.model!,
      prompt: "a forged prompt",
      response: e!.response!,
      guardDecision: e!.guard_decision,
      calledAt: e!.c!,
      recordedAt: e!.r!,
    };
    await asOwner(app, `update $log set prompt = 'a forged prompt', hash = '${entryHash(e!.prev_hash!, content)}' where sequence = ${seq}`);
    await broken(t, app, { sequence: named, traceId: traceAt[named]!, reason }, N);
  }
});

test("deleted: the first entry, one in the middle, the last ones, all of them", async (t) => {
  const first = await chainOf(t, "delfirst");
  await asOwner("delfirst", `delete from $log where sequence = 1`);
  await broken(t, "delfirst", { sequence: 2, traceId: first.traceAt[2]!, reason: "entries 1-1 are missing" }, N - 1);

  const mid = await chainOf(t, "delmid");
  await asOwner("delmid", `delete from $log where sequence in (4, 5)`);
  await broken(t, "delmid", { sequence: 6, traceId: mid.traceAt[6]!, reason: "entries 4-5 are missing" }, N - 2);

  await chainOf(t, "deltail");
  await asOwner("deltail", `delete from $log where sequence > 8`);
  await broken(
    t,
    "deltail",
    { sequence: 9, traceId: null, reason: `entries 9-${N} are missing: the chain's recorded head is entry ${N}` },
    8,
  );

  await chainOf(t, "delall");
  await asOwner("delall", `delete from $log`);
  await broken(
    t,
    "delall",
    { sequence: 1, traceId: null, reason: `entries 1-${N} are missing: the chain's recorded head is entry ${N}` },
    0,
  );
});

test("deleted from the end, then ingestion goes on: the gap stays and is still named", async (t) => {
  const { key } = await chainOf(t, "healing");
  await asOwner("healing", `delete from $log where sequence > 7`);
  const r = await api.fetchJson("POST", "/governance/traces", { key, body: { traces: [trace(100), trace(101)] } });
  t.is(r.body.created, 2, r.text);
  const seq = await query<{ sequence: string }>(
    api.db.url,
    `select sequence from ${schemaOf("healing")}.audit_log where sequence > 7 order by sequence`,
  );
  t.deepEqual(
    seq.map((x) => Number(x.sequence)),
    [N + 1, N + 2],
    "the chain continues from its recorded head, not over the deleted entries",
  );
  const v = await verify("healing");
  t.like(v.body, { valid: false, entries: 9, firstBrokenLink: { sequence: N + 1, reason: `entries 8-${N} are missing` } });
});

test("reordered: two entries' sequence numbers swapped, two entries' contents swapped, an entry moved to the end", async (t) => {
  const swapped = await chainOf(t, "swapseq");
  await asOwner(
    "swapseq",
    `update $log set sequence = 1000 where sequence = 4`,
    `update $log set sequence = 4 where sequence = 5`,
    `update $log set sequence = 5 where sequence = 1000`,
  );
  await broken(t, "swapseq", { sequence: 4, traceId: swapped.traceAt[5]!, reason: PREV }, N);

  const contents = await chainOf(t, "swaprows");
  // everything but the chain fields: the rows trade places while sequence, prev_hash and hash stay
  await asOwner(
    "swaprows",
    `
    update $log a set trace_id = b.trace_id, prompt = b.prompt, response = b.response, guard_decision = b.guard_decision, called_at = b.called_at
      from $log b where (a.sequence, b.sequence) in ((6, 7), (7, 6))`,
  );
  await broken(t, "swaprows", { sequence: 6, traceId: contents.traceAt[7]!, reason: CONTENT }, N);

  const moved = await chainOf(t, "moved");
  await asOwner("moved", `update $log set sequence = ${N + 1} where sequence = 3`);
  await broken(t, "moved", { sequence: 4, traceId: moved.traceAt[4]!, reason: "entries 3-3 are missing" }, N);
});

test("a store made before the recorded head gets it from its last entry when the API starts", async (t) => {
  const { key } = await chainOf(t, "legacy", 5);
  const s = schemaOf("legacy");
  await query(api.db.url, `drop table ${s}.audit_head`);
  await query(api.db.url, `drop function ${s}.audit_head_advance() cascade`);
  await query(api.db.url, `update governance_projects set store_version = 3 where app_id = 'legacy'`);
  t.is(await api.services.governance.provisioning.upgradeStores(), 1);
  const [last] = await query<{ hash: string }>(api.db.url, `select hash from ${s}.audit_log where sequence = 5`);
  t.deepEqual(await query(api.db.url, `select sequence::int, hash from ${s}.audit_head`), [{ sequence: 5, hash: last!.hash }]);
  t.like((await verify("legacy")).body, { valid: true, entries: 5 });
  await api.fetchJson("POST", "/governance/traces", { key, body: trace(6) });
  t.like((await verify("legacy")).body, { valid: true, entries: 6 });
  // the app's role reads the head and cannot move it
  const c = new pg.Client({ connectionString: api.db.url });
  await c.connect();
  t.teardown(() => c.end());
  await c.query("begin");
  await c.query(`set local role "govr_${api.workspaceId}_legacy"`);
  t.is((await c.query(`select sequence from ${s}.audit_head`)).rows.length, 1);
  await t.throwsAsync(c.query(`update ${s}.audit_head set sequence = 1`), { message: /permission denied/ });
  await c.query("rollback");
});
