// WorkspaceService and the real NamespaceEnsurer against PostgreSQL and the control plane:
// creation is crash-safe (a retry with the same id finishes), namespaces are labelled, foreign
// namespaces are not taken over, namespaceOf is served from memory.
import test from "ava";
import type { MikroORM } from "@mikro-orm/postgresql";
import { openOrm } from "../../api/db/orm.ts";
import { DomainError } from "../../api/errors.ts";
import { createLogger } from "../../kube/logger.ts";
import { KubeNamespaceEnsurer } from "../../api/workspaces/namespaces.ts";
import { WorkspaceService, newWorkspaceId, type NamespaceEnsurer } from "../../api/workspaces/service.ts";
import { freshDatabase, query, type TestDatabase } from "../helpers/db.ts";
import { kube, uniqueName } from "../helpers/kube.ts";

const k = kube();
const log = createLogger({ level: "silent" });
const real = new KubeNamespaceEnsurer(k.kc);
let db: TestDatabase;
let orm: MikroORM;
const namespaces: string[] = [];

test.before(async () => {
  db = await freshDatabase();
  orm = await openOrm(db.url, { poolMax: 4 });
});
test.after.always(async () => {
  await orm?.close();
  await db?.drop();
  for (const name of namespaces) await k.core.deleteNamespace({ name }).catch(() => undefined);
});

async function namespaceLabels(name: string): Promise<Record<string, string> | undefined> {
  try {
    return (await k.core.readNamespace({ name })).metadata?.labels ?? {};
  } catch {
    return undefined;
  }
}

test("a create interrupted after the row is written is finished by a retry with the same id", async (t) => {
  let failures = 1;
  const flaky: NamespaceEnsurer = {
    ensure: (name, labels) =>
      failures-- > 0 ? Promise.reject(new Error("connect ECONNREFUSED 127.0.0.1:6443")) : real.ensure(name, labels),
  };
  const svc = new WorkspaceService({ orm, namespaces: flaky, log });
  const id = newWorkspaceId();
  namespaces.push(`berth-${id}`);

  const err = await t.throwsAsync(svc.create(orm.em.fork(), { name: "Flaky", id }));
  t.true(err instanceof DomainError);
  t.is((err as DomainError).status, 503);
  t.is((err as DomainError).code, "namespace_unavailable");
  t.deepEqual((err as DomainError).details, { workspaceId: id, namespace: `berth-${id}` });
  t.is((await query(db.url, `select id from workspaces where id = $1`, [id])).length, 1, "the row is there");
  t.is(await namespaceLabels(`berth-${id}`), undefined, "the namespace is not");

  const retry = await svc.create(orm.em.fork(), { name: "Flaky", id });
  t.false(retry.created);
  t.is(retry.workspace.namespace, `berth-${id}`);
  t.is((await namespaceLabels(`berth-${id}`))?.["berth.dev/workspace"], id);
});

test("concurrent creates of one id give one workspace", async (t) => {
  const svc = new WorkspaceService({ orm, namespaces: real, log });
  const id = newWorkspaceId();
  namespaces.push(`berth-${id}`);
  const results = await Promise.all([1, 2, 3].map(() => svc.create(orm.em.fork(), { name: "Race", id })));
  t.is(results.filter((r) => r.created).length, 1);
  t.true(results.every((r) => r.workspace.id === id));
  t.is((await query(db.url, `select id from workspaces where id = $1`, [id])).length, 1);
  t.is((await namespaceLabels(`berth-${id}`))?.["berth.dev/workspace"], id);
});

test("the real ensurer never takes over a namespace it did not create, and is idempotent on its own", async (t) => {
  const name = uniqueName("ens");
  namespaces.push(name);
  await k.core.createNamespace({ body: { metadata: { name, labels: { keep: "me" } } } });
  const err = await t.throwsAsync(real.ensure(name, { "berth.dev/workspace": "wsaaaaaaaaaa" }));
  t.is((err as DomainError).code, "namespace_conflict");
  t.deepEqual(await namespaceLabels(name), { keep: "me", "kubernetes.io/metadata.name": name }, "unchanged");

  const own = uniqueName("ens");
  namespaces.push(own);
  await real.ensure(own, { "berth.dev/workspace": "wsaaaaaaaaaa" });
  await real.ensure(own, { "berth.dev/workspace": "wsaaaaaaaaaa", "pod-security.kubernetes.io/enforce": "restricted" });
  t.deepEqual(await namespaceLabels(own), {
    "berth.dev/workspace": "wsaaaaaaaaaa",
    "pod-security.kubernetes.io/enforce": "restricted",
    "kubernetes.io/metadata.name": own,
  });
});

test("the real ensurer refuses a namespace that belongs to another workspace", async (t) => {
  const name = uniqueName("ens");
  namespaces.push(name);
  await k.core.createNamespace({ body: { metadata: { name, labels: { "berth.dev/workspace": "wsbbbbbbbbbb" } } } });
  const err = await t.throwsAsync(real.ensure(name, { "berth.dev/workspace": "wsaaaaaaaaaa" }));
  t.is((err as DomainError).code, "namespace_conflict");
  t.is((await namespaceLabels(name))?.["berth.dev/workspace"], "wsbbbbbbbbbb", "unchanged");
});

test("namespaceOf answers from memory after the first lookup; unknown workspaces are 404", async (t) => {
  const svc = new WorkspaceService({ orm, namespaces: { ensure: () => Promise.resolve() }, log });
  const { workspace } = await svc.create(orm.em.fork(), { name: "Lookup" });
  const other = new WorkspaceService({ orm, namespaces: { ensure: () => Promise.resolve() }, log });
  t.is(await other.namespaceOf(workspace.id), `berth-${workspace.id}`);
  await query(db.url, `delete from workspaces where id = $1`, [workspace.id]);
  t.is(await other.namespaceOf(workspace.id), `berth-${workspace.id}`, "served from the cache");
  const fresh = new WorkspaceService({ orm, namespaces: { ensure: () => Promise.resolve() }, log });
  const err = await t.throwsAsync(fresh.namespaceOf(workspace.id));
  t.is((err as DomainError).status, 404);
  t.is((err as DomainError).code, "workspace_not_found");
});

test("a retry with the id but another name is a conflict", async (t) => {
  const svc = new WorkspaceService({ orm, namespaces: { ensure: () => Promise.resolve() }, log });
  const { workspace } = await svc.create(orm.em.fork(), { name: "First" });
  const err = await t.throwsAsync(svc.create(orm.em.fork(), { name: "Second", id: workspace.id }));
  t.is((err as DomainError).status, 409);
  t.is((err as DomainError).code, "workspace_exists");
  t.is((await query<{ name: string }>(db.url, `select name from workspaces where id = $1`, [workspace.id]))[0]!.name, "First");
});
