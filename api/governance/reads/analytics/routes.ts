// The analytics endpoints (docs/spec.md part 4, governance service-scoped). docs/analytics.md
// has the decisions: ranges [start, end), defaults, bucket alignment, limits.
import { defineRoute, type RouteDef } from "../../../http/route.ts";
import { AppParams } from "../../schemas.ts";
import type { Governance } from "../../service.ts";
import { AnalyticsService } from "./service.ts";
import {
  BUCKET_ORIGIN,
  DEFAULT_BUCKETS,
  EvalDistribution,
  MAX_BUCKETS,
  RangeQuery,
  SCORE_BUCKETS,
  Summary,
  Timeseries,
  TimeseriesQuery,
  TokenUsage,
} from "./schemas.ts";

const tags = ["Governance analytics"];
const APP = "/workspaces/:workspaceId/governance/apps/:appId/analytics";
const RANGE =
  "The range is [start, end): start inclusive, end exclusive, by each call's time (the trace's timestamp). Default end now, start 7 days before end. start must be before end (422 otherwise).";

export interface AnalyticsDeps {
  /** only used inside handlers (the OpenAPI generator passes a stand-in) */
  governance: Governance;
  now?: () => number;
}

export function analyticsRoutes(deps: AnalyticsDeps): RouteDef[] {
  const a = new AnalyticsService(deps.governance, deps.now ? { now: deps.now } : {});
  return [
    defineRoute({
      method: "get",
      path: `${APP}/summary`,
      operationId: "getAnalyticsSummary",
      tags,
      auth: "workspace",
      summary: "Calls, tokens, mean latency, cost, guard blocks and error rate of an app over a range",
      description: RANGE,
      params: AppParams,
      query: RangeQuery,
      responses: { 200: Summary, 409: null },
      handler: async ({ params, query }) => ({ status: 200, body: await a.summary(params.workspaceId, params.appId, query) }),
    }),
    defineRoute({
      method: "get",
      path: `${APP}/timeseries`,
      operationId: "getAnalyticsTimeseries",
      tags,
      auth: "workspace",
      summary: "One metric of an app per time bucket",
      description:
        `Buckets are aligned in UTC to ${BUCKET_ORIGIN} (a Monday): 1h on the hour, 6h at 00/06/12/18 UTC, 1d at midnight UTC, 7d on Mondays. ` +
        `labels are bucket starts; the first is start floored to the interval, the last the bucket holding the instant before end; a trace exactly on a boundary counts in the later bucket; buckets without calls are 0. ` +
        `Only calls in [start, end) count, so the first and last buckets may be partial. Default end now and ${DEFAULT_BUCKETS} buckets (start = the start of the bucket ${DEFAULT_BUCKETS - 1} intervals before the current one). ` +
        `At most ${MAX_BUCKETS} buckets (422 otherwise). avg_latency is in milliseconds, total_cost in USD, error_rate a fraction (0 in an empty bucket).`,
      params: AppParams,
      query: TimeseriesQuery,
      responses: { 200: Timeseries, 409: null },
      handler: async ({ params, query }) => ({ status: 200, body: await a.timeseries(params.workspaceId, params.appId, query) }),
    }),
    defineRoute({
      method: "get",
      path: `${APP}/token-usage`,
      operationId: "getAnalyticsTokenUsage",
      tags,
      auth: "workspace",
      summary: "Prompt, completion and total tokens of an app over a range",
      description: RANGE,
      params: AppParams,
      query: RangeQuery,
      responses: { 200: TokenUsage, 409: null },
      handler: async ({ params, query }) => ({ status: 200, body: await a.tokenUsage(params.workspaceId, params.appId, query) }),
    }),
    defineRoute({
      method: "get",
      path: `${APP}/eval-distribution`,
      operationId: "getAnalyticsEvalDistribution",
      tags,
      auth: "workspace",
      summary: "Score distribution of an app's evals over a range, per eval type",
      description: `${RANGE} An eval counts when the call it scored is in the range. Scores fall in ${SCORE_BUCKETS} equal-width buckets over [0, 1] ([lower, upper), the last bucket closed at 1); per eval type: count, mean score, pass rate and the count per bucket.`,
      params: AppParams,
      query: RangeQuery,
      responses: { 200: EvalDistribution, 409: null },
      handler: async ({ params, query }) => ({ status: 200, body: await a.evalDistribution(params.workspaceId, params.appId, query) }),
    }),
  ];
}
