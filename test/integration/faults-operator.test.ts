// Fault test (docs/reliability.md): the operator is killed (SIGKILL) again and again while a stream of App
// creates, updates and deletes runs. The operator is the real process (`node operator/main.ts`)
// under the chart's ServiceAccount, with governance on (the real API in this process provisions
// each App's store: a Secret, a finalizer and a schema per App, all of which must neither leak nor
// double). When the stream stops and the last operator is left running, everything converges:
// - every App's children are exactly what its spec asks for (kinds, names, image), each once,
//   each controlled by that App; its governance Secret exists and is the App's;
// - nothing Berth-managed is left without a live owner (no orphans), deleted Apps are gone
//   (their finalizer released) and so are their governance schemas;
// - objects in the namespace that Berth does not own are untouched (same resourceVersion, no
//   owner reference), including a Service whose name an App then claims (that App fails).
import test from "ava";
import type * as k8s from "@kubernetes/client-node";
import { API_VERSION, AppSpec } from "../../crds/schemas.ts";
import { KubeClient, type KubeObject } from "../../kube/client.ts";
import { isConflict } from "../../kube/transport.ts";
import { buildChildren, CHILD_KINDS, type ChildKind } from "../../operator/app/builders.ts";
import { MANAGED_BY } from "../../operator/kit/apply.ts";
import { governanceSecretName } from "../../operator/kit/pod.ts";
import { startApi, type TestApi } from "../helpers/api.ts";
import { query } from "../helpers/db.ts";
import { eventually, kube } from "../helpers/kube.ts";
import { healthPortOf, spawnOperator, type NodeProcess } from "../helpers/processes.ts";

const k = kube();
const client = new KubeClient(k.kc);
let api: TestApi;
let ns = "";
let op: NodeProcess | undefined;

const OPERATOR_ENV = { BERTH_BASE_DOMAIN: "apps.faults.local", BERTH_OPERATOR_RESYNC_SECONDS: "30" };

test.before(async () => {
  api = await startApi({ env: { BERTH_GOVERNANCE_HOST: "127.0.0.1:9" } });
  ns = api.namespace;
});
test.after.always(async () => {
  await op?.stop("SIGTERM");
  await api?.stop();
});

type App = KubeObject & {
  spec: Record<string, unknown>;
  status?: { phase?: string; observedGeneration?: number; conditions?: { type: string; status: string; reason?: string }[] };
};
const appRef = (name: string) => ({ apiVersion: API_VERSION, kind: "App", namespace: ns, name });

// A seeded generator: a failure can be replayed with the same sequence of operations.
let seed = Number(process.env.BERTH_FAULTS_SEED ?? 17);
const rnd = () => (seed = (seed * 1103515245 + 12345) & 0x7fffffff) / 0x7fffffff;
const pick = <T>(xs: readonly T[]): T => xs[Math.floor(rnd() * xs.length)]!;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

const NAMES = Array.from({ length: 16 }, (_, i) => `f${i}`);
const TYPES = ["web", "api", "worker", "cron"] as const;

function newSpec(name: string): Record<string, unknown> {
  const type = pick(TYPES);
  return {
    name,
    slug: name,
    type,
    image: `registry.invalid/${name}:1`,
    visibility: pick(["public", "private"]),
    ...(type === "cron" ? { schedule: "*/5 * * * *" } : { minReplicas: 1, maxReplicas: 3 }),
  };
}

/** One change of the stream: create an absent App, or update or delete a present one. */
async function step(counts: { create: number; update: number; delete: number }): Promise<void> {
  const name = pick(NAMES);
  const app = await client.get<App>(appRef(name));
  if (!app || app.metadata.deletionTimestamp) {
    if (app) return; // still terminating
    await client.create({ apiVersion: API_VERSION, kind: "App", metadata: { name, namespace: ns }, spec: newSpec(name) }, "faults");
    counts.create++;
    return;
  }
  const r = rnd();
  if (r < 0.25) {
    await client.delete(appRef(name));
    counts.delete++;
    return;
  }
  const tag = Number(/:(\d+)$/.exec(String(app.spec.image))?.[1] ?? 1) + 1;
  const patch: Record<string, unknown> =
    r < 0.55
      ? { image: `registry.invalid/${name}:${tag}` }
      : r < 0.75
        ? { suspended: !app.spec.suspended }
        : r < 0.9
          ? { visibility: app.spec.visibility === "private" ? "public" : "private" }
          : app.spec.type === "cron"
            ? { schedule: pick(["*/5 * * * *", "0 * * * *"]) }
            : { minReplicas: pick([1, 2]), maxReplicas: 3 };
  // guarded by the version read: a concurrent finalizer change makes it a 409, and the next step goes on
  await client
    .mergePatch(appRef(name), { metadata: { resourceVersion: app.metadata.resourceVersion }, spec: patch }, "faults")
    .catch((err: unknown) => {
      if (!isConflict(err)) throw err;
    });
  counts.update++;
}

interface Foreign {
  kind: string;
  apiVersion: string;
  name: string;
  uid: string;
  resourceVersion: string;
  generation?: number | undefined;
}

async function foreignObjects(): Promise<Foreign[]> {
  const labels = { "app.kubernetes.io/name": "legacy", "app.kubernetes.io/managed-by": "helm" };
  const objs: KubeObject[] = [
    { apiVersion: "v1", kind: "ConfigMap", metadata: { name: "legacy-config", namespace: ns, labels }, data: { a: "1" } } as KubeObject,
    {
      apiVersion: "v1",
      kind: "Secret",
      metadata: { name: "legacy-secret", namespace: ns, labels },
      stringData: { password: "not-berths" },
    } as KubeObject,
    // named as an App's governance Secret and env Secret would be, but for no App
    {
      apiVersion: "v1",
      kind: "Secret",
      metadata: { name: governanceSecretName("legacy"), namespace: ns, labels },
      stringData: { x: "y" },
    } as KubeObject,
    {
      apiVersion: "v1",
      kind: "Service",
      metadata: { name: "legacy", namespace: ns, labels },
      spec: { ports: [{ port: 80 }], selector: { app: "legacy" } },
    },
    {
      apiVersion: "apps/v1",
      kind: "Deployment",
      metadata: { name: "legacy-worker", namespace: ns, labels },
      spec: {
        replicas: 1,
        selector: { matchLabels: { app: "legacy" } },
        template: { metadata: { labels: { app: "legacy" } }, spec: { containers: [{ name: "c", image: "registry.invalid/legacy:1" }] } },
      },
    },
    // a Service whose name the App "clash" claims below: the App must fail, the Service stay as it is
    {
      apiVersion: "v1",
      kind: "Service",
      metadata: { name: "clash", namespace: ns, labels },
      spec: { ports: [{ port: 81 }], selector: { app: "clash" } },
    },
  ];
  const out: Foreign[] = [];
  for (const o of objs) {
    const c = await client.create(o, "someone-else");
    out.push({
      kind: c.kind!,
      apiVersion: c.apiVersion!,
      name: c.metadata.name!,
      uid: c.metadata.uid!,
      resourceVersion: c.metadata.resourceVersion!,
      generation: c.metadata.generation,
    });
  }
  return out;
}

async function startOperator(): Promise<NodeProcess> {
  op = await spawnOperator({ namespace: ns, env: { ...OPERATOR_ENV, BERTH_OPERATOR_API_URL: api.url } });
  return op;
}

/** berth_reconcile_total of the operator, all controllers and results. */
async function reconciles(p: NodeProcess): Promise<number> {
  const text = await (await fetch(`http://127.0.0.1:${healthPortOf(p)}/metrics`)).text();
  let sum = 0;
  for (const m of text.matchAll(/^berth_reconcile_total\{[^}]*\} (\d+)/gm)) sum += Number(m[1]);
  return sum;
}

/** Every object of the App's child kinds, and Secrets, in the namespace. */
async function allChildren(): Promise<KubeObject[]> {
  const out: KubeObject[] = [];
  const kinds = [
    ...(Object.entries(CHILD_KINDS) as [ChildKind, { apiVersion: string }][]).map(([kind, v]) => ({ kind, apiVersion: v.apiVersion })),
    { kind: "Secret", apiVersion: "v1" },
  ];
  for (const { kind, apiVersion } of kinds) {
    for (const o of (await client.list<KubeObject>(apiVersion, kind, ns)).items) out.push({ ...o, kind, apiVersion });
  }
  return out;
}

const controllerOf = (o: KubeObject) => o.metadata.ownerReferences?.find((r) => r.controller);

/** What is not converged yet, as readable lines (empty when everything is). */
async function divergence(): Promise<string[]> {
  const problems: string[] = [];
  const apps = (await client.list<App>(API_VERSION, "App", ns)).items;
  const live = new Map(apps.filter((a) => !a.metadata.deletionTimestamp).map((a) => [a.metadata.uid!, a]));
  for (const a of apps)
    if (a.metadata.deletionTimestamp)
      problems.push(`App ${a.metadata.name} is still terminating (finalizers ${JSON.stringify(a.metadata.finalizers)})`);
  const children = await allChildren();
  const owned = new Map<string, KubeObject[]>();
  for (const c of children) {
    const owner = controllerOf(c);
    const managed = c.metadata.labels?.["app.kubernetes.io/managed-by"] === MANAGED_BY["app.kubernetes.io/managed-by"];
    if (!owner || owner.kind !== "App") {
      if (managed && c.kind !== "Secret") problems.push(`${c.kind} ${c.metadata.name} is Berth-managed but has no App controller`);
      continue;
    }
    if (!live.has(owner.uid)) {
      problems.push(`${c.kind} ${c.metadata.name} is an orphan (App uid ${owner.uid} gone)`);
      continue;
    }
    const list = owned.get(owner.uid) ?? [];
    list.push(c);
    owned.set(owner.uid, list);
  }
  for (const a of live.values()) {
    const name = a.metadata.name!;
    if (name === "clash") continue;
    if (a.status?.observedGeneration !== a.metadata.generation) {
      problems.push(`App ${name}: generation ${a.metadata.generation} not observed (${a.status?.observedGeneration})`);
      continue;
    }
    const spec = AppSpec.parse(a.spec);
    const want = buildChildren(
      { name, namespace: ns, uid: a.metadata.uid! },
      spec,
      {},
      { baseDomain: OPERATOR_ENV.BERTH_BASE_DOMAIN, edge: { controller: "traefik", forwardAuthUrl: `${api.url}/api/v1/forward-auth` } },
    ).map((c) => `${c.kind}/${c.metadata.name}`);
    want.push(`Secret/${governanceSecretName(name)}`);
    const have = (owned.get(a.metadata.uid!) ?? []).map((c) => `${c.kind}/${c.metadata.name}`);
    if (JSON.stringify([...have].sort()) !== JSON.stringify([...want].sort()))
      problems.push(`App ${name}: children ${JSON.stringify(have.sort())}, want ${JSON.stringify(want.sort())}`);
    for (const c of owned.get(a.metadata.uid!) ?? []) {
      const images =
        c.kind === "Deployment"
          ? (c as k8s.V1Deployment).spec?.template.spec?.containers.map((x) => x.image)
          : c.kind === "CronJob"
            ? (c as k8s.V1CronJob).spec?.jobTemplate.spec?.template.spec?.containers.map((x) => x.image)
            : undefined;
      if (images && JSON.stringify(images) !== JSON.stringify([spec.image]))
        problems.push(`${c.kind} ${c.metadata.name}: image ${JSON.stringify(images)}, want ${spec.image}`);
    }
  }
  // governance stores: one schema per live App (one deleted App's store is dropped before its finalizer goes)
  const schemas = (
    await query<{ schema_name: string }>(api.db.url, `select schema_name from information_schema.schemata where schema_name like $1`, [
      `gov\\_${api.workspaceId}\\_%`,
    ])
  )
    .map((r) => r.schema_name)
    .sort();
  const wantSchemas = [...live.values()].map((a) => `gov_${api.workspaceId}_${a.metadata.name!.replaceAll("-", "_")}`).sort();
  if (JSON.stringify(schemas) !== JSON.stringify(wantSchemas))
    problems.push(`governance schemas ${JSON.stringify(schemas)}, want ${JSON.stringify(wantSchemas)}`);
  return problems;
}

test("killed again and again mid-reconcile under a stream of App changes, the operator converges: no duplicate, no orphan, no foreign object touched", async (t) => {
  t.timeout(15 * 60_000);
  const foreign = await foreignObjects();
  await client.create(
    {
      apiVersion: API_VERSION,
      kind: "App",
      metadata: { name: "clash", namespace: ns },
      spec: { name: "clash", slug: "clash", image: "registry.invalid/clash:1", visibility: "public" },
    },
    "faults",
  );
  await startOperator();

  const counts = { create: 0, update: 0, delete: 0 };
  let streaming = true;
  const stream = (async () => {
    while (streaming) {
      await step(counts);
      await sleep(20 + rnd() * 60);
    }
  })();

  // Each round: let the operator work for a moment (0.5-3 s after its caches synced: it is busy
  // with the changes of the stream and the backlog of the last kill), then SIGKILL it.
  const KILLS = Number(process.env.BERTH_FAULTS_KILLS ?? 8);
  let busyKills = 0;
  for (let i = 0; i < KILLS; i++) {
    await sleep(500 + rnd() * 2500);
    const victim = op!;
    // Busy: reconciles finished in the last moment before the kill, so others were under way.
    const before = await reconciles(victim);
    await sleep(100);
    if ((await reconciles(victim)) > before) busyKills++;
    await victim.stop("SIGKILL");
    op = undefined;
    await sleep(rnd() * 1000); // changes land while no operator runs
    await startOperator();
  }
  streaming = false;
  await stream;
  t.log(`${KILLS} kills (${busyKills} while reconciling); ${counts.create} creates, ${counts.update} updates, ${counts.delete} deletes`);
  t.true(busyKills > 0, "no kill landed while the operator was reconciling");
  t.true(counts.create > 10 && counts.update > 10 && counts.delete > 5, `the stream made too few changes: ${JSON.stringify(counts)}`);

  // The last operator runs on; everything converges.
  let last: string[] = [];
  try {
    await eventually(
      "the Apps and their children to converge",
      async () => {
        last = await divergence();
        return last.length === 0;
      },
      180_000,
      1000,
    );
  } catch (err) {
    t.fail(`${(err as Error).message}\nnot converged:\n  ${last.join("\n  ")}\n--- operator ---\n${op?.tail(20)}`);
    return;
  }

  // Foreign objects: untouched.
  for (const f of foreign) {
    const now = await client.get<KubeObject>({ apiVersion: f.apiVersion, kind: f.kind, namespace: ns, name: f.name });
    t.truthy(now, `${f.kind} ${f.name} still exists`);
    t.is(now?.metadata.uid, f.uid, `${f.kind} ${f.name} is the same object`);
    // The Deployment's status is the cluster's to write (kube-controller-manager): its spec is
    // unchanged (generation); every other object is exactly as it was (resourceVersion).
    if (f.kind === "Deployment") t.is(now?.metadata.generation, f.generation, `${f.kind} ${f.name}'s spec was not written`);
    else t.is(now?.metadata.resourceVersion, f.resourceVersion, `${f.kind} ${f.name} was not written`);
    t.deepEqual(
      (now?.metadata.managedFields ?? []).filter((m) => m.manager?.startsWith("berth")).map((m) => m.manager),
      [],
      `${f.kind} ${f.name} has no field of Berth's`,
    );
    t.falsy(now?.metadata.ownerReferences?.length, `${f.kind} ${f.name} got no owner`);
  }
  // The App that claims the foreign Service's name fails instead of taking it.
  const clash = await eventually(
    "the App clash to report the conflict",
    async () => {
      const a = await client.get<App>(appRef("clash"));
      return a?.status?.conditions?.find((c) => c.type === "Ready" && c.status === "False") ? a : undefined;
    },
    60_000,
  );
  t.not(clash.status?.phase, "active");
  t.is(op!.child.exitCode, null, "the last operator is still running");
});
