// A service's environment variables, the pure parts (api/apps/env.ts, api/apps/schemas.ts): the
// request schemas (names, reserved names, values), the limits of a whole service, what a Secret
// holds and how it is answered (secret values never), and the merge patch of a change. Against the
// real API server: test/integration/api-env.test.ts.
import test from "ava";
import { fieldErrorsFromZod } from "../../../api/errors.ts";
import { ENV_LIMITS, EnvName, SetEnvVarBody, UpdateEnvBody } from "../../../api/apps/schemas.ts";
import {
  applyEnvChange,
  buildEnvSecret,
  changeOf,
  dataPatch,
  EnvLimitError,
  envList,
  EnvService,
  varsOfSecret,
  type EnvVarState,
} from "../../../api/apps/env.ts";
import type { AppObject } from "../../../api/apps/service.ts";
import type { KubeObject, ObjectClient } from "../../../kube/objects.ts";
import { KubeApiError } from "../../../kube/transport.ts";
import { ENV_PLAIN_ANNOTATION } from "../../../crds/app.ts";

const vars = (o: Record<string, [string, boolean]>) =>
  new Map<string, EnvVarState>(Object.entries(o).map(([k, [value, secret]]) => [k, { value, secret }]));
const errors = (schema: typeof UpdateEnvBody | typeof SetEnvVarBody, input: unknown) => {
  const r = schema.safeParse(input);
  return r.success ? [] : fieldErrorsFromZod(r.error, "body");
};

test("names: POSIX-style, bounded; the operator's names and BERTH_* are refused with a reason", (t) => {
  for (const ok of ["A", "_", "a_b", "DATABASE_URL", "x1", "_9", "N".repeat(ENV_LIMITS.maxNameLength)])
    t.true(EnvName.safeParse(ok).success, ok);
  for (const bad of ["", "1A", "A-B", "A B", "É", "A.B", "N".repeat(ENV_LIMITS.maxNameLength + 1)])
    t.false(EnvName.safeParse(bad).success, bad);
  for (const reserved of ["PORT", "GOVDB_CONNECTION", "GOVERNANCE_PROJECT", "BERTH_GOVERNANCE", "BERTH_ANYTHING"]) {
    const r = EnvName.safeParse(reserved);
    t.false(r.success, reserved);
    t.regex(r.error!.issues[0]!.message, /cannot be set or overridden|reserved for Berth/);
  }
  t.true(EnvName.safeParse("port").success, "names are case-sensitive: only PORT is the operator's");
});

test("PATCH body: every offending name and value is reported at its own field, never with the value", (t) => {
  const secretish = "s3cr3t-value-that-must-not-echo";
  const e = errors(UpdateEnvBody, {
    set: {
      "bad-name": secretish,
      GOVDB_CONNECTION: secretish,
      OK: { value: secretish, extra: 1 },
      BIG: "x".repeat(ENV_LIMITS.maxValueBytes + 1),
      NUL: "a\u0000b",
    },
    unset: ["PORT", "1X"],
  });
  const fields = e.map((x) => x.field).sort();
  t.deepEqual(
    fields,
    [
      "body.set.BIG",
      "body.set.GOVDB_CONNECTION",
      "body.set.NUL",
      "body.set.OK.extra",
      "body.set.bad-name",
      "body.unset[0]",
      "body.unset[1]",
    ].sort(),
  );
  t.regex(e.find((x) => x.field === "body.set.GOVDB_CONNECTION")!.message, /set by Berth/);
  t.regex(e.find((x) => x.field === "body.set.bad-name")!.message, /POSIX-style/);
  t.false(JSON.stringify(e).includes(secretish));
});

test("PATCH body: a value's bound is in UTF-8 bytes; a name both set and unset is refused; empty values are values", (t) => {
  const euro = "€".repeat(Math.floor(ENV_LIMITS.maxValueBytes / 3)); // 3 bytes each
  t.deepEqual(errors(UpdateEnvBody, { set: { A: euro } }), []);
  t.is(errors(UpdateEnvBody, { set: { A: euro + "€" } })[0]?.field, "body.set.A");
  t.deepEqual(
    errors(UpdateEnvBody, { set: { A: "x" }, unset: ["A"] }).map((x) => x.field),
    ["body.unset[0]"],
  );
  t.deepEqual(errors(UpdateEnvBody, { set: { A: "" } }), []);
  t.deepEqual(errors(UpdateEnvBody, {}), [], "nothing to do is not an error");
  t.deepEqual(errors(SetEnvVarBody, { value: "1", secret: false }), []);
  t.deepEqual(
    errors(SetEnvVarBody, { secret: false }).map((x) => x.field),
    ["body.value"],
  );
});

test("a change: set and unset at once; an omitted secret flag keeps the current one, a new variable is secret", (t) => {
  const current = vars({ LOG_LEVEL: ["info", false], TOKEN: ["t1", true], OLD: ["x", true] });
  const next = applyEnvChange(
    current,
    changeOf({
      set: { LOG_LEVEL: "debug", TOKEN: { value: "t2" }, NEW: "n", SHOWN: { value: "s", secret: false } },
      unset: ["OLD", "NEVER_SET"],
    }),
  );
  t.deepEqual([...next].sort(), [
    ["LOG_LEVEL", { value: "debug", secret: false }],
    ["NEW", { value: "n", secret: true }],
    ["SHOWN", { value: "s", secret: false }],
    ["TOKEN", { value: "t2", secret: true }],
  ]);
  t.is(current.get("OLD")?.value, "x", "the current state is not changed in place");
  t.false(
    applyEnvChange(current, changeOf({ set: { TOKEN: { value: "t1", secret: false } } })).get("TOKEN")!.secret,
    "the flag can be changed",
  );
});

test("limits of a whole service: the number of variables and the total bytes, with a 422 env_limit_exceeded", (t) => {
  const limits = { ...ENV_LIMITS, maxVariables: 3, maxTotalBytes: 20 };
  const three = vars({ A: ["1", true], B: ["2", true], C: ["3", true] });
  const tooMany = t.throws(() => applyEnvChange(three, changeOf({ set: { D: "4" } }), limits), { instanceOf: EnvLimitError });
  t.is(tooMany.status, 422);
  t.is(tooMany.code, "env_limit_exceeded");
  t.deepEqual(tooMany.details, { limit: 3, count: 4 });
  t.is(applyEnvChange(three, changeOf({ set: { D: "4" }, unset: ["A"] }), limits).size, 3, "an unset in the same change makes room");
  const big = t.throws(() => applyEnvChange(three, changeOf({ set: { A: "x".repeat(16) } }), limits), { instanceOf: EnvLimitError });
  t.deepEqual(big.details, { limitBytes: 20, bytes: 1 + 16 + 2 + 2 });
  // The real bounds fit a Secret (1 MiB) with room to spare.
  t.true(ENV_LIMITS.maxTotalBytes * 2 < 1024 * 1024);
});

test("the Secret: values base64, plain names in an annotation, owned by the App and labelled for the operator; read back as written", (t) => {
  const v = vars({ GREETING: ["hej", false], TOKEN: ["é✓", true] });
  const s = buildEnvSecret({ name: "shop", namespace: "ws", uid: "u-1" }, v);
  t.is(s.metadata.name, "shop-env");
  t.deepEqual(s.metadata.ownerReferences, [{ apiVersion: "berth.dev/v1alpha1", kind: "App", name: "shop", uid: "u-1", controller: true }]);
  t.like(s.metadata.labels, { "app.kubernetes.io/managed-by": "berth", "berth.dev/app": "shop" });
  t.is(s.metadata.annotations?.[ENV_PLAIN_ANNOTATION], '["GREETING"]');
  t.is(Buffer.from(s.data!.TOKEN!, "base64").toString("utf8"), "é✓");
  t.deepEqual(varsOfSecret(s), v);
  t.deepEqual(varsOfSecret(undefined), new Map());
});

test("answers never carry a secret value; an unreadable plain annotation makes every variable secret", (t) => {
  const s = buildEnvSecret({ name: "shop", namespace: "ws", uid: "u-1" }, vars({ B_SHOWN: ["visible", false], A_TOKEN: ["hidden", true] }));
  t.deepEqual(envList(varsOfSecret(s)), {
    data: [
      { name: "A_TOKEN", value: null, secret: true },
      { name: "B_SHOWN", value: "visible", secret: false },
    ],
  });
  for (const broken of ["not json", '{"B_SHOWN":true}', "[1]"]) {
    const hand = { ...s, metadata: { ...s.metadata, annotations: { [ENV_PLAIN_ANNOTATION]: broken } } };
    t.false(JSON.stringify(envList(varsOfSecret(hand))).includes("visible"), broken);
  }
});

test("the merge patch of a change: changed values, null for removed names, nothing for the unchanged", (t) => {
  const before = vars({ A: ["1", true], B: ["2", true], C: ["3", false] });
  const after = vars({ A: ["1", false], B: ["two", true], D: ["4", true] });
  t.deepEqual(dataPatch(before, after), { B: Buffer.from("two").toString("base64"), C: null, D: Buffer.from("4").toString("base64") });
});

/** An API server of one Secret: merge patches with a resourceVersion precondition, creates that fail when it exists. */
function fakeKube(
  opts: { beforeWrite?: (store: { secret: (KubeObject & { data?: Record<string, string> }) | undefined; rv: number }) => void } = {},
) {
  const store: { secret: (KubeObject & { data?: Record<string, string> }) | undefined; rv: number } = { secret: undefined, rv: 1 };
  let writes = 0;
  const conflict = () => new KubeApiError(409, { kind: "Status", code: 409, reason: "Conflict" }, "conflict");
  const kube = {
    get: () => Promise.resolve(store.secret ? structuredClone(store.secret) : undefined),
    create: (o: KubeObject & { data?: Record<string, string> }) => {
      if (writes++ === 0) opts.beforeWrite?.(store);
      if (store.secret) return Promise.reject(conflict());
      store.secret = { ...o, metadata: { ...o.metadata, resourceVersion: String(++store.rv) } };
      return Promise.resolve(store.secret);
    },
    mergePatch: (
      _ref: unknown,
      patch: { metadata: { resourceVersion: string; annotations: Record<string, string> }; data: Record<string, string | null> },
    ) => {
      if (writes++ === 0) opts.beforeWrite?.(store);
      const s = store.secret!;
      if (patch.metadata.resourceVersion !== s.metadata.resourceVersion) return Promise.reject(conflict());
      const data = { ...s.data };
      for (const [k, v] of Object.entries(patch.data)) {
        if (v === null) delete data[k];
        else data[k] = v;
      }
      store.secret = {
        ...s,
        data,
        metadata: {
          ...s.metadata,
          annotations: { ...s.metadata.annotations, ...patch.metadata.annotations },
          resourceVersion: String(++store.rv),
        },
      };
      return Promise.resolve(store.secret);
    },
  };
  const app = {
    apiVersion: "berth.dev/v1alpha1",
    kind: "App",
    metadata: { name: "shop", namespace: "ws", uid: "u-1" },
    spec: {},
  } as AppObject;
  return {
    store,
    service: new EnvService({
      apps: { load: () => Promise.resolve(app) },
      kube: kube as unknown as Pick<ObjectClient, "get" | "create" | "mergePatch">,
    }),
  };
}

test("a writer that came in between (another replica, kubectl) is not lost: the conflict is retried on a fresh read", async (t) => {
  const { store, service } = fakeKube();
  await service.update("ws", "shop", { set: { A: "1" } });
  const other = fakeKube({
    beforeWrite: (s) => {
      // Someone else adds B between this write's read and its patch.
      s.secret = {
        ...s.secret!,
        data: { ...s.secret!.data, B: Buffer.from("2").toString("base64") },
        metadata: { ...s.secret!.metadata, resourceVersion: String(++s.rv) },
      };
    },
  });
  other.store.secret = structuredClone(store.secret);
  other.store.rv = store.rv;
  const out = await other.service.update("ws", "shop", { set: { C: { value: "3", secret: false } } });
  t.deepEqual(
    out.data.map((v) => v.name),
    ["A", "B", "C"],
  );
  t.deepEqual(varsOfSecret(other.store.secret).get("B"), { value: "2", secret: true });
});

test("a create that loses to another create is retried as a patch of the Secret the other one made", async (t) => {
  const { store, service } = fakeKube({
    beforeWrite: (s) => {
      s.secret = buildEnvSecret({ name: "shop", namespace: "ws", uid: "u-1" }, vars({ B: ["2", true] }));
      s.secret.metadata.resourceVersion = String(++s.rv);
    },
  });
  const put = await service.put("ws", "shop", "A", { value: "1" });
  t.true(put.created);
  t.deepEqual([...varsOfSecret(store.secret).keys()].sort(), ["A", "B"]);
});

test("writes of one service in this replica are queued: many at once, none lost, no conflict", async (t) => {
  const { store, service } = fakeKube();
  await Promise.all(Array.from({ length: 20 }, (_, i) => service.put("ws", "shop", `V${i}`, { value: String(i) })));
  t.is(varsOfSecret(store.secret).size, 20);
});
