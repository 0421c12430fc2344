// What the API and the operator share about custom domains (docs/domains.md): the name rules, the
// claim rule (one App per domain in the whole cluster), the DNS verification decision, the
// re-check schedule and the TLS status from a cert-manager Certificate. Pure: no I/O, time passed in.
import { createHash } from "node:crypto";
import { domainToASCII } from "node:url";
import { API_VERSION, FQDN, type DomainSpec, type DomainStatus, type TlsStatus } from "./schemas.ts";

/** A Domain as read from the API server (the clients' object types satisfy it). */
export interface DomainObject {
  apiVersion?: string;
  kind?: string;
  metadata: {
    name?: string;
    namespace?: string;
    uid?: string;
    generation?: number;
    resourceVersion?: string;
    creationTimestamp?: string | Date;
    deletionTimestamp?: string | Date;
    labels?: Record<string, string>;
    annotations?: Record<string, string>;
  };
  spec: DomainSpec;
  status?: DomainStatus;
}

export function domainRef(namespace: string, name: string): { apiVersion: string; kind: "Domain"; namespace: string; name: string } {
  return { apiVersion: API_VERSION, kind: "Domain", namespace, name };
}

/**
 * Annotation by which a check is asked for now (POST .../verify writes it; `kubectl annotate` does
 * the same): its value is an opaque token that the operator copies to status.handledVerifyRequest
 * once it has checked.
 */
export const VERIFY_REQUEST_ANNOTATION = "berth.dev/verify-requested";
/** Label on a Domain's children (Service, Ingress, Certificate, the certificate's Secret) naming it. */
export const DOMAIN_LABEL = "berth.dev/domain";

/** DNS propagation can take this long (docs/spec.md part 8): unverified domains are re-checked until then. */
export const VERIFICATION_WINDOW_MS = 48 * 3600_000;
const MIN_RECHECK_MS = 30_000;
const MAX_RECHECK_MS = 30 * 60_000;

// ---- names --------------------------------------------------------------------------------------

export type NameCheck = { ok: true; domain: string } | { ok: false; code: string; message: string };

/**
 * A requested domain as Berth stores it, or why it is refused: surrounding spaces and one trailing
 * dot dropped, lower-cased, an internationalized name converted to punycode (IDNA, as browsers
 * do); then a fully qualified name of at least two labels, each at most 63 characters, at most 253
 * in all, a letter-led top-level label (so no IP address); no wildcard; not the platform's base
 * domain nor a name under it (those are the Apps' default hosts); not the ingress host.
 */
export function checkDomainName(input: string, rules: { baseDomain: string; ingressHost?: string | undefined }): NameCheck {
  let name = input.trim();
  if (name.endsWith(".")) name = name.slice(0, -1);
  if (name.includes("*"))
    return {
      ok: false,
      code: "wildcard_not_supported",
      message: "Wildcard domains are not supported: add each host (www.example.com, shop.example.com) as its own domain.",
    };
  if (name.length === 0) return { ok: false, code: "invalid_domain", message: "The domain is empty." };
  const ascii = domainToASCII(name.toLowerCase());
  if (!ascii) return { ok: false, code: "invalid_domain", message: `${input} is not a valid domain name.` };
  if (ascii.length > 253) return { ok: false, code: "invalid_domain", message: `${ascii} is longer than 253 characters.` };
  const labels = ascii.split(".");
  if (labels.length < 2)
    return { ok: false, code: "invalid_domain", message: `${ascii} is not fully qualified: use a name such as www.example.com.` };
  const long = labels.find((l) => l.length > 63);
  if (long) return { ok: false, code: "invalid_domain", message: `The label ${long.slice(0, 20)}... is longer than 63 characters.` };
  if (!new RegExp(FQDN).test(ascii))
    return {
      ok: false,
      code: "invalid_domain",
      message: `${ascii} is not a valid domain name: labels are letters, digits and '-' (not first or last), and the last one starts with a letter.`,
    };
  const base = rules.baseDomain.toLowerCase().replace(/\.$/, "");
  if (ascii === base || ascii.endsWith(`.${base}`)) {
    return {
      ok: false,
      code: "platform_domain",
      message: `${ascii} is the platform's own domain (${base}): every service already has <slug>.${base}; add a domain you control.`,
    };
  }
  const ingress = rules.ingressHost?.toLowerCase().replace(/\.$/, "");
  if (ingress && ascii === ingress)
    return { ok: false, code: "platform_domain", message: `${ascii} is the platform's ingress host: point your domain at it instead.` };
  return { ok: true, domain: ascii };
}

// ---- the claim rule -----------------------------------------------------------------------------

const time = (t: string | Date | undefined): number => (t === undefined ? 0 : new Date(t).getTime());
const alive = (d: DomainObject) => !d.metadata.deletionTimestamp;

/**
 * Which of the Domains naming one domain holds it: a domain belongs to one App in the whole
 * cluster, and the first verified claim wins (earliest verifiedAt; then the older Domain; then
 * the uid, so that every reader picks the same one). Undefined while none is verified.
 */
export function claimHolder<D extends DomainObject>(claims: readonly D[]): D | undefined {
  return claims
    .filter((d) => alive(d) && d.status?.verified === true)
    .sort(
      (a, b) =>
        time(a.status?.verifiedAt) - time(b.status?.verifiedAt) ||
        time(a.metadata.creationTimestamp) - time(b.metadata.creationTimestamp) ||
        (a.metadata.uid ?? "").localeCompare(b.metadata.uid ?? ""),
    )[0];
}

/**
 * Whether another App's Domain keeps a new claim from being added: only a verified one. An
 * unverified claim blocks nobody: verification needs the claim's own TXT record, which only who
 * controls the domain's DNS can create, so a squatter's claim can neither verify nor keep the real
 * owner out (it expires after its 48-hour window).
 */
export function blocksNewClaim(other: DomainObject): boolean {
  return alive(other) && other.status?.verified === true;
}

const bare = (h: string) => h.toLowerCase().replace(/\.$/, "");

// ---- hosts another Ingress serves ---------------------------------------------------------------

/** An Ingress as the served-host rule reads it (the clients' Ingress types satisfy it). */
export interface IngressView {
  metadata?: { namespace?: string; name?: string; ownerReferences?: readonly { kind?: string; uid?: string }[] };
  spec?: {
    rules?: readonly { host?: string | undefined }[] | undefined;
    tls?: readonly { hosts?: readonly string[] | undefined }[] | undefined;
  };
}

/**
 * Whether an Ingress host (`pattern`) covers `host`, as the Ingress spec matches them: equal
 * names, or a wildcard `*.example.com` that stands for exactly one label (`a.example.com`, not
 * `example.com` nor `a.b.example.com`). Case and a trailing dot do not matter.
 */
export function hostMatches(pattern: string, host: string): boolean {
  const p = bare(pattern),
    h = bare(host);
  if (!p || !h) return false;
  if (!p.startsWith("*.")) return p === h;
  const suffix = p.slice(1);
  if (!h.endsWith(suffix)) return false;
  const label = h.slice(0, -suffix.length);
  return label.length > 0 && !label.includes(".");
}

/**
 * Whether an Ingress serves `host`: one of its rules names it, or one of its TLS sections does
 * (that is a certificate for it: cert-manager's ingress-shim requests one from those names). A
 * rule without a host (a catch-all) does not count: every rule that names a host outranks it.
 */
export function ingressServes(ing: IngressView, host: string): boolean {
  const hosts = [...(ing.spec?.rules ?? []).map((r) => r.host), ...(ing.spec?.tls ?? []).flatMap((t) => t.hosts ?? [])];
  return hosts.some((h) => !!h && hostMatches(h, host));
}

/** Whether `ing` is the Domain's own routing: in its namespace, with an ownerReference to it (its uid). */
export function isDomainIngress(ing: IngressView, d: DomainObject): boolean {
  return (
    !!d.metadata.uid &&
    ing.metadata?.namespace === d.metadata.namespace &&
    (ing.metadata?.ownerReferences ?? []).some((r) => r.kind === "Domain" && r.uid === d.metadata.uid)
  );
}

/**
 * The rule against taking a host another Ingress serves, for a Domain about to be routed: the
 * Ingress (other than its own) that serves its domain, or undefined when none does, or when the
 * Domain's own Ingress exists already (it served the host first: an Ingress added later is the
 * intruder, not a reason to stop serving). For a new claim, which has no Ingress yet, any Ingress
 * serving the domain counts.
 */
export function hostServedElsewhere<I extends IngressView>(d: DomainObject, ingresses: readonly I[]): I | undefined {
  if (ingresses.some((i) => isDomainIngress(i, d))) return undefined;
  return ingresses.find((i) => ingressServes(i, d.spec.domain));
}

// ---- ownership: a TXT record per claim ------------------------------------------------------------

/** The name of a claim's TXT record: `_berth-challenge.<domain>`. */
export function challengeHost(domain: string): string {
  return `_berth-challenge.${domain}`;
}

/**
 * The value a claim's TXT record must hold: derived from the Domain's uid, which the API server
 * chose at random when the claim was made. Another claim of the same domain (a squatter's, or one
 * made after a customer left) has another uid and so another value: finding the TXT record of
 * an earlier claim, or the CNAME a departed customer left dangling, proves nothing for it.
 */
export function challengeToken(uid: string): string {
  return `berth-verify-${createHash("sha256").update(`berth-challenge:${uid}`).digest("hex").slice(0, 32)}`;
}

// ---- verification -------------------------------------------------------------------------------

/** What DNS answered for the domain (the resolver's error codes kept as they are). */
export interface DnsObservation {
  /** CNAME targets of the domain; [] when it has none. */
  cname: readonly string[];
  /** A and AAAA addresses of the domain (after any CNAME); [] when none. */
  addresses: readonly string[];
  /** Addresses of the ingress host. */
  ingressAddresses: readonly string[];
  /** Values of the TXT records at `_berth-challenge.<domain>` (each record's strings joined). */
  txt: readonly string[];
  /** A resolver failure other than "no such record" (SERVFAIL, timeout, refused): the answer is unknown. */
  error?: string | undefined;
}

export interface Verification {
  verified: boolean;
  reason: string;
  message: string;
  method?: "cname" | "address";
}

/**
 * The verification decision: the domain must point at the ingress and its DNS must hold this
 * claim's TXT record (`token`: challengeToken of the Domain's uid). Pointing: the domain's CNAME
 * is the ingress host, or (an apex, which cannot have a CNAME; or a flattened ALIAS) it has A/AAAA
 * records and every one of them is an address of the ingress host. Pointing alone proves only
 * where traffic goes, not who claims the domain.
 */
export function decideVerification(domain: string, ingressHost: string, dns: DnsObservation, token: string): Verification {
  const target = bare(ingressHost);
  const proof = `the TXT record ${challengeHost(domain)} with the value ${token}`;
  const owned = dns.txt.includes(token);
  const ingress = new Set(dns.ingressAddresses);
  const points: Verification | undefined = dns.cname.some((c) => bare(c) === target)
    ? { verified: true, reason: "CnameMatches", message: `${domain} is a CNAME of ${target}`, method: "cname" }
    : dns.addresses.length > 0 && ingress.size > 0 && dns.addresses.every((a) => ingress.has(a))
      ? {
          verified: true,
          reason: "AddressMatches",
          message: `${domain} resolves to ${[...new Set(dns.addresses)].join(", ")}, the addresses of ${target}`,
          method: "address",
        }
      : undefined;
  if (points && owned) return { ...points, message: `${points.message}, and ${proof} proves this claim` };
  if (points)
    return { verified: false, reason: "ChallengeNotFound", message: `${points.message}, but this claim is not proven: create ${proof}` };
  const failed = pointingFailure(domain, target, dns, ingress);
  return { ...failed, message: `${failed.message}${owned ? "" : `; and create ${proof}`}` };
}

function pointingFailure(domain: string, target: string, dns: DnsObservation, ingress: ReadonlySet<string>): Verification {
  if (dns.error)
    return {
      verified: false,
      reason: "DnsError",
      message: `DNS could not be asked about ${domain} (${dns.error}); it is asked again later`,
    };
  if (dns.cname.length > 0)
    return {
      verified: false,
      reason: "WrongCnameTarget",
      message: `${domain} is a CNAME of ${bare(dns.cname[0]!)}, not of ${target}: point it at ${target}`,
    };
  if (dns.addresses.length > 0) {
    if (ingress.size === 0)
      return {
        verified: false,
        reason: "IngressHostUnresolved",
        message: `${domain} has A/AAAA records but the ingress host ${target} does not resolve, so they cannot be compared: use a CNAME to ${target}`,
      };
    return {
      verified: false,
      reason: "WrongAddress",
      message: `${domain} resolves to ${dns.addresses.join(", ")}, not to ${target} (${[...ingress].join(", ")}): use a CNAME to ${target}, or for an apex A/AAAA records of those addresses`,
    };
  }
  return {
    verified: false,
    reason: "RecordNotFound",
    message: `${domain} has no CNAME (nor A/AAAA) record: create the record ${domain} CNAME ${target}`,
  };
}

/**
 * When an unverified domain is checked again: after a tenth of its age, at least 30 seconds and
 * at most 30 minutes apart (about 120 checks in all), until 48 hours after it was added; then
 * checks stop (only a POST .../verify checks again). `expired` once the window is over.
 */
export function nextCheck(createdAt: Date, lastCheckedAt: Date | undefined, now: Date): { at: Date } | { expired: true } {
  const end = createdAt.getTime() + VERIFICATION_WINDOW_MS;
  if (now.getTime() >= end) return { expired: true };
  if (!lastCheckedAt) return { at: now };
  const age = Math.max(0, lastCheckedAt.getTime() - createdAt.getTime());
  const delay = Math.min(MAX_RECHECK_MS, Math.max(MIN_RECHECK_MS, Math.round(age / 10)));
  return { at: new Date(Math.min(lastCheckedAt.getTime() + delay, end)) };
}

// ---- TLS ----------------------------------------------------------------------------------------

/** What the TLS status reads of a cert-manager Certificate. */
export interface CertificateView {
  conditions?: readonly { type: string; status: string; reason?: string | undefined; message?: string | undefined }[] | undefined;
  notAfter?: string | undefined;
  renewalTime?: string | undefined;
  lastFailureTime?: string | undefined;
}

/**
 * tlsStatus from the domain's Certificate (TLS_STATUSES). No Certificate: pending. Then by what
 * serves: a certificate past its notAfter is expired; a Ready one is active, or expiring once its
 * renewal time has passed (the renewal is due and has not succeeded); not Ready: failed when
 * cert-manager reports the issuance failed (Issuing False, reason Failed, or a failure time and no
 * issuance under way), issuing otherwise.
 */
export function tlsStatusOf(cert: CertificateView | undefined, now: Date): { status: TlsStatus; message: string } {
  if (!cert) return { status: "pending", message: "No certificate has been requested yet: the domain must be verified first" };
  const cond = (t: string) => cert.conditions?.find((c) => c.type === t);
  const ready = cond("Ready"),
    issuing = cond("Issuing");
  const t = now.getTime();
  if (cert.notAfter && time(cert.notAfter) <= t)
    return {
      status: "expired",
      message: `The certificate expired at ${cert.notAfter}${issuing?.status === "True" ? "; a new one is being issued" : ""}`,
    };
  if (ready?.status === "True") {
    if (cert.renewalTime && time(cert.renewalTime) <= t)
      return {
        status: "expiring",
        message: `The certificate is valid until ${cert.notAfter ?? "(unknown)"}; its renewal was due at ${cert.renewalTime} and has not succeeded yet`,
      };
    return { status: "active", message: `The certificate is valid until ${cert.notAfter ?? "(unknown)"}` };
  }
  const failed = (issuing?.status === "False" && issuing.reason === "Failed") || (!!cert.lastFailureTime && issuing?.status !== "True");
  if (failed)
    return {
      status: "failed",
      message: `Issuance failed: ${issuing?.message ?? ready?.message ?? "see the Certificate's events"}; cert-manager retries with backoff`,
    };
  return { status: "issuing", message: ready?.message ? `Issuing: ${ready.message}` : "The certificate is being issued" };
}

const digest = (s: string, n: number) => createHash("sha256").update(s).digest("hex").slice(0, n);

/** Names of a Domain's children: the Certificate and Ingress carry the Domain's name, the Secret <name>-tls, the Service (a DNS label) a hash of it. */
export function domainChildNames(domainName: string): { ingress: string; certificate: string; secret: string; service: string } {
  const secret = domainName.length <= 249 ? `${domainName}-tls` : `${domainName.slice(0, 236)}-${digest(domainName, 8)}-tls`;
  return { ingress: domainName, certificate: domainName, secret, service: `domain-${digest(domainName, 12)}` };
}

/** The DOMAIN_LABEL value for a Domain: its name, or a hash of it when longer than a label value may be (63). */
export function domainLabelValue(domainName: string): string {
  return domainName.length <= 63 ? domainName : `sha256-${digest(domainName, 40)}`;
}
