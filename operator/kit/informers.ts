// The kinds the operator watches and the shared informers of them. The Manager holds one informer
// per resource, namespace and label selector, so each controller's wiring asks for what it
// watches here and the controllers that watch a kind share one cache of it.
import { API_VERSION, WORKSPACE_LABEL } from "../../crds/schemas.ts";
import type { Informer } from "../../kube/informer.ts";
import type { Access } from "../../kube/rbac.ts";
import type { KubeObject } from "../../kube/objects.ts";
import type { Manager } from "../runtime/manager.ts";
import { MANAGED_BY } from "./apply.ts";
import { MIDDLEWARE_API_VERSION } from "./edge.ts";
import type { AppObject, ReleaseObject } from "./objects.ts";

/** What following the workspace namespaces needs (SharedInformers.secrets). */
export const PER_NAMESPACE_ACCESS: Access[] = [
  {
    group: "",
    resource: "namespaces",
    verbs: ["list", "watch"],
    why: "The workspace namespaces (label-selected) are followed: Berth's Secrets are listed and watched in each, where the API's RoleBinding grants it",
  },
];

/** cert-manager's Certificates. */
export const CERTIFICATE_API_VERSION = "cert-manager.io/v1";

/** Every kind the operator watches: its apiVersion and its resource. */
export const KINDS = {
  App: { apiVersion: API_VERSION, plural: "apps" },
  Release: { apiVersion: API_VERSION, plural: "releases" },
  Domain: { apiVersion: API_VERSION, plural: "domains" },
  Deployment: { apiVersion: "apps/v1", plural: "deployments" },
  Service: { apiVersion: "v1", plural: "services" },
  Ingress: { apiVersion: "networking.k8s.io/v1", plural: "ingresses" },
  HorizontalPodAutoscaler: { apiVersion: "autoscaling/v2", plural: "horizontalpodautoscalers" },
  CronJob: { apiVersion: "batch/v1", plural: "cronjobs" },
  Middleware: { apiVersion: MIDDLEWARE_API_VERSION, plural: "middlewares" },
  Secret: { apiVersion: "v1", plural: "secrets" },
  Pod: { apiVersion: "v1", plural: "pods" },
  Job: { apiVersion: "batch/v1", plural: "jobs" },
  Certificate: { apiVersion: CERTIFICATE_API_VERSION, plural: "certificates" },
} as const;

export type WatchedKind = keyof typeof KINDS;

/** The label selector of everything Berth writes (crds/app.ts MANAGED_BY). */
const MANAGED_BY_SELECTOR = Object.entries(MANAGED_BY)
  .map(([k, v]) => `${k}=${v}`)
  .join(",");

/**
 * The operator's informers, from the Manager. Berth's own kinds are watched whole; everything
 * else only as labelled as Berth's (an object without the label is invisible to the operator),
 * but for Ingresses, which the Domain controller also reads whole for the hosts they serve.
 * The operator never reads managedFields: the caches drop them (a third of each object).
 */
export class SharedInformers {
  private readonly manager: Manager;
  /** The watched namespace (BERTH_WATCH_NAMESPACE); every namespace when unset. */
  private readonly namespace: string | undefined;

  constructor(manager: Manager, namespace: string | undefined) {
    this.manager = manager;
    this.namespace = namespace;
  }

  apps(): Informer<AppObject> {
    return this.berth<AppObject>("App");
  }

  releases(): Informer<ReleaseObject> {
    return this.berth<ReleaseObject>("Release");
  }

  /** Domains in every namespace: the claim rule compares them cluster-wide. */
  domains(): Informer<KubeObject> {
    return this.manager.informer<KubeObject>({ ...this.kind("Domain"), dropManagedFields: true });
  }

  /**
   * Every Ingress of the cluster, whoever made it, in every namespace (even with a watched
   * namespace): a custom domain is never routed onto a host another Ingress serves. Only Berth's
   * own are written; the others are read for their hosts.
   */
  allIngresses(): Informer<KubeObject> {
    return this.manager.informer<KubeObject>({ ...this.kind("Ingress"), dropManagedFields: true });
  }

  /**
   * Secrets labelled as Berth's, in the watched namespace or else in every workspace namespace,
   * each with its own list and watch: the operator's Secret grants hold only there (a RoleBinding
   * the API makes in each workspace namespace), so a list across the cluster would be refused.
   */
  secrets(): Informer<KubeObject> {
    return this.manager.perNamespaceInformer<KubeObject>({
      ...this.kind("Secret"),
      labelSelector: MANAGED_BY_SELECTOR,
      dropManagedFields: true,
      // one namespace: watched whether it exists and is bound yet or not, without holding the
      // operator's start (a workspace the API makes later)
      ...(this.namespace ? { namespaces: [this.namespace] } : { follow: this.workspaceNamespaces() }),
    });
  }

  /**
   * Whether a namespace is a workspace's, where the operator may write (the API binds its
   * workspace ClusterRole there): always, for an operator of one namespace (BERTH_WATCH_NAMESPACE,
   * which needs that binding itself); else a namespace labelled berth.dev/workspace.
   */
  inWorkspace(): (namespace: string) => boolean {
    if (this.namespace) return () => true;
    const namespaces = this.workspaceNamespaces();
    return (namespace) => namespaces.get(undefined, namespace) !== undefined;
  }

  /** The workspace namespaces (labelled berth.dev/workspace). */
  private workspaceNamespaces(): Informer<KubeObject> {
    return this.manager.informer<KubeObject>({
      apiVersion: "v1",
      kind: "Namespace",
      plural: "namespaces",
      labelSelector: WORKSPACE_LABEL,
      dropManagedFields: true,
    });
  }

  /** Objects of `kind` labelled as Berth's, in the watched namespace. */
  managed<T extends KubeObject = KubeObject>(kind: Exclude<WatchedKind, "App" | "Release" | "Domain" | "Secret">): Informer<T> {
    return this.manager.informer<T>({
      ...this.kind(kind),
      labelSelector: MANAGED_BY_SELECTOR,
      dropManagedFields: true,
      ...(this.namespace ? { namespace: this.namespace } : {}),
    });
  }

  private berth<T extends KubeObject>(kind: "App" | "Release"): Informer<T> {
    return this.manager.informer<T>({
      ...this.kind(kind),
      dropManagedFields: true,
      ...(this.namespace ? { namespace: this.namespace } : {}),
    });
  }

  private kind(kind: WatchedKind): { apiVersion: string; kind: string; plural: string } {
    return { apiVersion: KINDS[kind].apiVersion, kind, plural: KINDS[kind].plural };
  }
}
