// The operator's configuration: workload placement comes as JSON in two variables, checked; a CA
// for the API goes with an https:// API URL only; builds' settings.
import test from "ava";
import { loadOperatorConfig } from "../../../operator/config.ts";
import { buildSettings } from "../../../operator/release/controller.ts";

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

test("the API's CA: with BERTH_OPERATOR_API_CA_FILE the API URL must be https:// and the forward-auth address given", (t) => {
  const tls = {
    BERTH_OPERATOR_API_URL: "https://berth-api.berth-system.svc:8443",
    BERTH_OPERATOR_API_CA_FILE: "/var/run/secrets/berth-api-ca/ca.crt",
    BERTH_FORWARD_AUTH_URL: "http://berth-api.berth-system.svc:80/api/v1/forward-auth",
  };
  t.like(loadOperatorConfig(tls), tls);
  t.throws(() => loadOperatorConfig({ ...tls, BERTH_OPERATOR_API_URL: "http://berth-api.berth-system.svc:80" }), {
    message: /BERTH_OPERATOR_API_CA_FILE is set: BERTH_OPERATOR_API_URL must be an https:\/\/ URL/,
  });
  t.throws(
    () =>
      loadOperatorConfig({
        BERTH_OPERATOR_API_CA_FILE: tls.BERTH_OPERATOR_API_CA_FILE,
        BERTH_FORWARD_AUTH_URL: tls.BERTH_FORWARD_AUTH_URL,
      }),
    {
      message: /must be an https:\/\/ URL/,
    },
  );
  t.throws(() => loadOperatorConfig({ ...tls, BERTH_FORWARD_AUTH_URL: undefined }), { message: /BERTH_FORWARD_AUTH_URL must be set too/ });
  // without a CA: the system's trust store for https, and plain http as before
  t.notThrows(() => loadOperatorConfig({ BERTH_OPERATOR_API_URL: "https://berth.example.com" }));
  t.notThrows(() => loadOperatorConfig({ BERTH_OPERATOR_API_URL: "http://berth-api.berth-system.svc:80" }));
  t.throws(() => loadOperatorConfig({ BERTH_OPERATOR_API_URL: "ftp://berth-api.berth-system.svc" }), { message: /BERTH_OPERATOR_API_URL/ });
});

test("mutual TLS to buildkitd: off by default; on, build settings name Berth's namespace (where the client certificate's Secret is) and the server name", (t) => {
  const builds = { BERTH_BUILDER_IMAGE: "reg/b:1", BERTH_BUILDKIT_HOST: "tcp://10.0.0.1:1234", BERTH_BUILD_REGISTRY: "reg:5000" };
  t.is(buildSettings(loadOperatorConfig(builds))?.tls, undefined);
  t.deepEqual(buildSettings(loadOperatorConfig({ ...builds, BERTH_BUILDKIT_TLS: "true" }))?.tls, {
    secretNamespace: "berth-system",
    serverName: undefined,
  });
  t.deepEqual(
    buildSettings(
      loadOperatorConfig({
        ...builds,
        BERTH_BUILDKIT_TLS: "true",
        BERTH_NAMESPACE: "platform",
        BERTH_BUILDKIT_TLS_SERVER_NAME: "buildkitd.builds.svc",
      }),
    )?.tls,
    { secretNamespace: "platform", serverName: "buildkitd.builds.svc" },
  );
  t.throws(() => loadOperatorConfig({ BERTH_BUILDKIT_TLS_SERVER_NAME: "a b" }), { message: /BERTH_BUILDKIT_TLS_SERVER_NAME/ });
  t.throws(() => loadOperatorConfig({ BERTH_NAMESPACE: "Berth_System" }), { message: /BERTH_NAMESPACE/ });
});
