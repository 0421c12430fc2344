// What the requests of an app key share before the engine runs (api/governance/ingest/app-scope.ts),
// for ingestion and guard checks alike: the key's project, its active store, and the engine input
// of its config version, read once per version for the key's own app.
import test from "ava";
import type { AppPrincipal } from "../../../api/http/route.ts";
import { ConflictError, ForbiddenError } from "../../../api/errors.ts";
import { activeStore, assertKeyProject, EngineInputs } from "../../../api/governance/ingest/app-scope.ts";
import { defaultObservabilityConfig, engineInput, type ObservabilityConfig } from "../../../api/governance/configs/observability.ts";

const app = (over: Partial<AppPrincipal> = {}): AppPrincipal => ({
  kind: "app",
  workspaceId: "wsaaaaaaaaaa",
  appId: "shop",
  keyId: "k1",
  store: { schema: "gov_wsaaaaaaaaaa_shop", role: "govr_wsaaaaaaaaaa_shop", active: true, configVersion: 7 },
  ...over,
});

test("a project other than the key's is 403 project_mismatch; the key's own, or none, passes", (t) => {
  t.notThrows(() => assertKeyProject(app(), [], "the request", "Own only."));
  t.notThrows(() => assertKeyProject(app(), ["shop", "shop"], "a trace", "Own only."));
  const err = t.throws(() => assertKeyProject(app(), ["shop", "billing"], "a trace", "Traces go to the key's own project only."));
  t.true(err instanceof ForbiddenError);
  t.like(err, {
    status: 403,
    code: "project_mismatch",
    message: "This key belongs to project shop; a trace names project billing. Traces go to the key's own project only.",
  });
});

test("the key's store must be active; its config version is the one the key check read", (t) => {
  t.deepEqual(activeStore(app()), { schema: "gov_wsaaaaaaaaaa_shop", role: "govr_wsaaaaaaaaaa_shop", version: 7 });
  for (const store of [null, { schema: "s", role: "r", active: false, configVersion: 1 }]) {
    const err = t.throws(() => activeStore(app({ store })));
    t.true(err instanceof ConflictError);
    t.like(err, { code: "governance_not_provisioned" });
  }
});

function configsAt(versions: Record<number, ObservabilityConfig>) {
  const reads: [string, string, number][] = [];
  return {
    reads,
    atVersion: (workspaceId: string, appId: string, version: number) => {
      reads.push([workspaceId, appId, version]);
      const config = versions[version];
      return Promise.resolve(config ? { config, templates: {} } : undefined);
    },
  };
}

test("engine inputs: the app's own config at the version, read once per version; 0 is the defaults; a version gone is 409", async (t) => {
  const strict = defaultObservabilityConfig();
  strict.guards.prompt_injection.threshold = 0.9;
  const configs = configsAt({ 7: strict });
  const inputs = new EngineInputs(configs);
  const first = await inputs.of(app(), 7);
  t.deepEqual(first, engineInput(strict, {}));
  t.is(await inputs.of(app(), 7), first, "cached by version");
  t.deepEqual(configs.reads, [["wsaaaaaaaaaa", "shop", 7]], "read once, for the key's own workspace and app");
  t.deepEqual(await inputs.of(app({ store: null }), 0), engineInput(defaultObservabilityConfig(), {}));
  t.is(configs.reads.length, 1, "the defaults need no read");
  const gone = await t.throwsAsync(inputs.of(app(), 8));
  t.like(gone, { code: "config_changed", status: 409 });
});
