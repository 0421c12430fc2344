// A service's governance: analytics (summary, five time series as uPlot charts, token usage, eval
// score distribution, over a range and bucket width kept in the URL), traces (filtered by session;
// "blocked only" filters the loaded page, the list API has no such filter) and one trace, guard
// blocks, the observability configuration as a form (PUT, a partial update), and the audit chain's
// verification.
import { useState } from "preact/hooks";
import { api, call, type Operations, type Schemas } from "../api.ts";
import { Chart, color } from "../chart.tsx";
import { href, Link, navigate, useLocation } from "../router.tsx";
import { useWorkspace } from "../session.ts";
import {
  ActionButton,
  Empty,
  FieldExtras,
  Form,
  Show,
  Status,
  TableWrap,
  Time,
  count,
  percent,
  text,
  usd,
  useField,
  useLoad,
  type Loaded,
} from "../ui.tsx";
import { ServiceFrame, servicePath } from "./frame.tsx";

type Metric = NonNullable<NonNullable<Operations["getAnalyticsTimeseries"]["parameters"]["query"]>["metric"]>;
type Interval = NonNullable<NonNullable<Operations["getAnalyticsTimeseries"]["parameters"]["query"]>["interval"]>;

const RANGES = [
  ["24h", "Last 24 hours", 24],
  ["7d", "Last 7 days", 24 * 7],
  ["30d", "Last 30 days", 24 * 30],
  ["90d", "Last 90 days", 24 * 90],
] as const;
const INTERVALS: readonly (readonly [Interval, string])[] = [
  ["1h", "1 hour"],
  ["6h", "6 hours"],
  ["1d", "1 day"],
  ["7d", "7 days"],
];
const METRICS: readonly (readonly [Metric, string, (v: number) => string])[] = [
  ["total_calls", "Calls", (v) => count(v)],
  ["total_tokens", "Tokens", (v) => count(v)],
  ["avg_latency", "Mean latency (ms)", (v) => `${Math.round(v)} ms`],
  ["total_cost", "Cost (USD)", (v) => usd(v)],
  ["error_rate", "Error rate", (v) => percent(v)],
];

function pick<T extends string>(value: string | null, allowed: readonly T[], fallback: T): T {
  return allowed.includes(value as T) ? (value as T) : fallback;
}

function Figures({ items }: { items: readonly (readonly [string, string])[] }) {
  return (
    <dl class="figures">
      {items.map(([label, value]) => (
        <div key={label} class="figure">
          <dt>{label}</dt>
          <dd>{value}</dd>
        </div>
      ))}
    </dl>
  );
}

function Analytics({ appId }: { appId: string }) {
  const workspaceId = useWorkspace();
  const { query } = useLocation();
  const range = pick(
    query.get("range"),
    RANGES.map((r) => r[0]),
    "7d",
  );
  const interval = pick(
    query.get("interval"),
    INTERVALS.map((i) => i[0]),
    range === "24h" ? "1h" : range === "7d" ? "6h" : "1d",
  );
  const hours = RANGES.find((r) => r[0] === range)?.[2] ?? 168;
  const path = { workspaceId, appId };

  const [data] = useLoad(async () => {
    // the range ends at the end of the current minute: the calls just made count, and the same URL
    // asks the same question within a minute
    const end = new Date(Math.floor(Date.now() / 60000) * 60000 + 60000);
    const start = new Date(end.getTime() - hours * 3600_000);
    const q = { start: start.toISOString(), end: end.toISOString() };
    const base = "/workspaces/{workspaceId}/governance/apps/{appId}/analytics" as const;
    const [summary, tokens, evals, ...series] = await Promise.all([
      call(api.GET(`${base}/summary`, { params: { path, query: q } })),
      call(api.GET(`${base}/token-usage`, { params: { path, query: q } })),
      call(api.GET(`${base}/eval-distribution`, { params: { path, query: q } })),
      ...METRICS.map(([metric]) => call(api.GET(`${base}/timeseries`, { params: { path, query: { ...q, metric, interval } } }))),
    ]);
    return { summary, tokens, evals, series };
  }, [workspaceId, appId, range, interval]);

  return (
    <>
      <form
        class="filters"
        aria-label="Analytics period"
        onSubmit={(e) => {
          e.preventDefault();
          const d = new FormData(e.currentTarget);
          navigate(
            servicePath(
              appId,
              `/governance?${new URLSearchParams({ range: text(d, "range") ?? "", interval: text(d, "interval") ?? "" })}`,
            ),
          );
        }}
      >
        <div class="field">
          <label for="range">Range</label>
          <select id="range" name="range">
            {RANGES.map(([v, l]) => (
              <option key={v} value={v} selected={v === range}>
                {l}
              </option>
            ))}
          </select>
        </div>
        <div class="field">
          <label for="interval">Interval</label>
          <select id="interval" name="interval">
            {INTERVALS.map(([v, l]) => (
              <option key={v} value={v} selected={v === interval}>
                {l}
              </option>
            ))}
          </select>
        </div>
        <div class="actions">
          <button type="submit">Show</button>
        </div>
      </form>
      <Show value={data} what="analytics">
        {({ summary, tokens, evals, series }) => (
          <>
            <h2>Summary</h2>
            <Figures
              items={[
                ["Calls", count(summary.totalCalls)],
                ["Tokens", count(summary.totalTokens)],
                ["Mean latency", `${Math.round(summary.avgLatencyMs)} ms`],
                ["Cost", usd(summary.totalCostUsd)],
                ["Blocked by guards", count(summary.blockedByGuard)],
                ["Error rate", percent(summary.errorRate)],
              ]}
            />
            <p class="muted small">
              From <Time iso={summary.period.start} /> to <Time iso={summary.period.end} />.
            </p>
            <h2>Over time</h2>
            <div class="charts">
              {METRICS.map(([metric, label, fmt], i) => {
                const s = series[i];
                if (!s) return null;
                const max = s.values.reduce((a, b) => Math.max(a, b), 0);
                return (
                  <figure key={metric} class="chart-box">
                    <figcaption>
                      {label} per {INTERVALS.find((x) => x[0] === s.interval)?.[1] ?? s.interval}
                    </figcaption>
                    <Chart
                      testId={`chart-${metric}`}
                      label={`${label} per ${s.interval} bucket: ${s.values.length} buckets, highest ${fmt(max)}`}
                      x={s.labels.map((l) => Date.parse(l) / 1000)}
                      series={[{ label, values: s.values, color: color(i) }]}
                      time
                      format={fmt}
                    />
                  </figure>
                );
              })}
            </div>
            <h2>Token usage</h2>
            <Figures
              items={[
                ["Prompt tokens", count(tokens.promptTokens)],
                ["Completion tokens", count(tokens.completionTokens)],
                ["Total tokens", count(tokens.totalTokens)],
              ]}
            />
            <h2>Eval scores</h2>
            {evals.byType.length === 0 ? (
              <Empty>No eval in this range.</Empty>
            ) : (
              <>
                <figure class="chart-box">
                  <figcaption>Eval score distribution (calls per score bucket)</figcaption>
                  <Chart
                    testId="chart-eval_distribution"
                    label={`Eval score distribution over ${evals.buckets.length} score buckets for ${evals.byType.map((t) => t.evalType).join(", ")}`}
                    x={evals.buckets.map((b) => b.lower)}
                    series={evals.byType.map((t, i) => ({ label: t.evalType.replace("_", " "), values: t.counts, color: color(i) }))}
                    bars
                    xFormat={(v) => v.toFixed(1)}
                  />
                </figure>
                <TableWrap label="Eval scores by type">
                  <thead>
                    <tr>
                      <th scope="col">Eval</th>
                      <th scope="col">Count</th>
                      <th scope="col">Mean score</th>
                      <th scope="col">Pass rate</th>
                    </tr>
                  </thead>
                  <tbody>
                    {evals.byType.map((t) => (
                      <tr key={t.evalType}>
                        <th scope="row">{t.evalType.replace("_", " ")}</th>
                        <td>{count(t.count)}</td>
                        <td>{t.mean.toFixed(2)}</td>
                        <td>{percent(t.passRate)}</td>
                      </tr>
                    ))}
                  </tbody>
                </TableWrap>
              </>
            )}
          </>
        )}
      </Show>
    </>
  );
}

export function AnalyticsPage({ appId }: { appId: string }) {
  return (
    <ServiceFrame appId={appId} section="Analytics" sub="governance">
      {() => <Analytics appId={appId} />}
    </ServiceFrame>
  );
}

// ---------------------------------------------------------------------------------------------
// Traces

const TRACE_PAGE = 20;

function Traces({ appId }: { appId: string }) {
  const workspaceId = useWorkspace();
  const { query } = useLocation();
  const session = query.get("session") ?? "";
  const blocked = query.get("blocked") === "1";
  const offset = Math.max(0, Number(query.get("offset")) || 0);
  const limit = blocked ? 100 : TRACE_PAGE;
  const [list] = useLoad(
    () =>
      call(
        api.GET("/workspaces/{workspaceId}/governance/apps/{appId}/traces", {
          params: { path: { workspaceId, appId }, query: { limit, offset, ...(session ? { session_id: session } : {}) } },
        }),
      ),
    [workspaceId, appId, session, offset, limit],
  );
  const pageHref = (o: number) =>
    servicePath(appId, `/governance/traces${qs({ session, blocked: blocked ? "1" : "", offset: o ? String(o) : "" })}`);
  return (
    <>
      <form
        role="search"
        aria-label="Filter traces"
        class="filters"
        onSubmit={(e) => {
          e.preventDefault();
          const d = new FormData(e.currentTarget);
          navigate(
            servicePath(
              appId,
              `/governance/traces${qs({ session: text(d, "session") ?? "", blocked: d.get("blocked") === "on" ? "1" : "" })}`,
            ),
          );
        }}
      >
        <div class="field">
          <label for="trace-session">Session id</label>
          <input id="trace-session" name="session" defaultValue={session} spellcheck={false} />
        </div>
        <div class="field checkbox">
          <input id="trace-blocked" name="blocked" type="checkbox" defaultChecked={blocked} />
          <label for="trace-blocked">Blocked only</label>
        </div>
        <div class="actions">
          <button type="submit">Apply filters</button>
        </div>
      </form>
      {blocked && <p class="hint">Blocked only shows the blocked traces among the next 100.</p>}
      <Show value={list} what="traces">
        {(l) => {
          const rows = blocked ? l.data.filter((t) => t.guardBlocked) : l.data;
          return (
            <>
              {rows.length === 0 ? (
                <Empty>No trace matches.</Empty>
              ) : (
                <TableWrap label="Traces">
                  <thead>
                    <tr>
                      <th scope="col">Time</th>
                      <th scope="col">Session</th>
                      <th scope="col">Model</th>
                      <th scope="col">Tokens</th>
                      <th scope="col">Latency</th>
                      <th scope="col">Guards</th>
                      <th scope="col">Eval score</th>
                    </tr>
                  </thead>
                  <tbody>
                    {rows.map((t) => (
                      <tr key={t.traceId}>
                        <th scope="row">
                          {/* the link's name holds its visible text (WCAG 2.5.3), then the trace's id */}
                          <Link href={servicePath(appId, `/governance/traces/${encodeURIComponent(t.traceId)}`)}>
                            <Time iso={t.createdAt} />
                            <span class="visually-hidden"> trace {t.traceId}</span>
                          </Link>
                        </th>
                        <td class="break">{t.sessionId ?? "—"}</td>
                        <td>{t.model}</td>
                        <td>{count(t.totalTokens)}</td>
                        <td>{t.latencyMs} ms</td>
                        <td>{t.guardBlocked ? <Status value="blocked" /> : <Status value="pass" />}</td>
                        <td>{t.evalScore.toFixed(2)}</td>
                      </tr>
                    ))}
                  </tbody>
                </TableWrap>
              )}
              <nav aria-label="Pages of traces" class="pager">
                <span>
                  {l.total === 0 ? "No traces" : `Traces ${l.offset + 1}–${Math.min(l.offset + l.data.length, l.total)} of ${l.total}`}
                </span>
                {l.offset > 0 && <Link href={pageHref(Math.max(0, l.offset - limit))}>Previous page</Link>}
                {l.offset + l.data.length < l.total && <Link href={pageHref(l.offset + limit)}>Next page</Link>}
              </nav>
            </>
          );
        }}
      </Show>
    </>
  );
}

function qs(params: Record<string, string>): string {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) if (v) q.set(k, v);
  const s = q.toString();
  return s ? `?${s}` : "";
}

export function TracesPage({ appId }: { appId: string }) {
  return (
    <ServiceFrame appId={appId} section="Traces" sub="governance">
      {() => <Traces appId={appId} />}
    </ServiceFrame>
  );
}

function TraceView({ appId, traceId }: { appId: string; traceId: string }) {
  const workspaceId = useWorkspace();
  const path = { workspaceId, appId };
  const [trace] = useLoad(
    () =>
      Promise.all([
        call(api.GET("/workspaces/{workspaceId}/governance/apps/{appId}/traces/{traceId}", { params: { path: { ...path, traceId } } })),
        call(
          api.GET("/workspaces/{workspaceId}/governance/apps/{appId}/evals", {
            params: { path, query: { trace_id: traceId, limit: 100 } },
          }),
        ),
      ]),
    [workspaceId, appId, traceId],
  );
  return (
    <Show value={trace} what="the trace">
      {([t, evals]) => (
        <>
          <dl class="facts">
            <div>
              <dt>Time</dt>
              <dd>
                <Time iso={t.createdAt} />
              </dd>
            </div>
            <div>
              <dt>Session</dt>
              <dd class="break">{t.sessionId ?? "—"}</dd>
            </div>
            <div>
              <dt>Model</dt>
              <dd>{t.model}</dd>
            </div>
            <div>
              <dt>Tokens</dt>
              <dd>
                {count(t.promptTokens)} prompt + {count(t.completionTokens)} completion = {count(t.totalTokens)}
              </dd>
            </div>
            <div>
              <dt>Latency</dt>
              <dd>{t.latencyMs} ms</dd>
            </div>
            <div>
              <dt>Cost</dt>
              <dd>{t.costKnown ? usd(t.costUsd) : "Unknown model price"}</dd>
            </div>
            <div>
              <dt>Guards</dt>
              <dd>{t.guardBlocked ? <Status value="blocked" /> : <Status value="pass" />}</dd>
            </div>
            <div>
              <dt>Eval score</dt>
              <dd>{t.evalScore.toFixed(2)}</dd>
            </div>
          </dl>
          {t.error && (
            <div class="problem">
              <p class="problem-title">The call failed</p>
              <p>{t.error}</p>
            </div>
          )}
          <h2>Prompt</h2>
          <pre class="wrap" tabIndex={0} role="region" aria-label="Prompt">
            {t.prompt}
          </pre>
          <h2>Response</h2>
          <pre class="wrap" tabIndex={0} role="region" aria-label="Response">
            {t.response}
          </pre>
          <h2>Guard evaluations</h2>
          {t.guardEvaluations.length === 0 ? (
            <Empty>No guard evaluated this call.</Empty>
          ) : (
            <TableWrap label="Guard evaluations">
              <thead>
                <tr>
                  <th scope="col">Guard</th>
                  <th scope="col">Phase</th>
                  <th scope="col">Result</th>
                  <th scope="col">Confidence</th>
                  <th scope="col">Source</th>
                </tr>
              </thead>
              <tbody>
                {t.guardEvaluations.map((g, i) => (
                  <tr key={i}>
                    <th scope="row">{g.guardType.replace(/_/g, " ")}</th>
                    <td>{g.phase}</td>
                    <td>
                      <Status value={g.result} />
                    </td>
                    <td>{g.confidence.toFixed(2)}</td>
                    <td>{g.source}</td>
                  </tr>
                ))}
              </tbody>
            </TableWrap>
          )}
          <h2>Evals</h2>
          {evals.length === 0 ? (
            <Empty>No eval scored this call.</Empty>
          ) : (
            <TableWrap label="Evals">
              <thead>
                <tr>
                  <th scope="col">Eval</th>
                  <th scope="col">Score</th>
                  <th scope="col">Result</th>
                  <th scope="col">Details</th>
                </tr>
              </thead>
              <tbody>
                {evals.map((e) => (
                  <tr key={e.id}>
                    <th scope="row">{e.evalType.replace(/_/g, " ")}</th>
                    <td>{e.score.toFixed(2)}</td>
                    <td>
                      <Status value={e.passed ? "pass" : "failed"} />
                    </td>
                    <td>{e.details}</td>
                  </tr>
                ))}
              </tbody>
            </TableWrap>
          )}
          {t.metadata && Object.keys(t.metadata).length > 0 && (
            <>
              <h2>Metadata</h2>
              <dl class="facts">
                {Object.entries(t.metadata).map(([k, v]) => (
                  <div key={k}>
                    <dt>{k}</dt>
                    <dd class="break">{String(v)}</dd>
                  </div>
                ))}
              </dl>
            </>
          )}
        </>
      )}
    </Show>
  );
}

export function TracePage({ appId, traceId }: { appId: string; traceId: string }) {
  return (
    <ServiceFrame appId={appId} section="Trace" sub="governance">
      {() => (
        <>
          <p class="muted break">
            Trace <code>{traceId}</code> · <Link href={servicePath(appId, "/governance/traces")}>All traces</Link>
          </p>
          <TraceView appId={appId} traceId={traceId} />
        </>
      )}
    </ServiceFrame>
  );
}

// ---------------------------------------------------------------------------------------------
// Guard blocks

const GUARD_TYPES = ["pii_detection", "prompt_injection", "toxicity", "off_topic", "custom"] as const;
type GuardType = (typeof GUARD_TYPES)[number];
const BLOCK_PAGE = 50;

function GuardBlocks({ appId }: { appId: string }) {
  const workspaceId = useWorkspace();
  const { query } = useLocation();
  const guardType = GUARD_TYPES.includes(query.get("guard_type") as GuardType) ? (query.get("guard_type") as GuardType) : undefined;
  const offset = Math.max(0, Number(query.get("offset")) || 0);
  const [list] = useLoad(
    () =>
      call(
        api.GET("/workspaces/{workspaceId}/governance/apps/{appId}/guard-blocks", {
          params: { path: { workspaceId, appId }, query: { limit: BLOCK_PAGE, offset, ...(guardType ? { guard_type: guardType } : {}) } },
        }),
      ),
    [workspaceId, appId, guardType, offset],
  );
  const pageHref = (o: number) =>
    servicePath(appId, `/governance/guard-blocks${qs({ guard_type: guardType ?? "", offset: o ? String(o) : "" })}`);
  return (
    <>
      <form
        class="filters"
        role="search"
        aria-label="Filter guard blocks"
        onSubmit={(e) => {
          e.preventDefault();
          const d = new FormData(e.currentTarget);
          navigate(servicePath(appId, `/governance/guard-blocks${qs({ guard_type: text(d, "guard_type") ?? "" })}`));
        }}
      >
        <div class="field">
          <label for="block-type">Guard</label>
          <select id="block-type" name="guard_type">
            <option value="">Any guard</option>
            {GUARD_TYPES.map((g) => (
              <option key={g} value={g} selected={g === guardType}>
                {g.replace(/_/g, " ")}
              </option>
            ))}
          </select>
        </div>
        <div class="actions">
          <button type="submit">Apply filters</button>
        </div>
      </form>
      <Show value={list} what="guard blocks">
        {(l) => (
          <>
            {l.length === 0 ? (
              <Empty>No guard block{guardType ? " of this guard" : ""}.</Empty>
            ) : (
              <TableWrap label="Guard blocks">
                <thead>
                  <tr>
                    <th scope="col">Time</th>
                    <th scope="col">Guard</th>
                    <th scope="col">Phase</th>
                    <th scope="col">Action</th>
                    <th scope="col">Confidence</th>
                    <th scope="col">What matched</th>
                    <th scope="col">Trace</th>
                  </tr>
                </thead>
                <tbody>
                  {l.map((b) => (
                    <tr key={b.id}>
                      <th scope="row">
                        <Time iso={b.createdAt} />
                      </th>
                      <td>{b.guardType.replace(/_/g, " ")}</td>
                      <td>{b.phase}</td>
                      <td>
                        <Status value={b.action} />
                      </td>
                      <td>{b.confidence.toFixed(2)}</td>
                      <td>{b.blockedContent}</td>
                      <td>
                        <Link href={servicePath(appId, `/governance/traces/${encodeURIComponent(b.traceId)}`)}>
                          View trace<span class="visually-hidden"> {b.traceId}</span>
                        </Link>
                      </td>
                    </tr>
                  ))}
                </tbody>
              </TableWrap>
            )}
            <nav aria-label="Pages of guard blocks" class="pager">
              {offset > 0 && <Link href={pageHref(Math.max(0, offset - BLOCK_PAGE))}>Previous page</Link>}
              {l.length === BLOCK_PAGE && <Link href={pageHref(offset + BLOCK_PAGE)}>Next page</Link>}
            </nav>
          </>
        )}
      </Show>
    </>
  );
}

export function GuardBlocksPage({ appId }: { appId: string }) {
  return (
    <ServiceFrame appId={appId} section="Guard blocks" sub="governance">
      {() => <GuardBlocks appId={appId} />}
    </ServiceFrame>
  );
}

// ---------------------------------------------------------------------------------------------
// Observability configuration

type Config = Schemas["ObservabilityConfig"];
type Template = Schemas["GuardTemplate"];

/** A number field of the form; `name` is its path in the body, so the API's field error shows at it. */
function NumberInput(props: {
  name: string;
  label: string;
  value: number;
  step?: number;
  min?: number;
  max?: number;
  onValue: (v: number) => void;
}) {
  const f = useField(props.name);
  return (
    <div class="field">
      <label for={f.id}>{props.label}</label>
      <input
        id={f.id}
        name={props.name}
        aria-invalid={f.errors.length > 0 ? true : undefined}
        aria-describedby={f.describedBy(false)}
        type="number"
        step={props.step ?? "any"}
        min={props.min}
        max={props.max}
        value={Number.isNaN(props.value) ? "" : props.value}
        onInput={(e) => props.onValue(e.currentTarget.value === "" ? Number.NaN : Number(e.currentTarget.value))}
      />
      <FieldExtras id={f.id} errors={f.errors} />
    </div>
  );
}

function Toggle(props: { name: string; label: string; checked: boolean; onValue: (v: boolean) => void }) {
  const f = useField(props.name);
  return (
    <div class="field checkbox">
      <input id={f.id} name={props.name} type="checkbox" checked={props.checked} onChange={(e) => props.onValue(e.currentTarget.checked)} />
      <label for={f.id}>{props.label}</label>
    </div>
  );
}

function ConfigForm({ appId, initial, templates }: { appId: string; initial: Config; templates: Template[] }) {
  const workspaceId = useWorkspace();
  const [c, setC] = useState<Config>(initial);
  const [saved, setSaved] = useState("");
  const [adding, setAdding] = useState("");
  const g = c.guards;
  const e = c.evals;
  const setGuards = (patch: Partial<Config["guards"]>) => setC({ ...c, guards: { ...g, ...patch } });
  const setEvals = (patch: Partial<Config["evals"]>) => setC({ ...c, evals: { ...e, ...patch } });
  const unused = templates.filter((t) => !g.custom_templates.some((x) => x.template_id === t.id));
  const thresholdOf = (t: Template) => ({ low: 0.8, medium: 0.6, high: 0.4 })[t.config.sensitivity];

  return (
    <Form
      id="observability"
      label="Observability configuration"
      submit="Save configuration"
      onSubmit={async () => {
        setSaved("");
        const updated = await call(
          api.PUT("/workspaces/{workspaceId}/governance/apps/{appId}/observability-config", {
            params: { path: { workspaceId, appId } },
            body: {
              guards: {
                prompt_injection: g.prompt_injection,
                sensitive_data: g.sensitive_data,
                custom_templates: g.custom_templates.map((t) => ({
                  template_id: t.template_id,
                  enabled: t.enabled,
                  threshold: t.threshold,
                })),
              },
              evals: e,
            },
          }),
        );
        setC(updated);
        setSaved("Saved. Ingestion uses it at once; the service's toolkit reads it at its next start.");
      }}
      extra={<span role="status">{saved}</span>}
    >
      <fieldset class="group">
        <legend>Guards</legend>
        <fieldset class="group">
          <legend>Prompt injection</legend>
          <Toggle
            name="guards.prompt_injection.enabled"
            label="On"
            checked={g.prompt_injection.enabled}
            onValue={(v) => setGuards({ prompt_injection: { ...g.prompt_injection, enabled: v } })}
          />
          <NumberInput
            name="guards.prompt_injection.threshold"
            label="Threshold (0–1)"
            step={0.05}
            min={0}
            max={1}
            value={g.prompt_injection.threshold}
            onValue={(v) => setGuards({ prompt_injection: { ...g.prompt_injection, threshold: v } })}
          />
          <Toggle
            name="guards.prompt_injection.classifier"
            label="Also use the classifier"
            checked={g.prompt_injection.classifier}
            onValue={(v) => setGuards({ prompt_injection: { ...g.prompt_injection, classifier: v } })}
          />
          <Toggle
            name="guards.prompt_injection.classifier_on_ingestion"
            label="Classifier on ingestion too, for traces sent without a wrapper (a model run per prompt)"
            checked={g.prompt_injection.classifier_on_ingestion}
            onValue={(v) => setGuards({ prompt_injection: { ...g.prompt_injection, classifier_on_ingestion: v } })}
          />
        </fieldset>
        <fieldset class="group">
          <legend>Sensitive data</legend>
          <Toggle
            name="guards.sensitive_data.enabled"
            label="On"
            checked={g.sensitive_data.enabled}
            onValue={(v) => setGuards({ sensitive_data: { ...g.sensitive_data, enabled: v } })}
          />
          <NumberInput
            name="guards.sensitive_data.threshold"
            label="Threshold (0–1)"
            step={0.05}
            min={0}
            max={1}
            value={g.sensitive_data.threshold}
            onValue={(v) => setGuards({ sensitive_data: { ...g.sensitive_data, threshold: v } })}
          />
        </fieldset>
        <fieldset class="group">
          <legend>Guard templates</legend>
          {g.custom_templates.length === 0 && <Empty>No template is applied.</Empty>}
          <ul class="plain-list">
            {g.custom_templates.map((t, i) => {
              const set = (patch: Partial<(typeof g.custom_templates)[number]>) =>
                setGuards({ custom_templates: g.custom_templates.map((x, j) => (j === i ? { ...x, ...patch } : x)) });
              return (
                <li key={t.template_id} class="row">
                  <strong>{t.template_name || t.template_id}</strong>
                  <Toggle
                    name={`guards.custom_templates.${i}.enabled`}
                    label={`${t.template_name} on`}
                    checked={t.enabled}
                    onValue={(v) => set({ enabled: v })}
                  />
                  <NumberInput
                    name={`guards.custom_templates.${i}.threshold`}
                    label={`${t.template_name} threshold`}
                    step={0.05}
                    min={0}
                    max={1}
                    value={t.threshold}
                    onValue={(v) => set({ threshold: v })}
                  />
                  <button type="button" onClick={() => setGuards({ custom_templates: g.custom_templates.filter((_, j) => j !== i) })}>
                    Remove {t.template_name}
                  </button>
                </li>
              );
            })}
          </ul>
          {unused.length > 0 && (
            <div class="row">
              <div class="field">
                <label for="add-template">Template to apply</label>
                <select id="add-template" value={adding} onChange={(ev) => setAdding(ev.currentTarget.value)}>
                  <option value="">Choose a template</option>
                  {unused.map((t) => (
                    <option key={t.id} value={t.id}>
                      {t.name} ({t.guardType.replace(/_/g, " ")})
                    </option>
                  ))}
                </select>
              </div>
              <button
                type="button"
                disabled={!adding}
                onClick={() => {
                  const t = templates.find((x) => x.id === adding);
                  if (!t) return;
                  setGuards({
                    custom_templates: [
                      ...g.custom_templates,
                      { template_id: t.id, template_name: t.name, enabled: true, threshold: thresholdOf(t) },
                    ],
                  });
                  setAdding("");
                }}
              >
                Apply template
              </button>
            </div>
          )}
        </fieldset>
      </fieldset>
      <fieldset class="group">
        <legend>Evals</legend>
        <fieldset class="group">
          <legend>Latency</legend>
          <Toggle
            name="evals.latency.enabled"
            label="On"
            checked={e.latency.enabled}
            onValue={(v) => setEvals({ latency: { ...e.latency, enabled: v } })}
          />
          <NumberInput
            name="evals.latency.threshold_ms"
            label="Passes at or below (ms)"
            step={1}
            min={0}
            value={e.latency.threshold_ms}
            onValue={(v) => setEvals({ latency: { ...e.latency, threshold_ms: v } })}
          />
          <NumberInput
            name="evals.latency.target_ms"
            label="Scores 1 at or below (ms)"
            step={1}
            min={0}
            value={e.latency.target_ms}
            onValue={(v) => setEvals({ latency: { ...e.latency, target_ms: v } })}
          />
          <NumberInput
            name="evals.latency.max_ms"
            label="Scores 0 at or above (ms)"
            step={1}
            min={0}
            value={e.latency.max_ms}
            onValue={(v) => setEvals({ latency: { ...e.latency, max_ms: v } })}
          />
        </fieldset>
        {(["relevance", "safety"] as const).map((k) => (
          <fieldset class="group" key={k}>
            <legend>{k === "relevance" ? "Relevance" : "Safety"}</legend>
            <Toggle
              name={`evals.${k}.enabled`}
              label="On"
              checked={e[k].enabled}
              onValue={(v) => setEvals({ [k]: { ...e[k], enabled: v } })}
            />
            <NumberInput
              name={`evals.${k}.threshold`}
              label="Threshold (0–1)"
              step={0.05}
              min={0}
              max={1}
              value={e[k].threshold}
              onValue={(v) => setEvals({ [k]: { ...e[k], threshold: v } })}
            />
          </fieldset>
        ))}
        <fieldset class="group">
          <legend>Policy compliance</legend>
          <Toggle
            name="evals.policy_compliance.enabled"
            label="On"
            checked={e.policy_compliance.enabled}
            onValue={(v) => setEvals({ policy_compliance: { enabled: v } })}
          />
        </fieldset>
      </fieldset>
    </Form>
  );
}

function Observability({ appId }: { appId: string }) {
  const workspaceId = useWorkspace();
  const [loaded] = useLoad(
    () =>
      Promise.all([
        call(
          api.GET("/workspaces/{workspaceId}/governance/apps/{appId}/observability-config", { params: { path: { workspaceId, appId } } }),
        ),
        call(api.GET("/governance/guard-templates")),
      ]),
    [workspaceId, appId],
  );
  return (
    <>
      <p class="hint">
        Guards check prompts and responses; evals score each call. Templates come from{" "}
        <Link href={href("/guard-templates")}>Guard templates</Link>.
      </p>
      <Show value={loaded} what="the configuration">
        {([config, templates]) => <ConfigForm appId={appId} initial={config} templates={templates} />}
      </Show>
    </>
  );
}

export function ObservabilityPage({ appId }: { appId: string }) {
  return (
    <ServiceFrame appId={appId} section="Observability configuration" sub="governance">
      {() => <Observability appId={appId} />}
    </ServiceFrame>
  );
}

// ---------------------------------------------------------------------------------------------
// Audit

function AuditResult({ value }: { value: Loaded<Schemas["AuditVerification"]> }) {
  return (
    <Show value={value} what="the verification">
      {(a) => (
        <>
          <p class={a.valid ? "verdict good" : "verdict bad"} role="status">
            {a.valid ? `The audit chain is intact: ${count(a.entries)} entries verified.` : "The audit chain is broken."}
          </p>
          <dl class="facts">
            <div>
              <dt>Entries</dt>
              <dd>{count(a.entries)}</dd>
            </div>
            <div>
              <dt>Head hash</dt>
              <dd class="break">
                <code>{a.headHash ?? "—"}</code>
              </dd>
            </div>
            {a.firstBrokenLink && (
              <div>
                <dt>First broken link</dt>
                <dd>
                  Entry {a.firstBrokenLink.sequence}
                  {a.firstBrokenLink.traceId ? ` (trace ${a.firstBrokenLink.traceId})` : ""}: {a.firstBrokenLink.reason}
                </dd>
              </div>
            )}
          </dl>
          <p class="hint">Record the head hash elsewhere to detect a rewrite of the whole chain.</p>
          <h2>Restarts</h2>
          {a.restarts.length === 0 ? (
            <Empty>The chain never began again.</Empty>
          ) : (
            <TableWrap label="Restarts of the audit chain">
              <thead>
                <tr>
                  <th scope="col">When</th>
                  <th scope="col">Reason</th>
                  <th scope="col">By</th>
                  <th scope="col">Entries before</th>
                  <th scope="col">Head hash before</th>
                </tr>
              </thead>
              <tbody>
                {a.restarts.map((r) => (
                  <tr key={r.at}>
                    <th scope="row">
                      <Time iso={r.at} />
                    </th>
                    <td>{r.reason.replace(/_/g, " ")}</td>
                    <td>{r.actor}</td>
                    <td>{count(r.previousEntries)}</td>
                    <td class="break">
                      <code>{r.previousHeadHash ?? "—"}</code>
                    </td>
                  </tr>
                ))}
              </tbody>
            </TableWrap>
          )}
        </>
      )}
    </Show>
  );
}

function Audit({ appId }: { appId: string }) {
  const workspaceId = useWorkspace();
  const [result, reload] = useLoad(
    () => call(api.GET("/workspaces/{workspaceId}/governance/apps/{appId}/audit/verify", { params: { path: { workspaceId, appId } } })),
    [workspaceId, appId],
  );
  return (
    <>
      <p class="hint">Every trace is chained to the one before it by a hash; verifying walks the whole chain.</p>
      <ActionButton onClick={reload}>Verify again</ActionButton>
      <AuditResult value={result} />
    </>
  );
}

export function AuditPage({ appId }: { appId: string }) {
  return (
    <ServiceFrame appId={appId} section="Audit" sub="governance">
      {() => <Audit appId={appId} />}
    </ServiceFrame>
  );
}
