// The Domain controller's wiring: its informers, what wakes a Domain, and its reconciler
// registered with the Manager. Everything it shares with the other controllers comes from kit/.
import type { Informer } from "../../kube/informer.ts";
import type { KubeObject } from "../../kube/objects.ts";
import { DOMAIN_LABEL, ingressServes, type DomainObject, type IngressView } from "../../crds/domain.ts";
import { specChanged, type Request } from "../runtime/controller.ts";
import type { OperatorContext, WiredController } from "../kit/context.ts";
import { edgeConfig } from "../kit/edge.ts";
import { ResolverDnsLookup } from "./dns.ts";
import { DomainReconciler } from "./reconcile.ts";

type Domain = KubeObject & DomainObject;

/** The Domains of an App (for the App watch: a suspended, deleted or changed App reroutes them). */
export function domainsOfApp(domains: Informer<KubeObject>): (obj: KubeObject) => Request[] {
  return (app) =>
    domains
      .list(app.metadata.namespace)
      .filter((d) => (d as Domain).spec?.appRef?.name === app.metadata.name)
      .map((d) => ({ namespace: d.metadata.namespace!, name: d.metadata.name! }));
}

/** The Domain of a certificate Secret: cert-manager names its Certificate on it. */
export function domainOfSecret(secret: KubeObject): Request[] {
  const cert = secret.metadata.annotations?.["cert-manager.io/certificate-name"];
  return cert && secret.metadata.labels?.[DOMAIN_LABEL] && secret.metadata.namespace
    ? [{ namespace: secret.metadata.namespace, name: cert }]
    : [];
}

/** Every Domain naming the same domain as `d` (another claim changing wakes the others). */
export function sameDomainClaims(domains: Informer<KubeObject>): (obj: KubeObject) => Request[] {
  return (d) =>
    domains
      .list()
      .filter((x) => (x as Domain).spec?.domain === (d as Domain).spec?.domain && x.metadata.uid !== d.metadata.uid)
      .map((x) => ({ namespace: x.metadata.namespace!, name: x.metadata.name! }));
}

/**
 * The Domains whose domain an Ingress (any, of the cluster) serves: one taking or leaving the host
 * wakes them, so that a Domain refused for it is routed once it is gone (the Controller maps an
 * update's object as it was too, so a changed host wakes the Domains of the host it left).
 */
export function domainsServedBy(domains: Informer<KubeObject>): (obj: KubeObject) => Request[] {
  return (ing) =>
    domains
      .list()
      .filter((d) => {
        const domain = (d as Domain).spec?.domain;
        return !!domain && ingressServes(ing as IngressView, domain);
      })
      .map((d) => ({ namespace: d.metadata.namespace!, name: d.metadata.name! }));
}

/**
 * Registers the Domain controller. Domains are watched in every namespace (the claim rule compares
 * them cluster-wide), and so are all Ingresses (a domain is not routed onto a host another
 * serves); only the watched namespace's Domains are reconciled. Certificates only when an issuer
 * is configured (cert-manager may not be installed otherwise).
 */
export function wireDomainController(op: OperatorContext): WiredController {
  const { cfg, informers } = op;
  const namespace = cfg.BERTH_WATCH_NAMESPACE;
  const domains = informers.domains();
  const apps = informers.apps();
  const services = informers.managed("Service");
  const ingresses = informers.managed("Ingress");
  const allIngresses = informers.allIngresses();
  const secrets = informers.secrets();
  const certificates = cfg.BERTH_DOMAIN_ISSUER ? informers.managed("Certificate") : undefined;
  const controller = op.manager.addController({
    name: "domain",
    primary: domains,
    // The Domain's status reads its Certificate's; of its Service and Ingress only what it wrote.
    owned: [
      { informer: services, updates: specChanged },
      { informer: ingresses, updates: specChanged },
      ...(certificates ? [certificates] : []),
    ],
    watches: [
      { informer: apps, map: domainsOfApp(domains) },
      { informer: secrets, map: domainOfSecret },
      { informer: domains, map: sameDomainClaims(domains) },
      // Only hosts are read of other Ingresses: their status (the load balancer's address) wakes nothing.
      { informer: allIngresses, updates: specChanged, map: domainsServedBy(domains) },
    ],
    reconciler: new DomainReconciler({
      client: op.client,
      domains,
      apps,
      services,
      ingresses,
      allIngresses,
      certificates,
      secrets,
      dns: new ResolverDnsLookup(cfg.BERTH_DNS_RESOLVER),
      events: op.events,
      now: op.now,
      cfg: {
        baseDomain: cfg.BERTH_BASE_DOMAIN,
        ingressHost: cfg.BERTH_INGRESS_HOST,
        issuer: cfg.BERTH_DOMAIN_ISSUER,
        ingressClassName: cfg.BERTH_INGRESS_CLASS,
        edge: edgeConfig(cfg),
        namespace,
      },
    }),
    concurrency: cfg.BERTH_OPERATOR_CONCURRENCY,
    resyncPeriodMs: cfg.BERTH_OPERATOR_RESYNC_SECONDS * 1000,
  });
  return { controller };
}
