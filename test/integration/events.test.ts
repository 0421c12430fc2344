// Events on Apps against the real API server, written as the operator's ServiceAccount: recorded,
// aggregated (a repeat patches the count instead of creating another Event), trimmed to what the
// API server accepts, and never failing the caller.
import test from "ava";
import { pino } from "pino";
import { API_VERSION } from "../../crds/schemas.ts";
import { KubeClient, type KubeObject } from "../../kube/client.ts";
import { KubeEventRecorder } from "../../kube/events.ts";
import { loadLeanKubeConfig } from "../../kube/kubeconfig.ts";
import { KubeRest } from "../../kube/transport.ts";
import { identity } from "../helpers/identities.ts";
import { deleteNamespace, kube, testNamespace } from "../helpers/kube.ts";

const k = kube();
let ns = "";
let app: KubeObject;
let recorder: KubeEventRecorder;
/** The recorder's log lines (warnings and up). */
const logged: Record<string, unknown>[] = [];

test.before(async () => {
  ns = await testNamespace(k, "events");
  app = await new KubeClient(k.kc).create(
    { apiVersion: API_VERSION, kind: "App", metadata: { name: "shop", namespace: ns }, spec: { name: "Shop", slug: "shop" } },
    "test",
  );
  const rest = KubeRest.from(await loadLeanKubeConfig((await identity("operator")).kubeconfig, {}));
  const log = pino(
    { level: "warn" },
    {
      write: (l: string) => {
        logged.push(JSON.parse(l) as Record<string, unknown>);
      },
    },
  );
  recorder = new KubeEventRecorder(rest, { component: "berth-operator", instance: "test-0", log });
});
test.after.always(async () => {
  await deleteNamespace(k, ns);
});

const eventsOf = async (reason: string) =>
  (await k.core.listNamespacedEvent({ namespace: ns, fieldSelector: `involvedObject.name=shop,reason=${reason}` })).items;

test.serial("an Event names the App and is aggregated on repeat", async (t) => {
  recorder.event(app, "Normal", "Created", "Created Deployment shop");
  await recorder.flush();
  recorder.event(app, "Normal", "Created", "Created Deployment shop");
  recorder.event(app, "Normal", "Created", "Created Deployment shop");
  await recorder.flush();
  const events = await eventsOf("Created");
  t.is(events.length, 1);
  t.like(events[0], {
    type: "Normal",
    message: "Created Deployment shop",
    count: 3,
    reportingComponent: "berth-operator",
    reportingInstance: "test-0",
  });
  t.like(events[0]!.involvedObject, { apiVersion: API_VERSION, kind: "App", name: "shop", namespace: ns, uid: app.metadata.uid });
});

test.serial("another message is another Event; a long message is trimmed to what the API server accepts", async (t) => {
  recorder.event(app, "Warning", "ProvisioningFailed", `governance provisioning failed: ${"x".repeat(5000)}`);
  recorder.event(app, "Warning", "ProvisioningFailed", "other");
  await recorder.flush();
  const events = await eventsOf("ProvisioningFailed");
  t.is(events.length, 2);
  t.true(events.every((e) => e.type === "Warning" && Buffer.byteLength(e.message ?? "") <= 1024));
});

test.serial("an Event that cannot be written fails no caller, and is logged as a warning", async (t) => {
  logged.length = 0;
  t.notThrows(() =>
    recorder.event({ ...app, metadata: { ...app.metadata, namespace: "no-such-namespace-here" } }, "Normal", "Created", "x"),
  );
  await recorder.flush();
  t.is(logged.length, 1);
  t.like(logged[0], { level: 40, msg: "could not record an Event", reason: "Created", object: "App/no-such-namespace-here/shop" });
});
