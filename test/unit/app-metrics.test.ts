import test from "ava";
import { MetricsApiUsageReader, sumUsage } from "../../api/apps/metrics.ts";

test("usage is the sum over the pods' containers, in millicores and MiB", (t) => {
  t.deepEqual(sumUsage([
    { containers: [{ usage: { cpu: "12345678n", memory: "10Mi" } }, { usage: { cpu: "2m", memory: "512Ki" } }] },
    { containers: [{ usage: { cpu: "100m", memory: "20971520" } }] },
  ]), { cpuMillicores: 114.3, memoryMi: 30.5 });
  t.deepEqual(sumUsage([]), { cpuMillicores: 0, memoryMi: 0 });
});

test("no metrics API, or no pods in it, is unknown (null), never zero", async (t) => {
  const failing = new MetricsApiUsageReader({ list: () => Promise.reject(new Error("the API server has no kind PodMetrics in metrics.k8s.io/v1beta1")) });
  t.is(await failing.usage("ns", "shop"), null);
  const empty = new MetricsApiUsageReader({ list: () => Promise.resolve({ items: [] }) });
  t.is(await empty.usage("ns", "shop"), null);
});
