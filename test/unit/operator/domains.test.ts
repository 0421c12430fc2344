// The pure parts of custom domains (docs/domains.md): name checks, the claim rule, the
// verification decision, the re-check schedule, tlsStatus from a Certificate, the Domain's status
// and Events, and the children's desired state.
import test from "ava";
import {
  blocksNewClaim,
  challengeToken,
  checkDomainName,
  claimHolder,
  decideVerification,
  domainChildNames,
  domainLabelValue,
  nextCheck,
  tlsStatusOf,
  VERIFICATION_WINDOW_MS,
  type DomainObject,
} from "../../../crds/domain.ts";
import { TLS_STATUSES, AppSpec } from "../../../crds/schemas.ts";
import { computeDomainStatus, domainEvents, type DomainStatusInput } from "../../../operator/domain/status.ts";
import { buildDomainChildren } from "../../../operator/domain/builders.ts";

const rules = { baseDomain: "apps.berth.local", ingressHost: "ingress.berth.example" };

test("names are trimmed, lower-cased, IDN to punycode and canonical", (t) => {
  t.deepEqual(checkDomainName("  WWW.Example.COM. ", rules), { ok: true, domain: "www.example.com" });
  t.deepEqual(checkDomainName("bücher.example", rules), { ok: true, domain: "xn--bcher-kva.example" });
  t.deepEqual(checkDomainName("xn--bcher-kva.example", rules), { ok: true, domain: "xn--bcher-kva.example" });
  t.deepEqual(checkDomainName("a-b.c-d.co", rules), { ok: true, domain: "a-b.c-d.co" });
});

test("bad names are refused with a code saying why", (t) => {
  const code = (n: string) => {
    const r = checkDomainName(n, rules);
    return r.ok ? "ok" : r.code;
  };
  t.is(code("*.example.com"), "wildcard_not_supported");
  t.is(code("localhost"), "invalid_domain", "a single label is not fully qualified");
  t.is(code(""), "invalid_domain");
  t.is(code("exa mple.com"), "invalid_domain");
  t.is(code("-bad.example.com"), "invalid_domain");
  t.is(code("bad-.example.com"), "invalid_domain");
  t.is(code("under_score.example.com"), "invalid_domain");
  t.is(code("10.0.0.1"), "invalid_domain", "an IP address is not a domain");
  t.is(code(`${"a".repeat(64)}.example.com`), "invalid_domain", "labels are at most 63");
  t.is(code(`${Array.from({ length: 60 }, () => "abcd").join(".")}.com`), "invalid_domain", "names are at most 253");
  t.is(code("apps.berth.local"), "platform_domain");
  t.is(code("hello.apps.berth.local"), "platform_domain");
  t.is(code("HELLO.Apps.Berth.Local."), "platform_domain");
  t.is(code("ingress.berth.example"), "platform_domain");
  t.is(code("notapps.berth.local"), "ok", "a sibling of the base domain is someone's own name");
});

const dom = (o: { uid: string; verified?: boolean; verifiedAt?: string; created?: string; deleting?: boolean }): DomainObject => ({
  metadata: {
    name: "www.example.com",
    uid: o.uid,
    creationTimestamp: o.created ?? "2026-01-01T00:00:00Z",
    ...(o.deleting ? { deletionTimestamp: "2026-01-02T00:00:00Z" } : {}),
  },
  spec: { appRef: { name: "a" }, domain: "www.example.com" },
  status: { ...(o.verified !== undefined ? { verified: o.verified } : {}), ...(o.verifiedAt ? { verifiedAt: o.verifiedAt } : {}) },
});

test("the first verified claim holds the domain; unverified and deleted claims hold nothing", (t) => {
  t.is(claimHolder([dom({ uid: "a" }), dom({ uid: "b", verified: false })]), undefined);
  t.is(
    claimHolder([
      dom({ uid: "a", verified: true, verifiedAt: "2026-01-02T00:00:00Z" }),
      dom({ uid: "b", verified: true, verifiedAt: "2026-01-01T12:00:00Z" }),
    ])?.metadata.uid,
    "b",
  );
  t.is(
    claimHolder([
      dom({ uid: "a", verified: true, verifiedAt: "2026-01-01T00:00:00Z", deleting: true }),
      dom({ uid: "b", verified: true, verifiedAt: "2026-01-02T00:00:00Z" }),
    ])?.metadata.uid,
    "b",
  );
  const same = "2026-01-01T00:00:00Z";
  t.is(
    claimHolder([
      dom({ uid: "z", verified: true, verifiedAt: same, created: "2025-12-01T00:00:00Z" }),
      dom({ uid: "y", verified: true, verifiedAt: same, created: "2025-12-02T00:00:00Z" }),
    ])?.metadata.uid,
    "z",
    "a tie goes to the older Domain",
  );
});

test("a new claim is blocked only by a verified claim: an unverified one, however new, keeps nobody out", (t) => {
  t.true(blocksNewClaim(dom({ uid: "a", verified: true })));
  t.false(blocksNewClaim(dom({ uid: "a" })), "a squatter's claim, made before the owner set DNS");
  t.false(blocksNewClaim(dom({ uid: "a", verified: false })));
  t.false(blocksNewClaim(dom({ uid: "a", verified: true, deleting: true })));
});

const ING = "ingress.berth.example";
const TOKEN = challengeToken("uid-of-this-claim");
const obs = (o: Partial<{ cname: string[]; addresses: string[]; ingressAddresses: string[]; txt: string[]; error: string }>) => ({
  cname: [],
  addresses: [],
  ingressAddresses: ["10.0.0.1"],
  txt: [TOKEN],
  ...o,
});

test("verification: a CNAME to the ingress host, or only the ingress host's addresses", (t) => {
  t.like(decideVerification("www.example.com", ING, obs({ cname: ["Ingress.Berth.Example."], addresses: ["10.0.0.1"] }), TOKEN), {
    verified: true,
    method: "cname",
    reason: "CnameMatches",
  });
  t.like(decideVerification("example.com", ING, obs({ addresses: ["10.0.0.1"] }), TOKEN), { verified: true, method: "address" });
  t.like(
    decideVerification("example.com", ING, obs({ addresses: ["10.0.0.1", "fd00::1"], ingressAddresses: ["10.0.0.1", "fd00::1"] }), TOKEN),
    { verified: true },
  );
  t.like(
    decideVerification("example.com", ING, obs({ addresses: ["10.0.0.1", "10.9.9.9"] }), TOKEN),
    { verified: false, reason: "WrongAddress" },
    "every address must be the ingress's",
  );
  t.like(decideVerification("www.example.com", ING, obs({ cname: ["elsewhere.example.net"], addresses: ["10.9.9.9"] }), TOKEN), {
    verified: false,
    reason: "WrongCnameTarget",
  });
  t.like(
    decideVerification("www.example.com", ING, obs({ cname: ["alias.example.net"], addresses: ["10.0.0.1"] }), TOKEN),
    { verified: true, method: "address" },
    "a chain that ends at the ingress's addresses",
  );
  const none = decideVerification("www.example.com", ING, obs({ txt: [] }), TOKEN);
  t.like(none, { verified: false, reason: "RecordNotFound" });
  t.regex(
    none.message,
    /www\.example\.com CNAME ingress\.berth\.example; and create the TXT record _berth-challenge\.www\.example\.com with the value berth-verify-[0-9a-f]{32}/,
  );
  t.like(decideVerification("www.example.com", ING, obs({ error: "ETIMEOUT" }), TOKEN), { verified: false, reason: "DnsError" });
  t.like(decideVerification("example.com", ING, obs({ addresses: ["10.0.0.1"], ingressAddresses: [] }), TOKEN), {
    verified: false,
    reason: "IngressHostUnresolved",
  });
});

test("ownership: pointing at the ingress proves nothing without this claim's own TXT record", (t) => {
  // a CNAME left dangling by a customer who has gone: it points at the ingress for anyone
  const dangling = decideVerification("shop.example.com", ING, obs({ cname: [ING], txt: [] }), TOKEN);
  t.like(dangling, { verified: false, reason: "ChallengeNotFound" });
  t.regex(
    dangling.message,
    /is a CNAME of ingress\.berth\.example, but this claim is not proven: create the TXT record _berth-challenge\.shop\.example\.com/,
  );
  // the record of another claim (the departed customer's, or the owner's own claim) is not this claim's
  const other = challengeToken("uid-of-another-claim");
  t.not(other, TOKEN);
  t.like(decideVerification("shop.example.com", ING, obs({ cname: [ING], txt: [other, "v=spf1 -all"] }), TOKEN), {
    verified: false,
    reason: "ChallengeNotFound",
  });
  const proven = decideVerification("shop.example.com", ING, obs({ cname: [ING], txt: ["v=spf1 -all", TOKEN] }), TOKEN);
  t.like(proven, { verified: true, reason: "CnameMatches" });
  t.regex(proven.message, /proves this claim/);
  t.regex(TOKEN, /^berth-verify-[0-9a-f]{32}$/);
  t.is(challengeToken("uid-of-this-claim"), TOKEN, "the same claim, the same value");
});

test("the re-check schedule: a tenth of the age, 30 s to 30 min apart, stopping at 48 hours", (t) => {
  const c = new Date("2026-01-01T00:00:00Z");
  const at = (ms: number) => new Date(c.getTime() + ms);
  t.deepEqual(nextCheck(c, undefined, c), { at: c }, "the first check is at once");
  t.deepEqual(nextCheck(c, at(1000), at(1000)), { at: at(31_000) }, "at least 30 s");
  t.deepEqual(nextCheck(c, at(3600_000), at(3600_000)), { at: at(3600_000 + 360_000) }, "an hour old: 6 minutes");
  t.deepEqual(nextCheck(c, at(20 * 3600_000), at(20 * 3600_000)), { at: at(20 * 3600_000 + 30 * 60_000) }, "at most 30 minutes");
  t.deepEqual(
    nextCheck(c, at(VERIFICATION_WINDOW_MS - 60_000), at(VERIFICATION_WINDOW_MS - 60_000)),
    { at: at(VERIFICATION_WINDOW_MS) },
    "never past the window",
  );
  t.deepEqual(nextCheck(c, at(1000), at(VERIFICATION_WINDOW_MS)), { expired: true });
  // Over the window: about 120 checks.
  let n = 0,
    last: Date | undefined,
    now = c;
  for (;;) {
    const r = nextCheck(c, last, now);
    if ("expired" in r) break;
    n++;
    last = r.at;
    now = r.at;
    if (r.at.getTime() >= c.getTime() + VERIFICATION_WINDOW_MS) break;
  }
  t.true(n > 80 && n < 160, `${n} checks`);
});

test("tlsStatus follows the Certificate through the complete set", (t) => {
  const now = new Date("2026-03-01T00:00:00Z");
  const seen = new Set<string>();
  const s = (c: Parameters<typeof tlsStatusOf>[0]) => {
    const r = tlsStatusOf(c, now).status;
    seen.add(r);
    return r;
  };
  t.is(s(undefined), "pending");
  t.is(s({}), "issuing");
  t.is(
    s({
      conditions: [
        { type: "Ready", status: "False", reason: "DoesNotExist" },
        { type: "Issuing", status: "True" },
      ],
    }),
    "issuing",
  );
  t.is(
    s({ conditions: [{ type: "Ready", status: "True" }], notAfter: "2026-05-01T00:00:00Z", renewalTime: "2026-04-01T00:00:00Z" }),
    "active",
  );
  t.is(
    s({
      conditions: [
        { type: "Ready", status: "True" },
        { type: "Issuing", status: "True" },
      ],
      notAfter: "2026-05-01T00:00:00Z",
      renewalTime: "2026-04-01T00:00:00Z",
    }),
    "active",
    "a renewal under way before its time",
  );
  t.is(
    s({ conditions: [{ type: "Ready", status: "True" }], notAfter: "2026-03-10T00:00:00Z", renewalTime: "2026-02-20T00:00:00Z" }),
    "expiring",
  );
  t.is(s({ conditions: [{ type: "Ready", status: "False", reason: "Expired" }], notAfter: "2026-02-28T00:00:00Z" }), "expired");
  t.is(
    s({
      conditions: [
        { type: "Ready", status: "False" },
        { type: "Issuing", status: "False", reason: "Failed", message: "the issuer refused" },
      ],
      lastFailureTime: "2026-02-28T00:00:00Z",
    }),
    "failed",
  );
  t.is(s({ conditions: [{ type: "Ready", status: "False" }], lastFailureTime: "2026-02-28T00:00:00Z" }), "failed");
  t.deepEqual([...seen].sort(), [...TLS_STATUSES].sort(), "every status of the set is reachable");
});

const base = (o: Partial<DomainStatusInput> = {}): DomainStatusInput => ({
  old: undefined,
  generation: 1,
  now: new Date("2026-01-01T00:01:00Z"),
  domain: "www.example.com",
  dnsTarget: ING,
  schedule: { at: new Date("2026-01-01T00:01:30Z") },
  routed: { ok: false, reason: "NotVerified", message: "routed once verified" },
  tls: { status: "pending", message: "none yet" },
  ...o,
});

test("status: a failed check says why and when the next one is; verification then routing then TLS", (t) => {
  const failed = computeDomainStatus(
    base({ check: { verification: { verified: false, reason: "RecordNotFound", message: "no record" } }, request: "tok" }),
  );
  t.false(failed.verified);
  t.is(failed.nextCheckAt, "2026-01-01T00:01:30.000Z");
  t.is(failed.handledVerifyRequest, "tok");
  t.is(failed.lastCheckedAt, "2026-01-01T00:01:00.000Z");
  t.like(
    failed.conditions?.find((c) => c.type === "Verified"),
    { status: "False", reason: "RecordNotFound" },
  );
  t.deepEqual(
    domainEvents(undefined, failed).map((e) => [e.type, e.reason]),
    [["Warning", "RecordNotFound"]],
  );
  t.deepEqual(
    domainEvents(
      failed,
      computeDomainStatus(
        base({ old: failed, check: { verification: { verified: false, reason: "RecordNotFound", message: "no record" } } }),
      ),
    ),
    [],
    "the same failure again tells nothing new",
  );

  const again = computeDomainStatus(base({ old: failed }));
  t.deepEqual(again, failed, "a reconcile without a check changes nothing (no write)");
  t.is(again.conditions!.find((c) => c.type === "Verified")!.message, "no record. Checked again at 2026-01-01T00:01:30.000Z.");

  const ok = computeDomainStatus(
    base({
      old: failed,
      now: new Date("2026-01-01T00:02:00Z"),
      check: { verification: { verified: true, reason: "CnameMatches", message: "cname ok" } },
    }),
  );
  t.true(ok.verified);
  t.is(ok.verifiedAt, "2026-01-01T00:02:00.000Z");
  t.is(ok.nextCheckAt, undefined);
  t.deepEqual(
    domainEvents(failed, ok).map((e) => [e.type, e.reason]),
    [["Normal", "Verified"]],
  );

  const serving = computeDomainStatus(
    base({
      old: ok,
      routed: { ok: true, reason: "Routed", message: "routes" },
      tls: { status: "active", message: "valid", notAfter: "2026-04-01T00:00:00Z" },
    }),
  );
  t.true(serving.verified, "verification sticks without a check");
  t.is(serving.verifiedAt, ok.verifiedAt);
  t.is(serving.tlsStatus, "active");
  t.like(
    serving.conditions?.find((c) => c.type === "Ready"),
    { status: "True", reason: "Serving" },
  );
  t.deepEqual(
    domainEvents(ok, serving).map((e) => e.reason),
    ["Routed", "CertificateActive"],
  );
});

test("status: 48 hours without a record stop the checks and the condition says so; a claim elsewhere unverifies", (t) => {
  const expired = computeDomainStatus(
    base({ schedule: { expired: true }, check: { verification: { verified: false, reason: "RecordNotFound", message: "no record" } } }),
  );
  t.like(
    expired.conditions?.find((c) => c.type === "Verified"),
    { status: "False", reason: "VerificationExpired" },
  );
  t.regex(expired.conditions!.find((c) => c.type === "Verified")!.message, /no record.*Automatic checks stopped 48 hours/);
  t.is(expired.nextCheckAt, undefined);
  t.is(domainEvents(undefined, expired)[0]?.type, "Warning");
  const was = computeDomainStatus(base({ check: { verification: { verified: true, reason: "CnameMatches", message: "ok" } } }));
  const lost = computeDomainStatus(base({ old: was, claimedElsewhere: true }));
  t.false(lost.verified);
  t.like(
    lost.conditions?.find((c) => c.type === "Verified"),
    { reason: "ClaimedByAnotherApp" },
  );
});

test("children: a Service to the target port, an Ingress with the domain and its TLS Secret, a Certificate from the ClusterIssuer", (t) => {
  const d: DomainObject = {
    metadata: { name: "www.example.com", namespace: "ws-1", uid: "u1" },
    spec: { appRef: { name: "hello" }, domain: "www.example.com", targetPort: 9090 },
  };
  const spec = AppSpec.parse({ name: "Hello", slug: "hello", image: "img", port: 8080, visibility: "public" });
  const [svc, ing, cert] = buildDomainChildren(d, { name: "hello", spec }, { issuer: "berth-ca" }) as [any, any, any]; // eslint-disable-line @typescript-eslint/no-explicit-any
  const names = domainChildNames("www.example.com");
  t.is(svc.metadata.name, names.service);
  t.regex(names.service, /^domain-[0-9a-f]{12}$/);
  t.deepEqual(svc.spec.selector, { "berth.dev/app": "hello" });
  t.is(svc.spec.ports[0].targetPort, 9090);
  t.is(ing.spec.rules[0].host, "www.example.com");
  t.deepEqual(ing.spec.tls, [{ hosts: ["www.example.com"], secretName: "www.example.com-tls" }]);
  t.is(ing.metadata.annotations["berth.dev/visibility"], "public");
  t.is(cert.kind, "Certificate");
  t.deepEqual(cert.spec.issuerRef, { group: "cert-manager.io", kind: "ClusterIssuer", name: "berth-ca" });
  t.is(cert.spec.secretName, "www.example.com-tls");
  for (const o of [svc, ing, cert]) t.like(o.metadata.ownerReferences[0], { kind: "Domain", uid: "u1", controller: true });
  t.is(buildDomainChildren(d, { name: "hello", spec }, {}).length, 2, "no issuer: no Certificate and no TLS");
  const priv = AppSpec.parse({ name: "Hello", slug: "hello", image: "img", port: 8080, visibility: "private" });
  const [, guarded] = buildDomainChildren(
    d,
    { name: "hello", spec: priv },
    { edge: { controller: "traefik", forwardAuthUrl: "http://api/api/v1/forward-auth" } },
  ) as [any, any]; // eslint-disable-line @typescript-eslint/no-explicit-any
  t.is(
    guarded.metadata.annotations["traefik.ingress.kubernetes.io/router.middlewares"],
    "ws-1-hello@kubernetescrd",
    "a private service's domain passes the same edge check as its own host",
  );
  const [, open] = buildDomainChildren(
    d,
    { name: "hello", spec },
    { edge: { controller: "traefik", forwardAuthUrl: "http://api/api/v1/forward-auth" } },
  ) as [any, any]; // eslint-disable-line @typescript-eslint/no-explicit-any
  t.is(
    open.metadata.annotations["traefik.ingress.kubernetes.io/router.middlewares"],
    "ws-1-hello@kubernetescrd",
    "a public service's domain drops clients' X-Berth-* headers as its own host does",
  );
  t.is(domainLabelValue("x".repeat(70)).length <= 63, true);
});
