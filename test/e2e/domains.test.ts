// Custom domains end to end (docs/domains.md) on the real node: an App of the sample
// image, a domain added through the REST API, verified against a real DNS server (Pebble's
// challenge test server, records set by the test), routed by the operator (its own Ingress) and
// given a certificate by a real cert-manager controller from a CA ClusterIssuer, then served over
// HTTPS through Traefik's websecure entrypoint with a certificate that verifies against that CA.
import test from "ava";
import { randomBytes } from "node:crypto";
import { API_VERSION } from "../../crds/schemas.ts";
import { domainChildNames } from "../../crds/domain.ts";
import { KubeClient, type KubeObject } from "../../kube/client.ts";
import type { RunningOperator } from "../../operator/main.ts";
import { startApi, type TestApi } from "../helpers/api.ts";
import { TestDns } from "../helpers/dns.ts";
import { issuerCa, viaIngressTls } from "../helpers/https.ts";
import { deleteNamespace, eventually, kube, testNamespace } from "../helpers/kube.ts";
import { startTestOperator } from "../helpers/operator.ts";
import { need } from "../helpers/e2e.ts";

const TLS_URL = need("BERTH_INGRESS_TLS_URL");
const SAMPLE = need("BERTH_SAMPLE_IMAGE");
const RESOLVER = need("BERTH_DNS_RESOLVER");
const ISSUER = need("BERTH_DOMAIN_ISSUER");
const dns = new TestDns(need("BERTH_DNS_MANAGEMENT_URL"));
const BASE = "apps.e2e.local";
const INGRESS_HOST = "ingress.e2e.test";
const INGRESS_ADDRESS = need("BERTH_NODE_IP"); // the ingress listens on the real node
const run = randomBytes(3).toString("hex");
const SHOP = `shop-${run}.example.test`;
const APEX = `apex-${run}.test`;
const LATE = `late-${run}.example.test`;
const SERVED = `served-${run}.example.test`;
const WILD = `wild-${run}.example.test`;

const k = kube();
const client = new KubeClient(k.kc);
let api: TestApi;
let op: RunningOperator;
let ca: string;

test.before(async () => {
  api = await startApi({
    env: {
      BERTH_BASE_DOMAIN: BASE,
      BERTH_INGRESS_HOST: INGRESS_HOST,
      BERTH_DOMAIN_VERIFY_WAIT_MS: "20000",
      BERTH_PUBLIC_URL: `https://console-${run}.example.test`,
    },
  });
  op = await startTestOperator({
    namespace: api.namespace,
    env: {
      BERTH_BASE_DOMAIN: BASE,
      BERTH_INGRESS_HOST: INGRESS_HOST,
      BERTH_DNS_RESOLVER: RESOLVER,
      BERTH_DOMAIN_ISSUER: ISSUER,
      BERTH_OPERATOR_RESYNC_SECONDS: "30",
      BERTH_WORKLOAD_NODE_SELECTOR: JSON.stringify({ "berth.dev/node": "real" }),
      BERTH_WORKLOAD_TOLERATIONS: JSON.stringify([{ key: "berth.dev/real-node", operator: "Exists", effect: "NoSchedule" }]),
    },
  });
  await dns.addA(INGRESS_HOST, [INGRESS_ADDRESS]);
  ca = await issuerCa(k.core, ISSUER);
});
test.after.always(async () => {
  await op?.stop();
  await api?.stop();
  for (const h of [SHOP, APEX, LATE]) {
    await dns.clearCname(h).catch(() => undefined);
    await dns.clearA(h).catch(() => undefined);
    await dns.clearTxt(`_berth-challenge.${h}`).catch(() => undefined);
  }
});

const apps = () => `/workspaces/${api.workspaceId}/apps`;
const domains = () => `${apps()}/web/domains`;
type Domain = KubeObject & { status?: { conditions?: { type: string; status: string; reason: string }[] } };

// eslint-disable-next-line @typescript-eslint/no-explicit-any
async function domainOf(name: string): Promise<Record<string, any> | undefined> {
  const r = await api.fetchJson("GET", domains());
  return (r.body as Record<string, any>[]).find((d) => d.domain === name); // eslint-disable-line @typescript-eslint/no-explicit-any
}

test.serial(
  "a domain is added, refused verification without a record, verified once the CNAME exists, and served over HTTPS with a certificate from the CA",
  async (t) => {
    const created = await api.fetchJson("POST", apps(), {
      body: { name: "Web", slug: "web", image: SAMPLE, port: 8080, visibility: "public" },
    });
    t.is(created.status, 201, created.text);
    await eventually(
      "web to be active",
      async () => (await api.fetchJson("GET", `${apps()}/web`)).body?.status === "active",
      180_000,
      1000,
    );

    const added = await api.fetchJson("POST", domains(), { body: { domain: `  ${SHOP.toUpperCase()}. ` } });
    t.is(added.status, 201, added.text);
    t.like(added.body, { id: SHOP, domain: SHOP, targetPort: 8080, verified: false, tlsStatus: "pending", dnsTarget: INGRESS_HOST });
    t.is(added.body.challenge.name, `_berth-challenge.${SHOP}`);
    t.regex(added.body.challenge.value, /^berth-verify-[0-9a-f]{32}$/);
    t.is(added.headers.get("location"), `/api/v1${domains()}/${SHOP}`);

    const failed = await api.fetchJson("POST", `${domains()}/${SHOP}/verify`);
    t.is(failed.status, 200, failed.text);
    t.like(failed.body, { verified: false, tlsStatus: "pending", verification: { status: "failed", reason: "RecordNotFound" } });
    t.regex(failed.body.verification.message, new RegExp(`${SHOP.replace(/\./g, "\\.")} CNAME ${INGRESS_HOST.replace(/\./g, "\\.")}`));
    t.truthy(failed.body.verification.nextCheckAt, "the operator checks again later");

    await dns.setCname(SHOP, INGRESS_HOST);
    const pointing = await api.fetchJson("POST", `${domains()}/${SHOP}/verify`);
    t.like(
      pointing.body,
      { verified: false, verification: { reason: "ChallengeNotFound" } },
      "pointing at the ingress alone proves nothing",
    );
    await dns.setTxt(added.body.challenge.name, added.body.challenge.value);
    const ok = await api.fetchJson("POST", `${domains()}/${SHOP}/verify`);
    t.is(ok.status, 200, ok.text);
    t.like(ok.body, { verified: true, verification: { status: "verified", reason: "CnameMatches", nextCheckAt: null } });

    const active = await eventually(
      "tlsStatus active",
      async () => {
        const d = await domainOf(SHOP);
        return d?.tlsStatus === "active" ? d : undefined;
      },
      120_000,
      500,
    );
    t.truthy(active.tls.expiresAt);
    const cert = await client.get<KubeObject & { status?: { conditions?: { type: string; status: string }[] } }>({
      apiVersion: "cert-manager.io/v1",
      kind: "Certificate",
      namespace: api.namespace,
      name: SHOP,
    });
    t.is(cert?.status?.conditions?.find((c) => c.type === "Ready")?.status, "True", "cert-manager reports the Certificate Ready");

    const res = await eventually(
      "the ingress to serve the domain over HTTPS",
      async () => {
        try {
          const r = await viaIngressTls(TLS_URL, SHOP, ca);
          return r.status === 200 ? r : undefined;
        } catch {
          return undefined;
        }
      },
      60_000,
      500,
    );
    t.regex(res.text, /^Hello from Berth's sample service/, "answered by the pod");
    t.regex(
      res.certificate.subjectaltname ?? "",
      new RegExp(`DNS:${SHOP.replace(/\./g, "\\.")}`),
      "the certificate names the domain and verified against the CA",
    );

    const secret = await k.core.readNamespacedSecret({ namespace: api.namespace, name: domainChildNames(SHOP).secret });
    t.true(
      (secret.metadata?.ownerReferences ?? []).some((o) => o.kind === "Domain" && o.name === SHOP),
      "the certificate's Secret belongs to the Domain",
    );
    const events = await k.core.listNamespacedEvent({
      namespace: api.namespace,
      fieldSelector: `involvedObject.kind=Domain,involvedObject.name=${SHOP}`,
    });
    const reasons = new Set(events.items.map((e) => e.reason));
    for (const r of ["RecordNotFound", "Verified", "CertificateRequested", "Routed", "CertificateActive"])
      t.true(reasons.has(r), `Event ${r} (${[...reasons].join(", ")})`);
  },
);

test.serial("an apex is verified by A records equal to the ingress host's addresses", async (t) => {
  const added = await api.fetchJson("POST", domains(), { body: { domain: APEX } });
  t.is(added.status, 201);
  await dns.setTxt(added.body.challenge.name, added.body.challenge.value);
  await dns.addA(APEX, ["10.9.9.9"]);
  const wrong = await api.fetchJson("POST", `${domains()}/${APEX}/verify`);
  t.like(wrong.body, { verified: false, verification: { reason: "WrongAddress" } });
  await dns.clearA(APEX);
  await dns.addA(APEX, [INGRESS_ADDRESS]);
  const ok = await api.fetchJson("POST", `${domains()}/${APEX}/verify`);
  t.like(ok.body, { verified: true, verification: { reason: "AddressMatches" } });
});

test.serial("another workspace cannot claim the domain; bad names are refused with problem+json", async (t) => {
  const other = await api.createWorkspace("other");
  const app = await api.fetchJson("POST", `/workspaces/${other.workspaceId}/apps`, {
    key: other.apiKey,
    body: { name: "Thief", slug: "thief", image: SAMPLE, port: 8080 },
  });
  t.is(app.status, 201, app.text);
  const taken = await api.fetchJson("POST", `/workspaces/${other.workspaceId}/apps/thief/domains`, {
    key: other.apiKey,
    body: { domain: SHOP },
  });
  t.is(taken.status, 409, taken.text);
  t.is(taken.headers.get("content-type"), "application/problem+json");
  t.is(taken.body.code ?? taken.body.type?.split("/").pop(), "domain_taken");
  const again = await api.fetchJson("POST", domains(), { body: { domain: SHOP } });
  t.is(again.status, 409);
  for (const [name, code] of [
    ["*.example.test", "wildcard_not_supported"],
    [`hello.${BASE}`, "platform_domain"],
    [BASE, "platform_domain"],
    ["nodot", "invalid_domain"],
    ["bad_name.example.test", "invalid_domain"],
    [`${"a".repeat(64)}.example.test`, "invalid_domain"],
  ] as const) {
    const r = await api.fetchJson("POST", domains(), { body: { domain: name } });
    t.is(r.status, 422, `${name}: ${r.text}`);
    t.is(r.headers.get("content-type"), "application/problem+json");
    t.true(r.text.includes(code), `${name}: ${r.text}`);
  }
  const own = await api.fetchJson("POST", domains(), { body: { domain: `console-${run}.example.test` } });
  t.is(own.status, 422, "the API's own public host is never a custom domain");
  t.is(own.body.code, "domain_reserved");
  const missing = await api.fetchJson("POST", domains(), { body: {} });
  t.is(missing.status, 422, "domain is required");
  t.is((await api.fetchJson("POST", domains(), { body: { domain: "x.example.test", targetPort: 70000 } })).status, 422);
  t.is((await api.fetchJson("POST", `${domains()}/nope.example.test/verify`)).status, 404);
});

test.serial("a claim made before the owner set DNS keeps nobody out: the owner claims and verifies with its own TXT record", async (t) => {
  const squatter = await api.createWorkspace("squatter");
  t.is(
    (
      await api.fetchJson("POST", `/workspaces/${squatter.workspaceId}/apps`, {
        key: squatter.apiKey,
        body: { name: "Squat", slug: `squat-${run}`, image: SAMPLE, port: 8080 },
      })
    ).status,
    201,
  );
  const early = await api.fetchJson("POST", `/workspaces/${squatter.workspaceId}/apps/squat-${run}/domains`, {
    key: squatter.apiKey,
    body: { domain: LATE },
  });
  t.is(early.status, 201, early.text);
  const owner = await api.fetchJson("POST", domains(), { body: { domain: LATE } });
  t.is(owner.status, 201, `an unverified claim blocks nobody: ${owner.text}`);
  t.not(owner.body.challenge.value, early.body.challenge.value, "each claim has its own value");
  await dns.setCname(LATE, INGRESS_HOST);
  await dns.setTxt(owner.body.challenge.name, owner.body.challenge.value);
  const ok = await api.fetchJson("POST", `${domains()}/${LATE}/verify`);
  t.like(ok.body, { verified: true, verification: { reason: "CnameMatches" } });
  // now verified, it is the owner's: a new claim by anyone else is refused
  t.is(
    (
      await api.fetchJson("POST", `/workspaces/${squatter.workspaceId}/apps/squat-${run}/domains`, {
        key: squatter.apiKey,
        body: { domain: LATE },
      })
    ).status,
    409,
  );
  t.is((await api.fetchJson("DELETE", `${domains()}/${LATE}`)).status, 204);
});

/** An Ingress made by hand in `namespace`, as a platform team would (none of Berth's labels or owners). */
const handMadeIngress = (namespace: string, name: string, host: string) =>
  client.create(
    {
      apiVersion: "networking.k8s.io/v1",
      kind: "Ingress",
      metadata: { name, namespace },
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

/** Adds `domain` to web and answers the response; a 201 is removed again (and waited out) so that the name can be added anew. */
async function tryDomain(domain: string) {
  const r = await api.fetchJson("POST", domains(), { body: { domain } });
  if (r.status === 201) {
    const removed = await api.fetchJson("DELETE", `${domains()}/${domain}`);
    if (removed.status !== 204) throw new Error(`DELETE of ${domain} answered ${removed.status}: ${removed.text}`);
    await eventually(
      `the Domain ${domain} to go`,
      async () => !(await client.get({ apiVersion: API_VERSION, kind: "Domain", namespace: api.namespace, name: domain })),
    );
  }
  return r;
}

test.serial(
  "a domain another Ingress in the cluster serves is refused with domain_served, without naming it; the same name is accepted without it",
  async (t) => {
    const platform = await testNamespace(k, "e2e-platform");
    t.teardown(() => deleteNamespace(k, platform));

    const control = await tryDomain(SERVED);
    t.is(control.status, 201, `control: nothing serves the name yet: ${control.text}`);

    await handMadeIngress(platform, "storefront", SERVED);
    const served = await tryDomain(SERVED);
    t.is(served.status, 409, served.text);
    t.is(served.headers.get("content-type"), "application/problem+json");
    t.is(served.body.code, "domain_served");
    t.regex(served.body.detail, /already served by another Ingress in the cluster/);
    t.false(served.text.includes(platform), "the other Ingress's namespace is not told");
    t.false(served.text.includes("storefront"), "nor its name");
    t.is(
      (await api.fetchJson("POST", domains(), { body: { domain: SERVED.toUpperCase() } })).body.code,
      "domain_served",
      "whatever the case",
    );

    // A wildcard host covers exactly one label
    await handMadeIngress(platform, "wildcard", `*.${WILD}`);
    t.is((await tryDomain(`shop.${WILD}`)).body.code, "domain_served");
    t.is((await tryDomain(WILD)).status, 201, "not the wildcard's own parent");
    t.is((await tryDomain(`a.shop.${WILD}`)).status, 201, "nor two labels under it");

    // Once the other Ingress is gone, the name is free
    await client.delete({ apiVersion: "networking.k8s.io/v1", kind: "Ingress", namespace: platform, name: "storefront" });
    const after = await tryDomain(SERVED);
    t.is(after.status, 201, after.text);
  },
);

test.serial("delete removes the route, the Certificate and its Secret", async (t) => {
  const names = domainChildNames(SHOP);
  t.is((await api.fetchJson("DELETE", `${domains()}/${SHOP}`)).status, 204);
  await eventually(
    "the Domain and its children to go",
    async () => {
      const [d, ing, cert, svc] = await Promise.all([
        client.get<Domain>({ apiVersion: API_VERSION, kind: "Domain", namespace: api.namespace, name: SHOP }),
        client.get({ apiVersion: "networking.k8s.io/v1", kind: "Ingress", namespace: api.namespace, name: names.ingress }),
        client.get({ apiVersion: "cert-manager.io/v1", kind: "Certificate", namespace: api.namespace, name: names.certificate }),
        client.get({ apiVersion: "v1", kind: "Service", namespace: api.namespace, name: names.service }),
      ]);
      const secret = await k.core.readNamespacedSecret({ namespace: api.namespace, name: names.secret }).catch(() => undefined);
      return !d && !ing && !cert && !svc && !secret;
    },
    60_000,
    500,
  );
  t.false((await api.fetchJson("GET", domains())).body.some((d: { domain: string }) => d.domain === SHOP));
  await eventually(
    "the ingress to stop routing the host",
    async () => (await viaIngressTls(TLS_URL, SHOP, undefined).catch(() => ({ status: 0 }))).status === 404,
    30_000,
    500,
  );
  t.is((await api.fetchJson("DELETE", `${domains()}/${SHOP}`)).status, 404);
});
