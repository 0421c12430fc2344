import test from "ava";
import { pino } from "pino";
import { MetricsApiUsageReader, sumUsage } from "../../../api/apps/metrics.ts";
import { UnknownKindError } from "../../../kube/objects.ts";
import { KubeApiError } from "../../../kube/transport.ts";

/** A logger whose warnings the test reads. */
function recording() {
  const lines: Record<string, unknown>[] = [];
  return {
    lines,
    log: pino(
      { level: "warn" },
      {
        write: (l: string) => {
          lines.push(JSON.parse(l) as Record<string, unknown>);
        },
      },
    ),
  };
}

test("usage is the sum over the pods' containers, in millicores and MiB", (t) => {
  t.deepEqual(
    sumUsage([
      { containers: [{ usage: { cpu: "12345678n", memory: "10Mi" } }, { usage: { cpu: "2m", memory: "512Ki" } }] },
      { containers: [{ usage: { cpu: "100m", memory: "20971520" } }] },
    ]),
    { cpuMillicores: 114.3, memoryMi: 30.5 },
  );
  t.deepEqual(sumUsage([]), { cpuMillicores: 0, memoryMi: 0 });
});

test("no metrics API (no such kind, 404, 503) or no pods in it is unknown (null), never zero, and no warning", async (t) => {
  const r = recording();
  for (const err of [
    new UnknownKindError("the API server has no kind PodMetrics in metrics.k8s.io/v1beta1"),
    new KubeApiError(404, {}, "GET"),
    new KubeApiError(503, {}, "GET"),
  ]) {
    t.is(await new MetricsApiUsageReader({ list: () => Promise.reject(err) }, r.log).usage("ns", "shop"), null);
  }
  t.is(await new MetricsApiUsageReader({ list: () => Promise.resolve({ items: [] }) }, r.log).usage("ns", "shop"), null);
  t.deepEqual(r.lines, []);
});

test("a refused call (a missing grant) also reads as unknown, but is logged", async (t) => {
  const r = recording();
  t.is(
    await new MetricsApiUsageReader({ list: () => Promise.reject(new KubeApiError(403, { message: "forbidden" }, "GET")) }, r.log).usage(
      "ns",
      "shop",
    ),
    null,
  );
  t.is(r.lines.length, 1);
  t.like(r.lines[0], { msg: "could not read the resource metrics API", namespace: "ns", app: "shop" });
});

test("an absent metrics API is remembered for a minute: no request per call until then", async (t) => {
  let calls = 0,
    clock = 0;
  const reader = new MetricsApiUsageReader(
    {
      list: () => {
        calls++;
        return Promise.reject(new UnknownKindError("no kind"));
      },
    },
    recording().log,
    () => clock,
  );
  await reader.usage("ns", "a");
  await reader.usage("ns", "b");
  t.is(calls, 1);
  clock += 60_001;
  await reader.usage("ns", "a");
  t.is(calls, 2, "asked again once the minute is over");
});
