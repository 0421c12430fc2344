// Desired state of a verified custom domain's children (docs/domains.md). Pure: no I/O, no clock.
// Each Domain has its own Service (to its targetPort), its own Ingress (the domain as host, TLS
// from its own Secret) and a cert-manager Certificate from the configured ClusterIssuer, all owned
// by the Domain, so that deleting it removes them (the Secret is adopted by the reconciler).
import type * as k8s from "@kubernetes/client-node";
import { API_VERSION, APP_LABEL, type AppSpec } from "../../crds/schemas.ts";
import { DOMAIN_LABEL, domainChildNames, domainLabelValue, type DomainObject } from "../../crds/domain.ts";
import type { KubeObject } from "../../kube/objects.ts";
import { MANAGED_BY, withHash } from "../kit/apply.ts";
import { edgeAnnotations, type EdgeConfig } from "../kit/edge.ts";
import { CERTIFICATE_API_VERSION } from "../kit/informers.ts";

export interface DomainConfig {
  /** The ClusterIssuer Certificates are requested from; no Certificate (and no TLS) when unset. */
  issuer?: string | undefined;
  ingressClassName?: string | undefined;
  /** How private Apps are guarded at the edge: a custom domain's route gets the same check as the App's own host. */
  edge?: EdgeConfig | undefined;
}

export { CERTIFICATE_API_VERSION };

export type DomainChildKind = "Service" | "Ingress" | "Certificate";

function meta(d: DomainObject, name: string, app: string, extra: Partial<k8s.V1ObjectMeta> = {}): k8s.V1ObjectMeta {
  return {
    name,
    namespace: d.metadata.namespace!,
    labels: { ...MANAGED_BY, [APP_LABEL]: app, [DOMAIN_LABEL]: domainLabelValue(d.metadata.name!) },
    ...extra,
    ownerReferences: [
      { apiVersion: API_VERSION, kind: "Domain", name: d.metadata.name!, uid: d.metadata.uid!, controller: true, blockOwnerDeletion: true },
    ],
  };
}

/** The port the domain routes to: its targetPort, or the App's port. */
export function targetPortOf(d: DomainObject, app: Pick<AppSpec, "port">): number {
  return d.spec.targetPort ?? app.port;
}

export function buildDomainService(d: DomainObject, app: { name: string; spec: AppSpec }): k8s.V1Service {
  return {
    apiVersion: "v1",
    kind: "Service",
    metadata: meta(d, domainChildNames(d.metadata.name!).service, app.name),
    spec: {
      type: "ClusterIP",
      selector: { [APP_LABEL]: app.name },
      ports: [{ name: "http", port: 80, targetPort: targetPortOf(d, app.spec), protocol: "TCP" }],
    },
  };
}

export function buildDomainIngress(d: DomainObject, app: { name: string; spec: AppSpec }, cfg: DomainConfig): k8s.V1Ingress {
  const names = domainChildNames(d.metadata.name!);
  return {
    apiVersion: "networking.k8s.io/v1",
    kind: "Ingress",
    // The App's visibility travels with every route to it, so that edge checks apply to custom domains too.
    // A private service's custom domain passes the same forward-auth check as its default host
    // (the App's Middleware, or ingress-nginx's auth-url annotations).
    metadata: meta(d, names.ingress, app.name, {
      annotations: {
        "berth.dev/visibility": app.spec.visibility,
        ...edgeAnnotations({ name: app.name, namespace: d.metadata.namespace! }, app.spec, cfg.edge),
      },
    }),
    spec: {
      ...(cfg.ingressClassName ? { ingressClassName: cfg.ingressClassName } : {}),
      ...(cfg.issuer ? { tls: [{ hosts: [d.spec.domain], secretName: names.secret }] } : {}),
      rules: [
        {
          host: d.spec.domain,
          http: { paths: [{ path: "/", pathType: "Prefix", backend: { service: { name: names.service, port: { name: "http" } } } }] },
        },
      ],
    },
  };
}

export function buildCertificate(d: DomainObject, app: string, issuer: string): KubeObject {
  const names = domainChildNames(d.metadata.name!);
  return {
    apiVersion: CERTIFICATE_API_VERSION,
    kind: "Certificate",
    metadata: meta(d, names.certificate, app),
    spec: {
      secretName: names.secret,
      dnsNames: [d.spec.domain],
      issuerRef: { group: "cert-manager.io", kind: "ClusterIssuer", name: issuer },
      privateKey: { algorithm: "ECDSA", size: 256, rotationPolicy: "Always" },
      // The Secret carries Berth's labels, so the operator's Secret cache sees it (and adopts it).
      secretTemplate: { labels: { ...MANAGED_BY, [APP_LABEL]: app, [DOMAIN_LABEL]: domainLabelValue(d.metadata.name!) } },
    },
  };
}

/** Every child a verified, routed domain should have. */
export function buildDomainChildren(d: DomainObject, app: { name: string; spec: AppSpec }, cfg: DomainConfig): KubeObject[] {
  const out: KubeObject[] = [buildDomainService(d, app) as KubeObject, buildDomainIngress(d, app, cfg) as KubeObject];
  if (cfg.issuer) out.push(buildCertificate(d, app.name, cfg.issuer));
  return out.map(withHash);
}
