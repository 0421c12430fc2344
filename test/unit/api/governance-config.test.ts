// Pure parts of governance: store names, the store's SQL template, the observability config's
// partial update, the ingestion body parser, and the operator verifier's review cache.
import test from "ava";
import { pino } from "pino";
import { storeNames, ident, SCHEMA_PREFIX, ROLE_PREFIX } from "../../../api/governance/stores/names.ts";
import { dropStoreSql, storeDdl } from "../../../api/governance/stores/store-sql.ts";
import {
  anyGuardEnabled,
  defaultObservabilityConfig,
  engineInput,
  mergeObservability,
  ObservabilityConfigPatch,
  readStoredConfig,
  resolveCustomTemplates,
  type ResolvedTemplate,
} from "../../../api/governance/configs/observability.ts";
import { parseIngestBody } from "../../../api/governance/schemas.ts";
import { operatorVerifier } from "../../../api/auth/operator.ts";
import { EngineConfig, GuardTemplateConfig, MAX_BATCH_SIZE } from "../../../toolkit/src/index.ts";

test("store names are valid identifiers of at most 63 bytes, deterministic, and distinct per app", (t) => {
  t.deepEqual(storeNames("wsabcdefghij", "web-shop"), { schema: "gov_wsabcdefghij_web_shop", role: "govr_wsabcdefghij_web_shop" });
  const long = "a".repeat(40) + "-" + "b".repeat(22);
  const n1 = storeNames("wsabcdefghij", long);
  const n2 = storeNames("wsabcdefghij", long.slice(0, -1) + "c");
  t.true(n1.role.length <= 63 && n1.schema.length <= 63);
  t.not(n1.schema, n2.schema, "truncated names keep a hash of the whole id");
  t.deepEqual(storeNames("wsabcdefghij", long), n1);
  t.true(n1.schema.startsWith(SCHEMA_PREFIX) && n1.role.startsWith(ROLE_PREFIX));
  t.throws(() => storeNames("wsabcdefghij", "Bad_Name"));
  t.throws(() => storeNames("not-a-workspace", "web"));
  t.throws(() => ident('x"; drop table y; --'));
  t.is(ident("gov_ws_x"), '"gov_ws_x"');
});

test("the store template: one NOLOGIN role, privileges only on its own schema, an append-only audit table", (t) => {
  const sql = storeDdl({ schema: "gov_wsabcdefghij_web", role: "govr_wsabcdefghij_web" }, 180000).join(";\n");
  t.regex(sql, /create role "govr_wsabcdefghij_web" nologin/);
  t.regex(sql, /grant "govr_wsabcdefghij_web" to current_user with inherit false, set true/);
  t.regex(sql, /grant usage on schema "gov_wsabcdefghij_web" to "govr_wsabcdefghij_web"/);
  t.regex(
    sql,
    /grant select, insert on "gov_wsabcdefghij_web"\."traces", "gov_wsabcdefghij_web"\."evals", "gov_wsabcdefghij_web"\."guard_blocks", "gov_wsabcdefghij_web"\."audit_log" to "govr_wsabcdefghij_web"/,
  );
  t.notRegex(sql, /grant[^;]*(update|delete|truncate)/i, "the role is never granted UPDATE, DELETE or TRUNCATE");
  t.regex(sql, /before update or delete on "gov_wsabcdefghij_web"\."audit_log"/);
  t.regex(sql, /before truncate on "gov_wsabcdefghij_web"\."audit_log"/);
  t.regex(sql, /create index if not exists traces_created_at_idx/);
  t.regex(
    sql,
    /grant select on "gov_wsabcdefghij_web"\."traces_hourly", "gov_wsabcdefghij_web"\."evals_hourly" to "govr_wsabcdefghij_web"/,
    "the rollups are read-only for the role",
  );
  t.regex(sql, /after insert on "gov_wsabcdefghij_web"\."traces" referencing new table as new_rows\s+for each statement/);
  t.regex(sql, /after insert on "gov_wsabcdefghij_web"\."evals" referencing new table as new_rows\s+for each statement/);
  t.regex(sql, /security definer set search_path = pg_catalog, pg_temp/, "the rollup triggers run as the owner with a pinned search_path");
  for (const stmt of storeDdl({ schema: "gov_wsabcdefghij_web", role: "govr_wsabcdefghij_web" }, 180000)) {
    t.regex(
      stmt,
      /^(do \$\$|grant|revoke|create (schema|table|index) if not exists|create or replace|alter table [^;]* add column if not exists|insert into [^;]*not exists \(select from)/,
      "every statement is idempotent",
    );
  }
  t.regex(
    storeDdl({ schema: "gov_a", role: "govr_a" }, 150000).join(";"),
    /grant "govr_a" to current_user;/,
    "PostgreSQL before 16: plain membership",
  );
  t.deepEqual(dropStoreSql({ schema: "gov_a", role: "govr_a" }), ['drop schema if exists "gov_a" cascade', 'drop role if exists "govr_a"']);
});

const tpl = (config: object, guardType = "custom"): ResolvedTemplate => ({
  name: "T",
  guardType,
  config: GuardTemplateConfig.parse(config),
});

test("a partial update changes only what it names; nested objects merge", (t) => {
  const base = defaultObservabilityConfig();
  const patch = ObservabilityConfigPatch.parse({ guards: { prompt_injection: { threshold: 0.9 } }, evals: { latency: { max_ms: 20000 } } });
  const { config, errors } = mergeObservability(base, patch);
  t.deepEqual(errors, []);
  t.deepEqual(config.guards.prompt_injection, { enabled: true, threshold: 0.9, classifier: true, classifier_on_ingestion: false });
  t.deepEqual(config.guards.sensitive_data, base.guards.sensitive_data);
  t.deepEqual(config.evals.latency, { ...base.evals.latency, max_ms: 20000 });
  t.deepEqual(base, defaultObservabilityConfig(), "the input is not mutated");
  t.deepEqual(mergeObservability(base, {}).config, base);
  t.deepEqual(mergeObservability(base, { evals: { latency: { target_ms: 10000 } } }).errors, [
    { field: "body.evals.latency.target_ms", message: "target_ms (10000) must be below max_ms (10000)" },
  ]);
});

test("the patch schema refuses unknown keys and out-of-range values at every depth", (t) => {
  for (const bad of [
    { guards: { toxicity: {} } },
    { guards: { prompt_injection: { threshold: 2 } } },
    { evals: { latency: { max_ms: 0 } } },
    { other: 1 },
    { guards: { custom_templates: [{ template_id: "x", extra: 1 }] } },
  ]) {
    t.false(ObservabilityConfigPatch.safeParse(bad).success, JSON.stringify(bad));
  }
});

test("custom_templates resolve to the template's name and sensitivity threshold, and a snapshot the engine accepts", (t) => {
  const templates = new Map([
    ["t1", tpl({ keywords: ["falcon"], sensitivity: "high" })],
    ["t2", tpl({ action: "redact" }, "pii_detection")],
  ]);
  const r = resolveCustomTemplates(
    [
      { template_id: "t1", template_name: "ignored" },
      { template_id: "t2", enabled: false, threshold: 0.3 },
      { template_id: "t3" },
      { template_id: "t1" },
    ],
    templates,
  );
  t.deepEqual(r.entries, [
    { template_id: "t1", template_name: "T", enabled: true, threshold: 0.4 },
    { template_id: "t2", template_name: "T", enabled: false, threshold: 0.3 },
  ]);
  t.deepEqual(
    r.errors.map((e) => e.field),
    ["body.guards.custom_templates[2].template_id", "body.guards.custom_templates[3].template_id"],
  );
  const config = { ...defaultObservabilityConfig(), guards: { ...defaultObservabilityConfig().guards, custom_templates: r.entries } };
  t.true(EngineConfig.safeParse(engineInput(config, r.snapshot)).success);
  t.true(anyGuardEnabled(config));
  t.false(
    anyGuardEnabled({
      ...config,
      guards: {
        prompt_injection: { enabled: false, threshold: 1, classifier: false, classifier_on_ingestion: false },
        sensitive_data: { enabled: false, threshold: 1 },
        custom_templates: [{ ...r.entries[1]!, enabled: false }],
      },
    }),
  );
});

const trace = (over: Record<string, unknown> = {}) => ({
  traceId: "6F9619FF-8B86-D011-B42D-00C04FC964FF",
  input: "q",
  output: "a",
  model: "m",
  latency: 1,
  tokens: { prompt: 1, completion: 1, total: 2 },
  timestamp: "2026-11-23T10:00:00+01:00",
  ...over,
});
const NOW = Date.parse("2026-11-23T10:00:00Z");

test("ingestion body: one trace, normalised", (t) => {
  const r = parseIngestBody(trace(), NOW);
  if (!r.ok) return t.fail(JSON.stringify(r.issues));
  t.false(r.request.batch);
  t.like(r.request.items[0], { ok: true, trace: { traceId: "6f9619ff-8b86-d011-b42d-00c04fc964ff" } });
  t.deepEqual(r.request.projects, []);
});

test("ingestion body: a batch checks every item on its own and collects the projects named", (t) => {
  const r = parseIngestBody(
    { traces: [trace({ project: "p" }), { ...trace(), tokens: {} }, 7, trace({ timestamp: "2026-11-23T12:00:01Z" })] },
    NOW,
  );
  if (!r.ok) return t.fail();
  t.true(r.request.batch);
  t.deepEqual(
    r.request.items.map((i) => i.ok),
    [true, false, false, false],
  );
  const [, bad, seven, future] = r.request.items;
  t.deepEqual(bad!.ok ? [] : bad!.errors.map((e) => e.field), [
    "body.traces[1].tokens.prompt",
    "body.traces[1].tokens.completion",
    "body.traces[1].tokens.total",
  ]);
  t.deepEqual(seven!.ok ? [] : [seven!.traceId, seven!.errors[0]!.field], [null, "body.traces[2]"]);
  t.deepEqual(future!.ok ? [] : future!.errors, [{ field: "body.traces[3].timestamp", message: "is more than 1 hour in the future" }]);
  t.deepEqual(r.request.projects, ["p"]);
});

test("ingestion body: shape errors", (t) => {
  const issues = (v: unknown) => {
    const r = parseIngestBody(v, NOW);
    return r.ok ? [] : r.issues.map((i) => [i.path.join("."), i.message]);
  };
  t.deepEqual(issues([]), [["", 'must be a trace object or { "traces": [...] }']]);
  t.deepEqual(issues({ traces: [] }), [["traces", "a batch needs at least one trace"]]);
  t.deepEqual(issues({ traces: Array.from({ length: MAX_BATCH_SIZE + 1 }, () => ({})) }), [
    ["traces", `at most ${MAX_BATCH_SIZE} traces per batch; split larger batches`],
  ]);
  t.deepEqual(issues({ traces: "x" }), [["traces", "Invalid input: expected array, received string"]]);
  t.true(issues(trace({ input: "\ud800" })).some(([p]) => p === "input"));
  t.true(
    issues(trace({ metadata: Object.fromEntries(Array.from({ length: 33 }, (_, i) => [`k${i}`, i])) })).some(
      ([p, m]) => p === "metadata" && m === "at most 32 keys",
    ),
  );
});

/** A JWT-shaped token with these claims (unsigned: the TokenReview is what verifies a token). */
const jwt = (claims: Record<string, unknown>, tag = "") =>
  `${Buffer.from('{"alg":"RS256"}').toString("base64url")}.${Buffer.from(JSON.stringify(claims)).toString("base64url")}.sig${tag}`;

test("operator verifier: the configured user only, positive reviews cached 60 s by token digest", async (t) => {
  let calls = 0;
  let clock = 0;
  const op = "system:serviceaccount:berth-system:berth-operator";
  const good = jwt({ sub: op }),
    forged = jwt({ sub: op }, "forged"),
    other = jwt({ sub: "system:serviceaccount:x:y" });
  const users: Record<string, string> = { [good]: op, [other]: "system:serviceaccount:x:y" };
  const verify = operatorVerifier({
    review: (tok) => {
      calls++;
      return Promise.resolve(users[tok]);
    },
    username: op,
    now: () => clock,
  });
  const log = pino({ level: "silent" });
  t.deepEqual(await verify(good, { log }), { ok: true, principal: { kind: "operator", username: op } });
  await verify(good, { log });
  t.is(calls, 1, "cached");
  clock = 60_001;
  await verify(good, { log });
  t.is(calls, 2, "expired after 60 s");
  // a token that claims to be the operator's is reviewed; the review decides
  t.deepEqual(await verify(forged, { log }), { ok: false, reason: "unauthenticated" });
  await verify(forged, { log });
  t.is(calls, 4, "negative reviews are not cached");
  // anything else is refused without asking the API server: no oracle for other tokens
  t.deepEqual(await verify(other, { log }), { ok: false, reason: "forbidden" });
  t.deepEqual(await verify("not-a-token", { log }), { ok: false, reason: "unauthenticated" });
  t.deepEqual(await verify(`ws_sk_${"A".repeat(43)}`, { log }), { ok: false, reason: "unauthenticated" });
  t.is(calls, 4, "no review for a token of another subject or no JWT at all");
  const failing = operatorVerifier({ review: () => Promise.reject(new Error("down")), username: "u" });
  await t.throwsAsync(failing(jwt({ sub: "u" }), { log }), { message: /could not be verified/ });
});

test("operator verifier with an audience: a token for another audience is refused without a review", async (t) => {
  let calls = 0;
  const op = "system:serviceaccount:berth-system:berth-operator";
  const verify = operatorVerifier({
    review: () => {
      calls++;
      return Promise.resolve(op);
    },
    username: op,
    audience: "berth-api",
  });
  const log = pino({ level: "silent" });
  t.deepEqual(await verify(jwt({ sub: op, aud: ["https://kubernetes.default.svc.cluster.local"] }), { log }), {
    ok: false,
    reason: "forbidden",
  });
  t.is(calls, 0);
  t.true((await verify(jwt({ sub: op, aud: ["berth-api"] }), { log })).ok);
  t.true((await verify(jwt({ sub: op, aud: "berth-api" }), { log })).ok, "aud as a single string");
  t.is(calls, 2);
});

test("a new app's classifier is on in the request path and off for plain-path traces on ingestion", (t) => {
  t.like(defaultObservabilityConfig().guards.prompt_injection, { classifier: true, classifier_on_ingestion: false });
  const { config } = mergeObservability(
    defaultObservabilityConfig(),
    ObservabilityConfigPatch.parse({ guards: { prompt_injection: { classifier_on_ingestion: true } } }),
  );
  t.like(config.guards.prompt_injection, { classifier: true, classifier_on_ingestion: true });
  t.false(ObservabilityConfigPatch.safeParse({ guards: { prompt_injection: { classifier_on_ingestion: "yes" } } }).success);
});

test("a stored config reads with the defaults of the day it was written, not today's", (t) => {
  const stored = (injection: Record<string, unknown>) => {
    const c = structuredClone(defaultObservabilityConfig()) as unknown as { guards: { prompt_injection: Record<string, unknown> } };
    c.guards.prompt_injection = injection;
    return c;
  };
  const read = (injection: Record<string, unknown>) => {
    const r = readStoredConfig(stored(injection));
    if (!r.success) throw r.error;
    return r.data.guards.prompt_injection;
  };
  // before `classifier` existed: off (not today's default, on)
  t.deepEqual(read({ enabled: true, threshold: 0.7 }), {
    enabled: true,
    threshold: 0.7,
    classifier: false,
    classifier_on_ingestion: false,
  });
  // an app that turned the classifier on before classifier_on_ingestion existed had it on ingestion too: it keeps it
  t.like(read({ enabled: true, threshold: 0.7, classifier: true }), { classifier: true, classifier_on_ingestion: true });
  t.like(read({ enabled: true, threshold: 0.7, classifier: false }), { classifier: false, classifier_on_ingestion: false });
  // written since: as stored
  t.like(read({ enabled: true, threshold: 0.7, classifier: true, classifier_on_ingestion: false }), {
    classifier: true,
    classifier_on_ingestion: false,
  });
});
