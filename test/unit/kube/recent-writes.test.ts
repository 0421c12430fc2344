// RecentWrites: a reconciler reads its own writes until the informer caches show them.
import test from "ava";
import type { Informer, InformerEvent, KubeObject } from "../../../kube/index.ts";
import { RecentWrites, newerVersion } from "../../../kube/recent.ts";

const obj = (name: string, resourceVersion: string, extra: Partial<KubeObject["metadata"]> = {}): KubeObject => ({
  metadata: { name, namespace: "ns", resourceVersion, ...extra },
});

/** Just enough of an Informer for track(): handlers and a way to fire events. */
function fakeInformer() {
  const handlers = new Set<(e: InformerEvent, o: KubeObject) => void>();
  return {
    informer: {
      on: (h: (e: InformerEvent, o: KubeObject) => void) => {
        handlers.add(h);
        return () => handlers.delete(h);
      },
    } as unknown as Informer<KubeObject>,
    fire: (e: InformerEvent, o: KubeObject) => {
      for (const h of handlers) h(e, o);
    },
  };
}

test("newerVersion orders etcd revisions numerically, and anything else as not newer", (t) => {
  t.true(newerVersion("10", "9"));
  t.false(newerVersion("9", "10"));
  t.false(newerVersion("10", "10"));
  t.true(newerVersion("100000000000000000001", "99"));
  t.false(newerVersion("abc", "1"));
  t.false(newerVersion(undefined, "1"));
});

test("the write is answered until the cache holds its version or a newer one", (t) => {
  const r = new RecentWrites();
  r.remember("Deployment", obj("a", "12", { managedFields: [{ manager: "x" }] }));
  t.is(r.latest("Deployment", "ns", "a", undefined)?.metadata.resourceVersion, "12", "the cache does not have it yet");
  t.is(r.latest("Deployment", "ns", "a", undefined)?.metadata.managedFields, undefined, "managedFields are not kept");
  t.is(r.latest("Deployment", "ns", "a", obj("a", "11"))?.metadata.resourceVersion, "12", "the cache is older");
  t.is(r.latest("Service", "ns", "a", undefined), undefined, "kinds are apart");
  t.is(r.latest("Deployment", "ns", "a", obj("a", "13"))?.metadata.resourceVersion, "13", "the cache moved past it");
  t.is(r.size, 0, "and the entry is gone");
});

test("entries expire", (t) => {
  let now = 0;
  const r = new RecentWrites({ ttlMs: 1000, now: () => now });
  r.remember("App", obj("a", "5"));
  now = 1001;
  t.is(r.latest("App", "ns", "a", obj("a", "4"))?.metadata.resourceVersion, "4", "expired: the cache wins");
});

test("an object this process deleted reads as gone until the cache drops it or shows it re-created", (t) => {
  let now = 0;
  const r = new RecentWrites({ ttlMs: 1000, now: () => now });
  const { informer, fire } = fakeInformer();
  r.track("Secret", informer);
  r.deleted("Secret", obj("s", "7"));
  t.is(r.latest("Secret", "ns", "s", obj("s", "7")), undefined, "the cache still holds the deleted object");
  fire("update", obj("s", "7"));
  t.is(r.latest("Secret", "ns", "s", obj("s", "7")), undefined, "a late event of the deleted object changes nothing");
  t.is(r.latest("Secret", "ns", "s", obj("s", "9"))?.metadata.resourceVersion, "9", "re-created (newer): the cache wins");
  r.deleted("Secret", obj("s", "9"));
  fire("delete", obj("s", "9"));
  t.is(r.size, 0, "the cache saw the deletion");
  r.deleted("Secret", obj("s", "11"));
  now = 1001;
  t.is(r.latest("Secret", "ns", "s", obj("s", "11"))?.metadata.resourceVersion, "11", "expired: the cache wins");
  r.remember("Secret", obj("s", "12"));
  r.deleted("Secret", obj("s", "12"));
  r.remember("Secret", obj("s", "14"));
  t.is(r.latest("Secret", "ns", "s", undefined)?.metadata.resourceVersion, "14", "written again after the deletion");
});

test("a deletion's tombstone holds against later versions of the deleted object (same uid), and gives way to a re-created one (new uid)", (t) => {
  const r = new RecentWrites();
  const { informer, fire } = fakeInformer();
  r.track("App", informer);
  r.deleted("App", obj("a", "7", { uid: "u1" }));
  // the deletion marks the object terminating, a controller writes its status: newer versions, same object
  fire("update", obj("a", "8", { uid: "u1", deletionTimestamp: new Date("2026-11-22T10:00:00Z") }));
  t.is(r.latest("App", "ns", "a", obj("a", "9", { uid: "u1" })), undefined, "still deleted");
  t.is(r.size, 1);
  fire("add", obj("a", "12", { uid: "u2" }));
  t.is(r.size, 0, "re-created under the same name: the cache wins");
  t.is(r.latest("App", "ns", "a", obj("a", "12", { uid: "u2" }))?.metadata.uid, "u2");
});

test("track drops an entry when the informer sees the object deleted or at its version", (t) => {
  const r = new RecentWrites();
  const { informer, fire } = fakeInformer();
  r.track("Service", informer);
  r.remember("Service", obj("a", "20"));
  r.remember("Service", obj("b", "20"));
  fire("update", obj("a", "19"));
  t.is(r.size, 2, "an older event changes nothing");
  fire("add", obj("a", "20"));
  fire("delete", obj("b", "18"));
  t.is(r.size, 0);
  t.is(r.latest("Service", "ns", "b", undefined), undefined, "deleted by someone else: seen as gone");
});
