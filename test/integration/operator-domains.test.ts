// The Domain controller against the real API server (kwok nodes) and a real DNS server (Pebble's
// challenge test server, started here): Domains applied with kubectl, as GitOps would, are
// checked, verified on request, routed, given a Certificate whose status (written here as
// cert-manager would, or issued by cert-manager's controller when the real node runs it) drives
// tlsStatus; the claim rule, a host another Ingress serves, soft delete and deletion.
// test/e2e/domains.test.ts has the rest of the real path (HTTPS through the ingress).
import test, { type ExecutionContext } from "ava";
import { spawn, type ChildProcess } from "node:child_process";
import type * as k8s from "@kubernetes/client-node";
import { API_VERSION } from "../../crds/schemas.ts";
import { challengeHost, challengeToken, domainChildNames, VERIFY_REQUEST_ANNOTATION } from "../../crds/domain.ts";
import { KubeClient, type KubeObject } from "../../kube/client.ts";
import type { RunningOperator } from "../../operator/main.ts";
import { startTestOperator } from "../helpers/operator.ts";
import { binPath } from "../helpers/binaries.ts";
import { TestDns } from "../helpers/dns.ts";
import { deleteNamespace, eventually, kube, testNamespace, uniqueName } from "../helpers/kube.ts";
import { freePort } from "../../hack/bench/proc.ts";

const k = kube();
const client = new KubeClient(k.kc);
const INGRESS_HOST = "ingress.it.test";
// With the real node, hack/cluster runs cert-manager's controller (issuer berth-local-ca), which
// would overwrite a Certificate status written here: the real controller issues it then.
const REAL_CERT_MANAGER = process.env.BERTH_REAL_NODE === "1";
const ISSUER = REAL_CERT_MANAGER ? "berth-local-ca" : "it-issuer";
let ns = "";
/** Another namespace, as a platform team's, with Ingresses made by hand (none of Berth's). */
let platformNs = "";
let op: RunningOperator | undefined;
let dnsServer: ChildProcess | undefined;
let dns: TestDns;

// Hosts that Ingresses made by hand serve. Every operator of the test run caches every Ingress of
// the cluster, so they are under this file's own parent (a random label): the wildcard covers
// nothing of another test's.
const PARENT = `${uniqueName("opdom")}.example.test`;
const SERVED = `shop.${PARENT}`;
const CONTROL = `www.${PARENT}`;

/** An Ingress made by hand in the platform namespace, as a platform team would: Berth's labels and owners it has not. */
const handMadeIngress = (name: string, host: string) =>
  client.create(
    {
      apiVersion: "networking.k8s.io/v1",
      kind: "Ingress",
      metadata: { name, namespace: platformNs },
      spec: {
        rules: [
          {
            host,
            http: { paths: [{ path: "/", pathType: "Prefix", backend: { service: { name: "storefront", port: { number: 80 } } } }] },
          },
        ],
      },
    },
    "test",
  );
const deleteHandMade = (name: string) =>
  client.delete({ apiVersion: "networking.k8s.io/v1", kind: "Ingress", namespace: platformNs, name });

test.before(async () => {
  const [dnsPort, mgmtPort] = [await freePort(), await freePort()];
  dnsServer = spawn(
    binPath("pebble-challtestsrv"),
    [
      "-dnsserver",
      `127.0.0.1:${dnsPort}`,
      "-management",
      `127.0.0.1:${mgmtPort}`,
      "-http01",
      "",
      "-https01",
      "",
      "-doh",
      "",
      "-tlsalpn01",
      "",
      "-defaultIPv4",
      "",
      "-defaultIPv6",
      "",
    ],
    { stdio: "ignore" },
  );
  dns = new TestDns(`http://127.0.0.1:${mgmtPort}`);
  await eventually(
    "the DNS server",
    async () => {
      try {
        await dns.clearA("probe.invalid");
        return true;
      } catch {
        return false;
      }
    },
    15_000,
  );
  await dns.addA(INGRESS_HOST, ["10.1.2.3"]);
  ns = await testNamespace(k, "opdom");
  platformNs = await testNamespace(k, "opdom-platform");
  // Before the operator starts, so that its cache holds it when the Domain for it is verified.
  await handMadeIngress("storefront", SERVED);
  op = await startTestOperator({
    namespace: ns,
    env: {
      BERTH_OPERATOR_RESYNC_SECONDS: "10",
      BERTH_BASE_DOMAIN: "apps.it.test",
      BERTH_INGRESS_HOST: INGRESS_HOST,
      BERTH_DNS_RESOLVER: `127.0.0.1:${dnsPort}`,
      BERTH_DOMAIN_ISSUER: ISSUER,
    },
  });
  await client.create(
    {
      apiVersion: API_VERSION,
      kind: "App",
      metadata: { name: "shop", namespace: ns },
      spec: { name: "Shop", slug: "shop", image: "registry.invalid/shop:1", port: 8080, visibility: "public" },
    },
    "test",
  );
});
test.after.always(async () => {
  await op?.stop();
  dnsServer?.kill();
  await deleteNamespace(k, ns);
  await deleteNamespace(k, platformNs);
});

type Cond = { type: string; status: string; reason: string; message: string };
type Domain = KubeObject & {
  spec: Record<string, unknown>;
  status?: { verified?: boolean; tlsStatus?: string; nextCheckAt?: string; handledVerifyRequest?: string; conditions?: Cond[] };
};
const ref = (name: string) => ({ apiVersion: API_VERSION, kind: "Domain", namespace: ns, name });
const getDomain = (name: string) => client.get<Domain>(ref(name));
const cond = (d: Domain | undefined, type: string) => d?.status?.conditions?.find((c) => c.type === type);
const createDomain = (name: string, domain: string, app = "shop") =>
  client.create(
    { apiVersion: API_VERSION, kind: "Domain", metadata: { name, namespace: ns }, spec: { appRef: { name: app }, domain } },
    "test",
  );
const requestVerify = (name: string, token: string) =>
  client.mergePatch(ref(name), { metadata: { annotations: { [VERIFY_REQUEST_ANNOTATION]: token } } }, "test");
const get = (apiVersion: string, kind: string, name: string) => client.get<KubeObject>({ apiVersion, kind, namespace: ns, name });
const reasons = async (name: string) =>
  new Set(
    (
      await k.core.listNamespacedEvent({ namespace: ns, fieldSelector: `involvedObject.kind=Domain,involvedObject.name=${name}` })
    ).items.map((e) => e.reason),
  );

const D = "www.shop-it.example";
const names = domainChildNames(D);

test.serial(
  "a Domain without a record is checked at once and told what to create; a check on request verifies it once the CNAME exists",
  async (t) => {
    await createDomain(D, D);
    const failed = await eventually("the first check", async () => {
      const d = await getDomain(D);
      return cond(d, "Verified")?.reason === "RecordNotFound" ? d : undefined;
    });
    t.false(failed.status?.verified);
    t.is(failed.status?.tlsStatus, "pending");
    t.truthy(failed.status?.nextCheckAt);
    t.regex(cond(failed, "Verified")!.message, new RegExp(`CNAME ${INGRESS_HOST.replace(/\./g, "\\.")}`));
    t.falsy(await get("networking.k8s.io/v1", "Ingress", names.ingress), "not routed before verification");

    await dns.setCname(D, INGRESS_HOST);
    await requestVerify(D, "t0");
    const pointing = await eventually("the requested check", async () => {
      const d = await getDomain(D);
      return d?.status?.handledVerifyRequest === "t0" ? d : undefined;
    });
    t.false(pointing.status?.verified, "pointing at the ingress proves nothing alone (a dangling CNAME points there for anyone)");
    t.is(cond(pointing, "Verified")?.reason, "ChallengeNotFound");
    t.regex(
      cond(pointing, "Verified")!.message,
      new RegExp(`${challengeHost(D).replace(/\./g, "\\.")} with the value ${challengeToken(pointing.metadata.uid!)}`),
    );
    t.falsy(await get("networking.k8s.io/v1", "Ingress", names.ingress));
    await dns.setTxt(challengeHost(D), challengeToken(pointing.metadata.uid!));
    await requestVerify(D, "t1");
    const ok = await eventually("the requested check", async () => {
      const d = await getDomain(D);
      return d?.status?.handledVerifyRequest === "t1" ? d : undefined;
    });
    t.true(ok.status?.verified);
    t.is(cond(ok, "Verified")?.reason, "CnameMatches");
    t.truthy((await reasons(D)).has("RecordNotFound"));
  },
);

test.serial(
  "a verified Domain gets its Service, Ingress and Certificate; tlsStatus follows the Certificate; the Secret is adopted",
  async (t) => {
    const ing = await eventually(
      "the Ingress",
      async () => (await get("networking.k8s.io/v1", "Ingress", names.ingress)) as k8s.V1Ingress | undefined,
    );
    t.is(ing.spec?.rules?.[0]?.host, D);
    t.deepEqual(ing.spec?.tls, [{ hosts: [D], secretName: names.secret }]);
    const svc = (await get("v1", "Service", names.service)) as k8s.V1Service | undefined;
    t.is(svc?.spec?.ports?.[0]?.targetPort, 8080);
    const cert = await eventually("the Certificate", () => get("cert-manager.io/v1", "Certificate", names.certificate));
    t.like((cert.spec as Record<string, unknown>).issuerRef, { kind: "ClusterIssuer", name: ISSUER });
    if (!REAL_CERT_MANAGER) await fakeIssuance(t);
    const active = await eventually(
      "active",
      async () => {
        const d = await getDomain(D);
        return d?.status?.tlsStatus === "active" ? d : undefined;
      },
      60_000,
    );
    t.is(cond(active, "Ready")?.status, "True");
    const secret = await eventually("the Secret adopted", async () => {
      const s = await k.core.readNamespacedSecret({ namespace: ns, name: names.secret });
      return s.metadata?.ownerReferences?.some((o) => o.kind === "Domain" && o.name === D) ? s : undefined;
    });
    t.truthy(secret);
    for (const r of ["Verified", "CertificateRequested", "Routed", "CertificateActive"]) t.true((await reasons(D)).has(r), r);
  },
);

/** What cert-manager does, when it does not run here: the Domain is issuing until the Secret and then the Certificate's Ready status exist. */
async function fakeIssuance(t: ExecutionContext): Promise<void> {
  t.is(
    (
      await eventually("issuing", async () => {
        const d = await getDomain(D);
        return d?.status?.tlsStatus === "issuing" ? d : undefined;
      })
    ).status?.tlsStatus,
    "issuing",
  );
  await k.core.createNamespacedSecret({
    namespace: ns,
    body: {
      metadata: {
        name: names.secret,
        labels: { "app.kubernetes.io/managed-by": "berth", "berth.dev/domain": D },
        annotations: { "cert-manager.io/certificate-name": names.certificate },
      },
      type: "kubernetes.io/tls",
      data: { "tls.crt": "", "tls.key": "" },
    },
  });
  const now = Date.now();
  await client.rest.request("PATCH", `/apis/cert-manager.io/v1/namespaces/${ns}/certificates/${names.certificate}/status`, {
    query: { fieldManager: "test-cert-manager", force: true },
    contentType: "application/apply-patch+yaml",
    body: {
      apiVersion: "cert-manager.io/v1",
      kind: "Certificate",
      metadata: { name: names.certificate, namespace: ns },
      status: {
        conditions: [
          {
            type: "Ready",
            status: "True",
            reason: "Ready",
            message: "Certificate is up to date and has not expired",
            lastTransitionTime: new Date(now).toISOString(),
          },
        ],
        notAfter: new Date(now + 90 * 86400_000).toISOString(),
        renewalTime: new Date(now + 60 * 86400_000).toISOString(),
      },
    },
  });
}

test.serial(
  "a second claim of a verified domain is refused by the first-verified rule; a name under the base domain is invalid",
  async (t) => {
    await client.create(
      {
        apiVersion: API_VERSION,
        kind: "App",
        metadata: { name: "other", namespace: ns },
        spec: { name: "Other", slug: "other", image: "registry.invalid/o:1" },
      },
      "test",
    );
    await createDomain("dup", D, "other");
    await requestVerify("dup", "t2");
    const dup = await eventually("the second claim's check", async () => {
      const d = await getDomain("dup");
      return d?.status?.handledVerifyRequest === "t2" ? d : undefined;
    });
    t.false(dup.status?.verified);
    t.is(cond(dup, "Verified")?.reason, "ClaimedByAnotherApp");
    t.falsy(await get("networking.k8s.io/v1", "Ingress", "dup"));
    t.true((await getDomain(D))?.status?.verified, "the first claim keeps the domain");

    await createDomain("bad", "x.apps.it.test");
    const bad = await eventually("the invalid Domain's status", async () => {
      const d = await getDomain("bad");
      return cond(d, "Verified")?.reason === "InvalidDomain" ? d : undefined;
    });
    t.regex(cond(bad, "Verified")!.message, /platform's own domain/);
  },
);

test.serial("soft delete of the App removes the route and keeps the certificate; resume routes again", async (t) => {
  await client.mergePatch({ apiVersion: API_VERSION, kind: "App", namespace: ns, name: "shop" }, { spec: { suspended: true } }, "test");
  await eventually(
    "the route to go",
    async () => !(await get("networking.k8s.io/v1", "Ingress", names.ingress)) && !(await get("v1", "Service", names.service)),
  );
  t.is(cond(await getDomain(D), "Routed")?.reason, "AppSuspended");
  t.truthy(await get("cert-manager.io/v1", "Certificate", names.certificate));
  await client.mergePatch({ apiVersion: API_VERSION, kind: "App", namespace: ns, name: "shop" }, { spec: { suspended: false } }, "test");
  await eventually("the route back", () => get("networking.k8s.io/v1", "Ingress", names.ingress));
  t.pass();
});

test.serial("deleting the Domain removes its route, Certificate and Secret", async (t) => {
  await client.delete(ref(D));
  await eventually(
    "the children to go",
    async () => {
      const [ing, svc, cert] = await Promise.all([
        get("networking.k8s.io/v1", "Ingress", names.ingress),
        get("v1", "Service", names.service),
        get("cert-manager.io/v1", "Certificate", names.certificate),
      ]);
      const secret = await k.core.readNamespacedSecret({ namespace: ns, name: names.secret }).catch(() => undefined);
      return !ing && !svc && !cert && !secret;
    },
    60_000,
  );
  t.pass();
});

// ---- a host another Ingress serves ----------------------------------------------------------------

/** A Domain of the App served applied with kubectl, its DNS set (CNAME and this claim's TXT record), then checked now. */
async function verifiedDomain(host: string, token: string): Promise<Domain> {
  const created: KubeObject = await createDomain(host, host, "served");
  await dns.setCname(host, INGRESS_HOST);
  await dns.setTxt(challengeHost(host), challengeToken(created.metadata.uid!));
  await requestVerify(host, token);
  return eventually(`${host} verified`, async () => {
    const d = await getDomain(host);
    return d?.status?.handledVerifyRequest === token && d.status.verified ? d : undefined;
  });
}

test.serial("control: the same kind of Domain, with no other Ingress serving its host, is routed", async (t) => {
  await client.create(
    {
      apiVersion: API_VERSION,
      kind: "App",
      metadata: { name: "served", namespace: ns },
      spec: { name: "Served", slug: "served", image: "registry.invalid/served:1", port: 8080, visibility: "public" },
    },
    "test",
  );
  await verifiedDomain(CONTROL, "c0");
  const ing = await eventually(
    "the control's Ingress",
    async () => (await get("networking.k8s.io/v1", "Ingress", domainChildNames(CONTROL).ingress)) as k8s.V1Ingress | undefined,
  );
  t.is(ing.spec?.rules?.[0]?.host, CONTROL);
  t.is(cond(await getDomain(CONTROL), "Routed")?.reason, "Routed");
});

test.serial(
  "a Domain applied with kubectl for a host a hand-made Ingress in another namespace serves is verified but not routed, and says why",
  async (t) => {
    await verifiedDomain(SERVED, "s0"); // the hand-made Ingress "storefront" serves it since before the operator started
    const refused = await eventually("the refusal", async () => {
      const d = await getDomain(SERVED);
      return cond(d, "Routed")?.reason === "HostServedElsewhere" ? d : undefined;
    });
    t.is(cond(refused, "Routed")?.status, "False");
    t.is(cond(refused, "Ready")?.reason, "HostServedElsewhere");
    t.notRegex(cond(refused, "Routed")!.message, new RegExp(platformNs), "the other Ingress's namespace is not told to the tenant");
    t.is(refused.status?.tlsStatus, "pending");
    const names = domainChildNames(SERVED);
    t.falsy(await get("networking.k8s.io/v1", "Ingress", names.ingress), "no second Ingress for the host");
    t.falsy(await get("v1", "Service", names.service));
    t.falsy(await get("cert-manager.io/v1", "Certificate", names.certificate), "no certificate for a host someone else serves");
    const told = await eventually("the Event", async () => {
      const events = await k.core.listNamespacedEvent({
        namespace: ns,
        fieldSelector: `involvedObject.kind=Domain,involvedObject.name=${SERVED}`,
      });
      const these = events.items.filter((e) => e.reason === "HostServedElsewhere");
      return these.length ? these : undefined;
    });
    t.deepEqual(
      told.map((e) => [e.type, e.count ?? 1]),
      [["Warning", 1]],
      "one Warning Event",
    );
  },
);

test.serial("once the hand-made Ingress is deleted, the refused Domain is routed without being asked", async (t) => {
  await deleteHandMade("storefront");
  const ing = await eventually(
    "the Domain's own Ingress",
    async () => (await get("networking.k8s.io/v1", "Ingress", domainChildNames(SERVED).ingress)) as k8s.V1Ingress | undefined,
  );
  t.is(ing.spec?.rules?.[0]?.host, SERVED);
  t.is(cond(await getDomain(SERVED), "Routed")?.reason, "Routed");
  t.truthy(await eventually("its Certificate", () => get("cert-manager.io/v1", "Certificate", domainChildNames(SERVED).certificate)));
});

test.serial("a wildcard Ingress covering the host refuses it too; a Domain routed first keeps its host", async (t) => {
  await handMadeIngress("wildcard", `*.${PARENT}`); // covers both hosts of this file, and nothing of another test's
  // SERVED and CONTROL were routed before the wildcard came: they keep their hosts (the later Ingress is the intruder)
  await requestVerify(CONTROL, "c1");
  const kept = await eventually("a reconcile of the control after the wildcard", async () => {
    const d = await getDomain(CONTROL);
    return d?.status?.handledVerifyRequest === "c1" ? d : undefined;
  });
  t.is(cond(kept, "Routed")?.reason, "Routed");
  t.truthy(await get("networking.k8s.io/v1", "Ingress", domainChildNames(CONTROL).ingress));

  // A new claim under the wildcard is refused
  const late = `late.${PARENT}`;
  await verifiedDomain(late, "w0");
  const refused = await eventually("the refusal under the wildcard", async () => {
    const d = await getDomain(late);
    return cond(d, "Routed")?.reason === "HostServedElsewhere" ? d : undefined;
  });
  t.truthy(refused);
  t.falsy(await get("networking.k8s.io/v1", "Ingress", domainChildNames(late).ingress));
  await deleteHandMade("wildcard");
  await eventually("routed once the wildcard is gone", () => get("networking.k8s.io/v1", "Ingress", domainChildNames(late).ingress));
  t.pass();
});
