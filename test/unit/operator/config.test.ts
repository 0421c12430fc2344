// The operator's configuration: workload placement comes as JSON in two variables, checked.
import test from "ava";
import { loadOperatorConfig } from "../../../operator/config.ts";

test("workload placement: a nodeSelector object and a tolerations array", (t) => {
  const cfg = loadOperatorConfig({
    BERTH_WORKLOAD_NODE_SELECTOR: '{"berth.dev/node":"real"}',
    BERTH_WORKLOAD_TOLERATIONS: '[{"key":"berth.dev/real-node","operator":"Exists","effect":"NoSchedule"}]',
  });
  t.deepEqual(cfg.BERTH_WORKLOAD_NODE_SELECTOR, { "berth.dev/node": "real" });
  t.deepEqual(cfg.BERTH_WORKLOAD_TOLERATIONS, [{ key: "berth.dev/real-node", operator: "Exists", effect: "NoSchedule" }]);
  const none = loadOperatorConfig({});
  t.is(none.BERTH_WORKLOAD_NODE_SELECTOR, undefined);
  t.is(none.BERTH_WORKLOAD_TOLERATIONS, undefined);
});

const refused: [string, Record<string, string>, RegExp][] = [
  ["a selector that is not JSON", { BERTH_WORKLOAD_NODE_SELECTOR: "berth.dev/node=real" }, /BERTH_WORKLOAD_NODE_SELECTOR: must be JSON/],
  ["a selector key that is no label key", { BERTH_WORKLOAD_NODE_SELECTOR: '{"no spaces allowed":"x"}' }, /BERTH_WORKLOAD_NODE_SELECTOR/],
  [
    "a toleration with an unknown effect",
    { BERTH_WORKLOAD_TOLERATIONS: '[{"key":"a","effect":"Sometimes"}]' },
    /BERTH_WORKLOAD_TOLERATIONS/,
  ],
  ["a toleration with an unknown field", { BERTH_WORKLOAD_TOLERATIONS: '[{"key":"a","colour":"red"}]' }, /BERTH_WORKLOAD_TOLERATIONS/],
];
for (const [what, env, message] of refused) {
  test(`the configuration refuses ${what}`, (t) => {
    t.throws(() => loadOperatorConfig(env), { message });
  });
}

test("the build cache: buildkitd's own by default, or the registry; nothing else", (t) => {
  t.is(loadOperatorConfig({}).BERTH_BUILD_CACHE, "local");
  t.is(loadOperatorConfig({ BERTH_BUILD_CACHE: "registry" }).BERTH_BUILD_CACHE, "registry");
  t.throws(() => loadOperatorConfig({ BERTH_BUILD_CACHE: "s3" }), { message: /BERTH_BUILD_CACHE/ });
});
