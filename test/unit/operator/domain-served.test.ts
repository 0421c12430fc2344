// The Domain reconciler against in-memory caches and a recording client: a verified Domain whose
// host another Ingress of the cluster serves gets no Service, Ingress nor Certificate, says why
// (Routed False, HostServedElsewhere, one Warning Event), and is routed once that Ingress is gone;
// a Domain routed first keeps its host when another Ingress comes later. The control, the same
// Domain without the other Ingress, is routed at once. test/integration/operator-domains.test.ts
// has the same against the real API server.
import test from "ava";
import { pino } from "pino";
import { API_VERSION, type DomainStatus } from "../../../crds/schemas.ts";
import { domainChildNames } from "../../../crds/domain.ts";
import type { Informer } from "../../../kube/informer.ts";
import { FakeInformer } from "../../helpers/fake-informer.ts";
import type { KubeObject } from "../../../kube/objects.ts";
import type { WritingClient } from "../../../kube/read-your-writes.ts";
import { DomainReconciler } from "../../../operator/domain/reconcile.ts";
import { domainsServedBy } from "../../../operator/domain/controller.ts";
import type { AppObject } from "../../../operator/kit/objects.ts";

const NS = "ws-1";
const HOST = "shop.example.test";
const names = domainChildNames(HOST);
const asInformer = <T extends KubeObject>(i: FakeInformer<T>) => i as unknown as Informer<T>;

/** A verified Domain of the App web; `foreign`: Ingresses other than Berth's, anywhere in the cluster. */
function world(opts: { foreign?: KubeObject[]; issuer?: boolean } = {}) {
  let rv = 100;
  const calls: { verb: string; kind: string; obj: KubeObject }[] = [];
  const stamp = <T extends KubeObject>(o: T): T => ({
    ...o,
    metadata: { ...o.metadata, uid: o.metadata.uid ?? `uid-${o.kind}`, resourceVersion: String(++rv) },
  });
  const domains = new FakeInformer<KubeObject>();
  const apps = new FakeInformer<AppObject>();
  const services = new FakeInformer<KubeObject>();
  const ingresses = new FakeInformer<KubeObject>();
  const allIngresses = new FakeInformer<KubeObject>();
  const certificates = new FakeInformer<KubeObject>();
  const secrets = new FakeInformer<KubeObject>();
  const client = {
    apply: (o: KubeObject) => {
      calls.push({ verb: "apply", kind: o.kind!, obj: o });
      return Promise.resolve(stamp(o));
    },
    applyNew: (o: KubeObject) => {
      calls.push({ verb: "applyNew", kind: o.kind!, obj: o });
      return Promise.resolve(stamp(o));
    },
    applyStatus: (_plural: string, o: KubeObject) => {
      calls.push({ verb: "applyStatus", kind: o.kind!, obj: o });
      const d = domains.get(NS, HOST)!;
      const written = { ...d, status: o.status, metadata: { ...d.metadata, resourceVersion: String(++rv) } };
      domains.put(written);
      return Promise.resolve(written);
    },
    delete: (ref: { kind: string }) => {
      calls.push({ verb: "delete", kind: ref.kind, obj: ref as unknown as KubeObject });
      return Promise.resolve(true);
    },
    get: () => Promise.resolve(undefined),
    create: () => Promise.reject(new Error("not expected")),
    mergePatch: () => Promise.reject(new Error("not expected")),
  } as unknown as WritingClient;
  const events: { type: string; reason: string; message: string }[] = [];
  const reconciler = new DomainReconciler({
    client,
    domains: asInformer(domains),
    apps: asInformer(apps),
    services: asInformer(services),
    ingresses: asInformer(ingresses),
    allIngresses: asInformer(allIngresses),
    certificates: opts.issuer === false ? undefined : asInformer(certificates),
    secrets: asInformer(secrets),
    dns: { observe: () => Promise.reject(new Error("a verified domain is not checked again")) },
    events: {
      event: (_o: KubeObject, type: "Normal" | "Warning", reason: string, message: string) => events.push({ type, reason, message }),
    },
    now: () => new Date("2026-11-23T10:00:00Z"),
    cfg: { baseDomain: "apps.test", ingressHost: "ingress.test", issuer: opts.issuer === false ? undefined : "ca" },
  });
  apps.put({
    apiVersion: API_VERSION,
    kind: "App",
    metadata: { name: "web", namespace: NS, uid: "app-uid", generation: 1, resourceVersion: String(++rv) },
    spec: { name: "Web", slug: "web", image: "r/web:1", port: 8080, visibility: "public" },
  });
  const status: DomainStatus = {
    verified: true,
    verifiedAt: "2026-11-23T09:00:00.000Z",
    tlsStatus: "pending",
    conditions: [
      {
        type: "Verified",
        status: "True",
        reason: "CnameMatches",
        message: "verified",
        lastTransitionTime: "2026-11-23T09:00:00Z",
        observedGeneration: 1,
      },
    ],
  };
  domains.put({
    apiVersion: API_VERSION,
    kind: "Domain",
    metadata: { name: HOST, namespace: NS, uid: "domain-uid", generation: 1, creationTimestamp: new Date("2026-11-23T08:00:00Z") },
    spec: { appRef: { name: "web" }, domain: HOST },
    status,
  });
  for (const f of opts.foreign ?? []) allIngresses.put(f);
  const domain = () => domains.get(NS, HOST) as (KubeObject & { status?: DomainStatus }) | undefined;
  return {
    calls,
    events,
    allIngresses,
    ingresses,
    certificates,
    domain,
    cond: (type: string) => domain()?.status?.conditions?.find((c) => c.type === type),
    writes: (verb: string) => calls.filter((c) => c.verb === verb).map((c) => c.kind),
    reconcile: () =>
      reconciler.reconcile({ namespace: NS, name: HOST }, { signal: new AbortController().signal, log: pino({ level: "silent" }) }),
    /** The caches catch up with what was written: Berth's Ingress shows in both Ingress caches. */
    catchUp: () => {
      for (const c of calls.filter((x) => x.verb === "applyNew")) {
        const o = stamp(c.obj);
        if (c.kind === "Ingress") {
          ingresses.put(o);
          allIngresses.put(o);
        }
        if (c.kind === "Certificate") certificates.put(o);
      }
    },
  };
}

const handMade = (over: { namespace?: string; name?: string; host?: string } = {}): KubeObject => ({
  apiVersion: "networking.k8s.io/v1",
  kind: "Ingress",
  metadata: { name: over.name ?? "shop", namespace: over.namespace ?? "platform-team", uid: "hand-made-uid", resourceVersion: "7" },
  spec: {
    rules: [
      {
        host: over.host ?? HOST,
        http: { paths: [{ path: "/", pathType: "Prefix", backend: { service: { name: "s", port: { number: 80 } } } }] },
      },
    ],
  },
});

test("control: a verified Domain whose host nothing else serves is routed and given a Certificate", async (t) => {
  const w = world({ foreign: [handMade({ host: "other.example.test" })] });
  await w.reconcile();
  t.deepEqual(w.writes("applyNew").sort(), ["Certificate", "Ingress", "Service"]);
  t.like(w.cond("Routed"), { status: "True", reason: "Routed" });
});

test("a verified Domain whose host a hand-made Ingress in another namespace serves gets no children, and says why once", async (t) => {
  const w = world({ foreign: [handMade()] });
  await w.reconcile();
  t.deepEqual(w.writes("applyNew"), [], "no Service, Ingress nor Certificate");
  t.like(w.cond("Routed"), { status: "False", reason: "HostServedElsewhere" });
  t.like(w.cond("Ready"), { status: "False", reason: "HostServedElsewhere" });
  t.notRegex(w.cond("Routed")!.message, /platform-team/, "the other Ingress's namespace and name are not told to the tenant");
  t.is(w.domain()?.status?.tlsStatus, "pending");
  t.regex(w.cond("CertificateReady")!.message, /another Ingress in the cluster serves shop\.example\.test/);
  t.deepEqual(
    w.events.map((e) => `${e.type}/${e.reason}`),
    ["Warning/HostServedElsewhere"],
  );
  await w.reconcile();
  t.is(w.events.length, 1, "a refusal that stands tells nothing new");
  t.deepEqual(w.writes("applyNew"), []);
});

test("a wildcard Ingress covering the name refuses it too", async (t) => {
  const w = world({ foreign: [handMade({ host: "*.example.test" })] });
  await w.reconcile();
  t.deepEqual(w.writes("applyNew"), []);
  t.is(w.cond("Routed")?.reason, "HostServedElsewhere");
});

test("once the other Ingress is gone, the Domain is routed", async (t) => {
  const foreign = handMade();
  const w = world({ foreign: [foreign] });
  await w.reconcile();
  t.deepEqual(w.writes("applyNew"), []);
  w.allIngresses.remove(foreign);
  await w.reconcile();
  t.deepEqual(w.writes("applyNew").sort(), ["Certificate", "Ingress", "Service"]);
  t.like(w.cond("Routed"), { status: "True", reason: "Routed" });
  t.deepEqual(
    w.events.map((e) => `${e.type}/${e.reason}`),
    ["Warning/HostServedElsewhere", "Normal/CertificateRequested", "Normal/Routed", "Normal/CertificateIssuing"],
  );
});

test("a Domain routed first keeps its host: an Ingress added later for it is the intruder", async (t) => {
  const w = world();
  await w.reconcile();
  t.deepEqual(w.writes("applyNew").sort(), ["Certificate", "Ingress", "Service"]);
  w.catchUp();
  w.allIngresses.put(handMade());
  await w.reconcile();
  t.deepEqual(w.writes("delete"), [], "nothing of its routing is pruned");
  t.like(w.cond("Routed"), { status: "True", reason: "Routed" });
});

test("after a restart, the Ingress it made before (in the caches, not written by this process) is still its own", async (t) => {
  const first = world();
  await first.reconcile();
  const own = first.calls.find((c) => c.verb === "applyNew" && c.kind === "Ingress")!.obj;
  t.is(own.metadata.name, names.ingress);
  const stored = { ...own, metadata: { ...own.metadata, uid: "ingress-uid", resourceVersion: "300" } };
  const w = world({ foreign: [handMade(), stored] });
  w.ingresses.put(stored);
  await w.reconcile();
  t.is(w.cond("Routed")?.reason, "Routed");
  t.deepEqual(w.writes("applyNew").sort(), ["Certificate", "Service"], "its Ingress is there already");
});

test("a certificate it already has is kept while another Ingress serves the host", async (t) => {
  const w = world({ foreign: [handMade()] });
  w.certificates.put({
    apiVersion: "cert-manager.io/v1",
    kind: "Certificate",
    metadata: {
      name: names.certificate,
      namespace: NS,
      uid: "cert-uid",
      resourceVersion: "9",
      ownerReferences: [{ apiVersion: API_VERSION, kind: "Domain", name: HOST, uid: "domain-uid", controller: true }],
    },
    spec: {},
  });
  await w.reconcile();
  t.deepEqual(w.writes("delete"), [], "kept, as through a soft delete");
  t.deepEqual(w.writes("applyNew"), []);
  t.is(w.cond("Routed")?.reason, "HostServedElsewhere");
  t.is(w.domain()?.status?.tlsStatus, "issuing", "the Certificate's own state");
});

test("an Ingress wakes the Domains, of any namespace, whose domain it serves", (t) => {
  const domains = new FakeInformer<KubeObject>();
  const dom = (namespace: string, domain: string) =>
    domains.put({ metadata: { name: domain, namespace }, spec: { appRef: { name: "web" }, domain } });
  dom("ws-1", HOST);
  dom("ws-2", HOST);
  dom("ws-1", "www.example.test");
  dom("ws-3", "example.test");
  const map = domainsServedBy(asInformer(domains));
  t.deepEqual(map(handMade()), [
    { namespace: "ws-1", name: HOST },
    { namespace: "ws-2", name: HOST },
  ]);
  t.deepEqual(
    map(handMade({ host: "*.example.test" })).map((r) => `${r.namespace}/${r.name}`),
    [`ws-1/${HOST}`, `ws-2/${HOST}`, "ws-1/www.example.test"],
    "a wildcard's one label: not the apex",
  );
  t.deepEqual(map(handMade({ host: "elsewhere.example.org" })), []);
});
