// The controller's watches: an update maps the object before it as well as after (as
// controller-runtime's handlers do), so that an object that stops naming a key still wakes it.
import test from "ava";
import { pino } from "pino";
import type { Informer, InformerHandler, KubeObject } from "../../../kube/index.ts";
import { Controller, Metrics, type Request } from "../../../operator/runtime/index.ts";

/** Just enough of an Informer: a fixed list, and events fired by the test. */
function firingInformer(kind: string, objects: KubeObject[] = []): Informer<KubeObject> & { fire: InformerHandler<KubeObject> } {
  const handlers = new Set<InformerHandler<KubeObject>>();
  const fire: InformerHandler<KubeObject> = (event, obj, old) => {
    for (const h of handlers) h(event, obj, old);
  };
  return {
    options: { apiVersion: "v1", kind, plural: `${kind.toLowerCase()}s` },
    list: () => objects,
    on: (h: InformerHandler<KubeObject>) => {
      handlers.add(h);
      return () => handlers.delete(h);
    },
    fire,
  } as unknown as Informer<KubeObject> & { fire: InformerHandler<KubeObject> };
}

const hosted = (name: string, host: string): KubeObject => ({
  metadata: { name, namespace: "platform", resourceVersion: "1", annotations: { host } },
});
/** The key a watched object names: a Domain named after the host it carries. */
const byHost = (o: KubeObject): Request[] => [{ namespace: "ws", name: o.metadata.annotations?.["host"] ?? "" }];

test("an update wakes the keys the object named before and after it; add and delete the object's", async (t) => {
  const watched = firingInformer("Ingress");
  const seen: string[] = [];
  let done: () => void = () => undefined;
  const all = new Promise<void>((resolve) => {
    done = resolve;
  });
  const controller = new Controller({
    name: "watches",
    primary: firingInformer("Domain"),
    watches: [{ informer: watched, map: byHost }],
    resyncPeriodMs: 0,
    concurrency: 1,
    metrics: new Metrics(),
    log: pino({ level: "silent" }),
    reconciler: {
      reconcile(req) {
        seen.push(req.name);
        if (seen.length === 4) done();
        return Promise.resolve();
      },
    },
  });
  controller.start();
  t.teardown(() => controller.stop({ timeoutMs: 1000 }));
  const tick = () => new Promise((r) => setTimeout(r, 50));
  watched.fire("add", hosted("hand-made", "a.example.com"));
  await tick();
  watched.fire("update", hosted("hand-made", "b.example.com"), hosted("hand-made", "a.example.com"));
  await tick();
  watched.fire("delete", hosted("hand-made", "c.example.com"));
  await all;
  t.deepEqual(seen.slice(0, 1), ["a.example.com"]);
  t.deepEqual(seen.slice(1, 3).sort(), ["a.example.com", "b.example.com"], "the host it left wakes its Domain too");
  t.deepEqual(seen.slice(3), ["c.example.com"]);
});
