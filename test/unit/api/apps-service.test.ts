// AppsService reads its own writes: a GET (or list) right after this API's PATCH or DELETE answers
// what the write did, though the watch cache has not caught up yet. In-memory cache, recording client.
import test from "ava";
import { API_VERSION } from "../../../crds/schemas.ts";
import { KubeApiError } from "../../../kube/transport.ts";
import type { Informer, InformerEvent } from "../../../kube/informer.ts";
import { API_FIELD_MANAGER, type KubeClient } from "../../../kube/client.ts";
import { ReadYourWritesCache } from "../../../kube/read-your-writes.ts";
import { AppsService, type AppObject } from "../../../api/apps/service.ts";
import { ConflictError, NotFoundError } from "../../../api/errors.ts";
import { appLookup } from "../../../api/governance/stores/apps.ts";

function world() {
  let rv = 10;
  const objects = new Map<string, AppObject>();
  const handlers = new Set<(e: InformerEvent, o: AppObject) => void>();
  const cache = {
    get: (_ns: string, name: string) => objects.get(name),
    list: () => [...objects.values()],
    on: (h: (e: InformerEvent, o: AppObject) => void) => {
      handlers.add(h);
      return () => handlers.delete(h);
    },
  } as unknown as Informer<AppObject>;
  const app: AppObject = {
    apiVersion: API_VERSION,
    kind: "App",
    metadata: { name: "shop", namespace: "ns", resourceVersion: String(rv), creationTimestamp: new Date("2026-11-22T10:00:00Z") },
    spec: { name: "Shop", slug: "shop", image: "r/shop:1", type: "web" },
  };
  objects.set("shop", app);
  const client = {
    mergePatch: (_ref: unknown, patch: { spec?: Record<string, unknown> }) =>
      Promise.resolve({ ...app, metadata: { ...app.metadata, resourceVersion: String(++rv) }, spec: { ...app.spec, ...patch.spec } }),
    delete: () => Promise.resolve(true),
    // the server still holds every App the cache holds (a deleted one terminates, held by its finalizer)
    create: (o: AppObject) =>
      objects.has(o.metadata.name!)
        ? Promise.reject(new KubeApiError(409, { message: "already exists" }, "create"))
        : Promise.resolve({ ...o, metadata: { ...o.metadata, resourceVersion: String(++rv), uid: `uid-${rv}` } }),
    get: () => Promise.resolve(undefined), // the server no longer has it
  } as unknown as KubeClient;
  const apps = new ReadYourWritesCache(client, API_FIELD_MANAGER).track("App", cache);
  const service = new AppsService({ apps, namespaceOf: () => Promise.resolve("ns"), baseDomain: "apps.test" });
  // Governance reads Apps through the same cache, as buildServices wires it.
  const governanceLookup = appLookup({ apps, namespaceOf: () => Promise.resolve("ns") });
  /** The watch delivers an event (the cache catches up). */
  const deliver = (e: InformerEvent, o: AppObject) => {
    if (e === "delete") objects.delete(o.metadata.name!);
    else objects.set(o.metadata.name!, o);
    for (const h of handlers) h(e, o);
  };
  return { service, deliver, app, governanceLookup };
}

test("a GET right after an update answers the update, before the cache shows it", async (t) => {
  const w = world();
  await w.service.update("ws", "shop", { image: "r/shop:2", name: "Shop 2" });
  t.is((await w.service.get("ws", "shop")).image, "r/shop:2");
  t.deepEqual(
    (await w.service.list("ws", { page: 1, limit: 20 })).data.map((d) => d.name),
    ["Shop 2"],
  );
});

test("after a permanent delete the service is gone for GET and list, though the cache still holds it", async (t) => {
  const w = world();
  await w.service.remove("ws", "shop");
  const err = await t.throwsAsync(w.service.get("ws", "shop"));
  t.true(err instanceof NotFoundError);
  t.is((await w.service.list("ws", { page: 1, limit: 20 })).meta.total, 0);
  t.is((await w.service.stats("ws")).total, 0);
  w.deliver("delete", w.app);
  await t.throwsAsync(w.service.get("ws", "shop"), { instanceOf: NotFoundError });
});

test("a slug freed by a delete can be used again at once: the new service gets another name while the old App terminates", async (t) => {
  const w = world();
  await w.service.remove("ws", "shop");
  const created = await w.service.create("ws", { name: "Shop", slug: "shop", image: "r/shop:3" });
  t.not(created.id, "shop", "the name is still held by the terminating App");
  t.regex(created.id, /^shop-[0-9a-f]{6}$/);
});

test("two creates of one slug before the cache shows the first: the second is refused (slug_taken), not a second App with that slug", async (t) => {
  const w = world();
  const body = { name: "Blog", slug: "blog", image: "r/blog:1" } as Parameters<typeof w.service.create>[1];
  t.is((await w.service.create("ws", body)).id, "blog");
  await t.throwsAsync(w.service.create("ws", body), { instanceOf: ConflictError, message: /slug blog already exists/ });
  t.deepEqual(
    (await w.service.list("ws", { page: 1, limit: 20 })).data.map((d) => d.id).sort(),
    ["blog", "shop"],
    "the list shows the new App at once",
  );
});

test("governance reads the services' writes through the shared cache: a just-deleted App is gone for it too", async (t) => {
  const w = world();
  t.truthy(await w.governanceLookup("ws", "shop"));
  await w.service.remove("ws", "shop");
  t.is(await w.governanceLookup("ws", "shop"), undefined, "the watch cache still holds it, the deletion is read back");
});
