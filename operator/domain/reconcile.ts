// The Domain reconciler (docs/domains.md): verify the domain's DNS (on a schedule while unverified,
// at once when a check is asked for), enforce the claim rule (one App per domain in the cluster),
// and once verified, unless another Ingress of the cluster serves the host already, converge the
// domain's Service, Ingress and cert-manager Certificate, adopt the certificate's Secret so that
// it goes with the Domain, and report tlsStatus from the Certificate.
// Level-based: every reconcile reads the world from the watch caches and converges.
import { API_VERSION, AppSpec, type DomainStatus } from "../../crds/schemas.ts";
import { isServed } from "../../crds/app.ts";
import {
  challengeToken,
  checkDomainName,
  claimHolder,
  decideVerification,
  DOMAIN_LABEL,
  domainChildNames,
  domainLabelValue,
  hostServedElsewhere,
  nextCheck,
  tlsStatusOf,
  VERIFY_REQUEST_ANNOTATION,
  type CertificateView,
  type DomainObject,
  type IngressView,
} from "../../crds/domain.ts";
import { OPERATOR_FIELD_MANAGER, ownedBy, type KubeObject } from "../../kube/objects.ts";
import { errorMessage } from "../../kube/transport.ts";
import type { Informer } from "../../kube/informer.ts";
import type { EventRecorder } from "../../kube/events.ts";
import { ReadYourWritesCache, type WritingClient } from "../../kube/read-your-writes.ts";
import { groupOf, type Access } from "../../kube/rbac.ts";
import type { ReconcileContext, ReconcileResult, Reconciler, Request } from "../runtime/controller.ts";
import { childAccess, convergeChild } from "../kit/apply.ts";
import { recordLifecycle } from "../kit/events.ts";
import type { AppObject } from "../kit/objects.ts";
import { buildDomainChildren, CERTIFICATE_API_VERSION, targetPortOf, type DomainChildKind, type DomainConfig } from "./builders.ts";
import type { DnsLookup } from "./dns.ts";
import { computeDomainStatus, domainEvents, domainStatusEqual } from "./status.ts";

const BERTH = groupOf(API_VERSION);

export const DOMAIN_CONTROLLER_ACCESS: Access[] = [
  {
    group: BERTH,
    resource: "domains",
    verbs: ["list", "watch"],
    why: "The Domain controller watches Domains in every namespace: the claim rule (one App per domain) compares them cluster-wide",
  },
  {
    group: BERTH,
    resource: "domains/status",
    verbs: ["patch"],
    why: "It writes Domain status (verification, routing, tlsStatus) by server-side apply of the status subresource",
  },
  {
    group: BERTH,
    resource: "domains/finalizers",
    verbs: ["update"],
    why: "A Domain's children carry blockOwnerDeletion, which clusters with OwnerReferencesPermissionEnforcement allow only to who may update the owner's finalizers",
  },
  ...childAccess("cert-manager.io", "certificates", "A verified Domain's cert-manager Certificate (its tlsStatus)"),
  ...childAccess("", "services", "A verified Domain's Service (to its targetPort)"),
  ...childAccess("networking.k8s.io", "ingresses", "A verified Domain's Ingress"),
  {
    group: "networking.k8s.io",
    resource: "ingresses",
    verbs: ["list", "watch"],
    why: "The Domain controller watches every Ingress of the cluster, whoever made it: a domain is not routed onto a host another Ingress serves",
  },
  {
    group: "",
    resource: "secrets",
    verbs: ["get", "list", "watch", "patch", "delete"],
    scope: "workspace",
    why: "A Domain's certificate Secret (written by cert-manager) is adopted (an ownerReference, so it goes with the Domain) and deleted when the Domain is",
  },
];

export interface DomainReconcilerConfig extends DomainConfig {
  baseDomain: string;
  /** Where customers point their CNAME records (BERTH_INGRESS_HOST). */
  ingressHost: string;
  /** Reconcile the Domains of this namespace only (the informer sees all, for the claim rule). */
  namespace?: string | undefined;
}

export interface DomainReconcilerDeps {
  client: WritingClient;
  /** Every Domain of the cluster. */
  domains: Informer<KubeObject>;
  apps: Informer<AppObject>;
  services: Informer<KubeObject>;
  ingresses: Informer<KubeObject>;
  /** Every Ingress of the cluster, whoever made it (for the hosts they serve). */
  allIngresses: Informer<KubeObject>;
  /** cert-manager Certificates (label-selected); absent when no issuer is configured. */
  certificates?: Informer<KubeObject> | undefined;
  secrets: Informer<KubeObject>;
  dns: DnsLookup;
  cfg: DomainReconcilerConfig;
  now: () => Date;
  events?: EventRecorder | undefined;
}

type Domain = KubeObject & DomainObject;

const KIND_API: Record<DomainChildKind, string> = { Service: "v1", Ingress: "networking.k8s.io/v1", Certificate: CERTIFICATE_API_VERSION };

/** Re-check at least this often while a certificate is in use (renewal time, expiry). */
const MAX_TLS_RECHECK_MS = 6 * 3600_000;

export class DomainReconciler implements Reconciler {
  private readonly deps: DomainReconcilerDeps;
  private readonly cache: ReadYourWritesCache;

  constructor(deps: DomainReconcilerDeps) {
    this.deps = deps;
    this.cache = new ReadYourWritesCache(deps.client, OPERATOR_FIELD_MANAGER)
      .track("Domain", deps.domains)
      .track("Service", deps.services)
      .track("Ingress", deps.ingresses)
      .track("Secret", deps.secrets);
    if (deps.certificates) this.cache.track("Certificate", deps.certificates);
  }

  async reconcile({ namespace, name }: Request, ctx: ReconcileContext): Promise<ReconcileResult | void> {
    const { cfg } = this.deps;
    if (cfg.namespace && namespace !== cfg.namespace) return;
    const d = this.cache.get<Domain>("Domain", namespace, name);
    if (!d) {
      await this.sweepSecret(namespace, name, ctx);
      return;
    }
    if (d.metadata.deletionTimestamp) return; // its children go with it (owner references)
    try {
      return await this.converge(d, ctx);
    } catch (err) {
      recordLifecycle(this.deps.events, d, "ReconcileError", errorMessage(err));
      throw err;
    }
  }

  private async converge(d: Domain, ctx: ReconcileContext): Promise<ReconcileResult | undefined> {
    const { cfg, now: clock } = this.deps;
    const now = clock();
    const namespace = d.metadata.namespace!,
      domain = d.spec.domain;
    const names = domainChildNames(d.metadata.name!);

    const nameCheck = checkDomainName(domain, { baseDomain: cfg.baseDomain, ingressHost: cfg.ingressHost });
    const invalid = !nameCheck.ok
      ? { reason: "InvalidDomain", message: nameCheck.message }
      : nameCheck.domain !== domain
        ? { reason: "InvalidDomain", message: `${domain} is not in its canonical form ${nameCheck.domain}` }
        : undefined;
    const holder = claimHolder(this.deps.domains.list().filter((x) => (x as Domain).spec?.domain === domain) as Domain[]);
    const claimedElsewhere = !!holder && holder.metadata.uid !== d.metadata.uid;

    const created = new Date(d.metadata.creationTimestamp ?? now);
    const last = d.status?.lastCheckedAt ? new Date(d.status.lastCheckedAt) : undefined;
    const token = d.metadata.annotations?.[VERIFY_REQUEST_ANNOTATION];
    const request = token && token !== d.status?.handledVerifyRequest ? token : undefined;
    const due = nextCheck(created, last, now);
    const wasVerified = d.status?.verified === true && !claimedElsewhere && !invalid;
    let check: { verification: ReturnType<typeof decideVerification> } | undefined;
    if (!invalid && !claimedElsewhere && !wasVerified && (request || ("at" in due && due.at.getTime() <= now.getTime()))) {
      const observed = await this.deps.dns.observe(domain, cfg.ingressHost);
      check = { verification: decideVerification(domain, cfg.ingressHost, observed, challengeToken(d.metadata.uid!)) };
      ctx.log.debug({ domain, verified: check.verification.verified, reason: check.verification.reason }, "DNS checked");
    }
    const verified = wasVerified || (check?.verification.verified ?? false);
    const schedule = nextCheck(created, check ? now : last, now);

    // What the domain should have: a certificate once verified (while the App exists), a route
    // while the App is served and not soft-deleted, unless another Ingress serves the host.
    const app = this.deps.apps.get(namespace, d.spec.appRef.name);
    const parsed = app ? AppSpec.safeParse(app.spec) : undefined;
    const spec = parsed?.success ? parsed.data : undefined;
    let routed: { ok: boolean; reason: string; message: string };
    if (!verified) routed = { ok: false, reason: "NotVerified", message: "The domain is routed once its DNS is verified" };
    else if (!app) routed = { ok: false, reason: "AppNotFound", message: `No service ${d.spec.appRef.name} in this workspace` };
    else if (!spec) routed = { ok: false, reason: "InvalidApp", message: `The service ${d.spec.appRef.name} has an invalid spec` };
    else if (!isServed(spec.type))
      routed = { ok: false, reason: "NotServed", message: `The service is a ${spec.type}: only web and api services are served` };
    else if (spec.suspended)
      routed = { ok: false, reason: "AppSuspended", message: "The service is soft-deleted: its routes are removed until it is resumed" };
    else if (this.servedElsewhere(d, ctx))
      routed = {
        ok: false,
        reason: "HostServedElsewhere",
        message: `Another Ingress in the cluster already serves ${domain}: the domain is routed once no other Ingress serves it`,
      };
    else
      routed = { ok: true, reason: "Routed", message: `${domain} routes to service ${app.metadata.name} on port ${targetPortOf(d, spec)}` };

    const desired = routed.ok && spec && app ? buildDomainChildren(d, { name: app.metadata.name!, spec }, cfg) : [];
    // Refused a host another Ingress serves, a domain gets no certificate for it either; one it
    // already has (kept through a soft delete) stays, as its route comes back once the host is free.
    const servedElsewhere = routed.reason === "HostServedElsewhere";
    const ownCert = this.deps.certificates ? this.cache.get<KubeObject>("Certificate", namespace, names.certificate) : undefined;
    const hasCertificate = !!ownCert && ownedBy(ownCert, d);
    const keepCertificate = verified && !!app && !!cfg.issuer && (!servedElsewhere || hasCertificate);
    const wanted = new Set<DomainChildKind>(desired.map((c) => c.kind as DomainChildKind));
    if (keepCertificate) wanted.add("Certificate");
    const foreign = await this.convergeChildren(d, desired, ctx);
    if (foreign)
      routed = { ok: false, reason: "ObjectInTheWay", message: `${foreign} already exists in ${namespace} and is not this Domain's` };
    await this.prune(d, wanted, ctx);
    if (!keepCertificate) await this.deleteSecret(d, names.secret, ctx);
    else await this.adoptSecret(d, names.secret);

    const cert = keepCertificate
      ? this.cache.get<KubeObject & { status?: CertificateView }>("Certificate", namespace, names.certificate)
      : undefined;
    const tls = !cfg.issuer
      ? {
          status: "pending" as const,
          message: "No certificate issuer is configured (BERTH_DOMAIN_ISSUER): the domain is served without TLS",
        }
      : servedElsewhere && !keepCertificate
        ? {
            status: "pending" as const,
            message: `No certificate is requested while another Ingress in the cluster serves ${domain}`,
          }
        : {
            ...tlsStatusOf(keepCertificate ? (cert?.status ?? (cert ? {} : undefined)) : undefined, now),
            notAfter: cert?.status?.notAfter,
          };
    const status = computeDomainStatus({
      old: d.status,
      generation: d.metadata.generation ?? 0,
      now,
      domain,
      dnsTarget: cfg.ingressHost,
      invalid,
      check,
      request,
      claimedElsewhere,
      schedule,
      routed,
      tls,
    });
    await this.writeStatus(d, status, ctx);

    const waits: number[] = [];
    if (!status.verified && "at" in schedule) waits.push(schedule.at.getTime() - now.getTime());
    for (const t of [cert?.status?.renewalTime, cert?.status?.notAfter])
      if (t && new Date(t).getTime() > now.getTime()) waits.push(new Date(t).getTime() - now.getTime() + 1000);
    if (status.tlsStatus === "active" || status.tlsStatus === "expiring") waits.push(MAX_TLS_RECHECK_MS);
    return waits.length ? { requeueAfterMs: Math.max(1000, Math.min(...waits)) } : undefined;
  }

  /**
   * Whether another Ingress of the cluster serves the domain while the Domain's own does not exist
   * (crds/domain.ts hostServedElsewhere: once routed, the Domain keeps the host). Its own is read
   * from the cache of Berth's Ingresses too, which holds what this process just wrote. Which
   * Ingress it is goes to the log only: the Domain's status and Events are read by its tenant, and
   * the other Ingress may be another tenant's.
   */
  private servedElsewhere(d: Domain, ctx: ReconcileContext): boolean {
    const own = this.cache.get<KubeObject>("Ingress", d.metadata.namespace!, domainChildNames(d.metadata.name!).ingress);
    const other = hostServedElsewhere(d, [...(own ? [own] : []), ...this.deps.allIngresses.list()] as IngressView[]);
    if (!other) return false;
    const first = d.status?.conditions?.find((c) => c.type === "Routed")?.reason !== "HostServedElsewhere";
    ctx.log[first ? "info" : "debug"](
      { domain: d.spec.domain, ingress: `${other.metadata?.namespace}/${other.metadata?.name}` },
      "not routed: another Ingress serves the domain",
    );
    return true;
  }

  /**
   * Applies what differs; creates what is missing, never adopting a foreign object (kit/apply.ts
   * convergeChild). Returns the kind/name of a foreign object in the way. The certificate's request
   * is told once, when its Certificate is created.
   */
  private async convergeChildren(d: Domain, desired: KubeObject[], ctx: ReconcileContext): Promise<string | undefined> {
    for (const obj of desired) {
      const kind = obj.kind!;
      const cached = this.cache.get<KubeObject>(kind, obj.metadata.namespace!, obj.metadata.name!);
      const r = await convergeChild(this.cache, obj, cached, (o) => ownedBy(o, d));
      if ("foreign" in r) return `${kind} ${obj.metadata.name}`;
      if (!r.created) continue;
      ctx.log.debug({ kind, name: obj.metadata.name }, "created");
      if (kind === "Certificate")
        recordLifecycle(
          this.deps.events,
          d,
          "CertificateRequested",
          `Requested a certificate for ${d.spec.domain} from ClusterIssuer ${this.deps.cfg.issuer}`,
        );
    }
    return undefined;
  }

  private async prune(d: Domain, wanted: ReadonlySet<DomainChildKind>, ctx: ReconcileContext): Promise<void> {
    const names = domainChildNames(d.metadata.name!);
    const byKind: Record<DomainChildKind, string> = { Service: names.service, Ingress: names.ingress, Certificate: names.certificate };
    for (const kind of Object.keys(byKind) as DomainChildKind[]) {
      if (wanted.has(kind) || (kind === "Certificate" && !this.deps.certificates)) continue;
      const obj = this.cache.get<KubeObject>(kind, d.metadata.namespace!, byKind[kind]);
      if (!obj || !ownedBy(obj, d)) continue;
      await this.cache.delete({ apiVersion: KIND_API[kind], kind, namespace: d.metadata.namespace!, name: byKind[kind] }, obj);
      ctx.log.debug({ kind, name: byKind[kind] }, "deleted: the domain no longer needs it");
    }
  }

  /** The certificate's Secret (cert-manager's) gets the Domain as an owner, so that it goes with the Domain. */
  private async adoptSecret(d: Domain, name: string): Promise<void> {
    const secret = this.cache.get<KubeObject>("Secret", d.metadata.namespace!, name);
    if (!secret || ownedBy(secret, d) || secret.metadata.labels?.[DOMAIN_LABEL] !== domainLabelValue(d.metadata.name!)) return;
    const owners = [
      ...(secret.metadata.ownerReferences ?? []),
      {
        apiVersion: API_VERSION,
        kind: "Domain",
        name: d.metadata.name!,
        uid: d.metadata.uid!,
        controller: false,
        blockOwnerDeletion: false,
      },
    ];
    await this.cache.mergePatch(
      { apiVersion: "v1", kind: "Secret", namespace: d.metadata.namespace!, name },
      { metadata: { resourceVersion: secret.metadata.resourceVersion, ownerReferences: owners } },
    );
  }

  private async deleteSecret(d: Domain, name: string, ctx: ReconcileContext): Promise<void> {
    const secret = this.cache.get<KubeObject>("Secret", d.metadata.namespace!, name);
    if (!secret || secret.metadata.labels?.[DOMAIN_LABEL] !== domainLabelValue(d.metadata.name!)) return;
    await this.cache.delete({ apiVersion: "v1", kind: "Secret", namespace: d.metadata.namespace!, name }, secret);
    ctx.log.debug({ secret: name }, "certificate Secret deleted");
  }

  /** A deleted Domain's certificate Secret, when cert-manager wrote it after the Domain's last reconcile (not adopted yet). */
  private async sweepSecret(namespace: string, domainName: string, ctx: ReconcileContext): Promise<void> {
    const name = domainChildNames(domainName).secret;
    const secret = this.cache.get<KubeObject>("Secret", namespace, name);
    if (!secret || secret.metadata.labels?.[DOMAIN_LABEL] !== domainLabelValue(domainName)) return;
    await this.cache.delete({ apiVersion: "v1", kind: "Secret", namespace, name }, secret);
    ctx.log.debug({ secret: name }, "certificate Secret of a deleted Domain deleted");
  }

  private async writeStatus(d: Domain, status: DomainStatus, ctx: ReconcileContext): Promise<void> {
    if (domainStatusEqual(d.status, status)) return;
    const written = await this.cache.applyStatus("domains", {
      apiVersion: API_VERSION,
      kind: "Domain",
      metadata: { name: d.metadata.name, namespace: d.metadata.namespace },
      status,
    });
    if (d.status?.verified !== status.verified || d.status?.tlsStatus !== status.tlsStatus) {
      ctx.log.info({ domain: d.spec.domain, verified: status.verified, tlsStatus: status.tlsStatus }, "domain status changed");
    }
    for (const e of domainEvents(d.status, status)) this.deps.events?.event(written, e.type, e.reason, e.message);
  }
}
