// Services (docs/spec.md part 4) on top of App custom resources. Writes go to the API server; reads
// come from a watch cache of Apps, so list, search and stats cost no request to Kubernetes.
import { randomBytes } from "node:crypto";
import type { z } from "zod";
import { API_VERSION, AppSpec, DEFAULTS, WORKSPACE_LABEL, type AppStatus } from "../../crds/schemas.ts";
import { DEFAULT_CPU_TARGET, appHost, appRef, appUrl, foreignBuildImage, reservedHostReason, type BuildArea } from "../../crds/app.ts";
import { errorMessage, isConflict, isInvalid, type KubeObject } from "../../kube/client.ts";
import type { ReadYourWritesCache } from "../../kube/read-your-writes.ts";
import type { UsageReader } from "./metrics.ts";
import { groupOf, type Access } from "../../kube/rbac.ts";
import { ConflictError, NotFoundError, ValidationError, fieldErrorsFromZod, quotaExceeded } from "../errors.ts";
import type {
  CreateServiceBody,
  CreatedService,
  ListServicesQuery,
  PipelineState,
  Service,
  ServiceList,
  ServiceListItem,
  Stats,
  UpdateServiceBody,
} from "./schemas.ts";

export type AppObject = KubeObject & { spec: Record<string, unknown>; status?: AppStatus };
type Out<T extends z.ZodType> = z.output<T>;

export interface AppsServiceDeps {
  /** The API's read-your-writes cache of Apps (shared with governance). */
  apps: ReadYourWritesCache;
  /** The namespace of a workspace (workspaces map 1:1 to namespaces). */
  namespaceOf: (workspaceId: string) => Promise<string>;
  baseDomain: string;
  /**
   * Hosts are claimed in the whole platform (crds/app.ts "Hosts"): the slugs the platform keeps,
   * its own hosts (the API's, the ingress's), and whether a namespace is one of this
   * installation's workspaces (an App elsewhere belongs to no workspace of ours).
   */
  hosts?: {
    reservedSlugs: readonly string[];
    platformHosts: readonly (string | undefined)[];
    ownsNamespace: (namespace: string) => Promise<boolean>;
  };
  /** Where builds push (crds/app.ts "Built images"): another workspace's builds are refused as an image. */
  buildArea?: BuildArea;
  /** The governance stage of pipeline-state (`harbor`); reported as not provisioned when absent. */
  governance?: GovernanceStatusReader;
  /** The runtime's CPU and memory (the resource metrics API); null in pipeline-state when absent. */
  usage?: UsageReader;
}

/** Reads an app's governance status: provisioning status, whether any guard is on, the last eval time. */
export interface GovernanceStatusReader {
  harbor(workspaceId: string, appId: string): Promise<{ status: string; guardsEnabled: boolean; lastEvalAt: string | null }>;
}

/** What services do in the cluster (RBAC from code, see api/rbac.ts). */
export const APPS_SERVICE_ACCESS: Access[] = [
  {
    group: groupOf(API_VERSION),
    resource: "apps",
    verbs: ["list", "watch"],
    why: "Services are listed, searched and counted from a watch cache of Apps in every workspace namespace",
  },
  {
    group: groupOf(API_VERSION),
    resource: "apps",
    verbs: ["get", "create", "patch", "delete"],
    why: "Services are App resources: created, read right after a write, patched (soft delete too) and deleted",
  },
];

const UPDATE_ATTEMPTS = 3;

/** Lowercased, accents stripped: what search compares. */
export function normalize(s: string): string {
  return s.normalize("NFKD").replace(/\p{M}/gu, "").toLowerCase();
}

export class AppsService {
  private readonly d: AppsServiceDeps;
  /** The watch cache of Apps, reading this API's own writes and deletions until the cache shows them (a GET right after a PATCH or DELETE). */
  private readonly cache: ReadYourWritesCache;

  constructor(deps: AppsServiceDeps) {
    this.d = deps;
    this.cache = deps.apps;
  }

  // ---- reads (watch cache) -------------------------------------------------------------------

  /** The namespace's Apps as this API last wrote them: the cache's, and those just created that it does not show yet. */
  private visible(ns: string): AppObject[] {
    return this.cache.list<AppObject>("App", ns).filter((a) => !a.metadata.deletionTimestamp);
  }

  async list(wsId: string, q: Out<typeof ListServicesQuery>): Promise<Out<typeof ServiceList>> {
    const ns = await this.d.namespaceOf(wsId);
    const terms = q.search ? normalize(q.search).split(/\s+/).filter(Boolean) : [];
    const items = this.visible(ns)
      .map(derived)
      .filter(
        (d) =>
          (!q.type || d.spec.type === q.type) &&
          (!q.status || phaseOf(d.app) === q.status) &&
          terms.every((term) => d.searchName.includes(term)),
      )
      .sort((a, b) => (a.created < b.created ? 1 : a.created > b.created ? -1 : a.app.metadata.name!.localeCompare(b.app.metadata.name!)))
      .map((d) => d.app);
    const start = (q.page - 1) * q.limit;
    return {
      data: items.slice(start, start + q.limit).map((a) => this.listItem(a)),
      meta: { total: items.length, page: q.page, limit: q.limit, totalPages: Math.ceil(items.length / q.limit) },
    };
  }

  async stats(wsId: string): Promise<Out<typeof Stats>> {
    const s = { total: 0, active: 0, deploying: 0, failed: 0, stopped: 0 };
    for (const a of this.visible(await this.d.namespaceOf(wsId))) {
      s.total++;
      const p = phaseOf(a);
      if (p === "active") s.active++;
      else if (p === "deploying") s.deploying++;
      else if (p === "failed" || p === "build_failed") s.failed++;
      else s.stopped++;
    }
    return s;
  }

  async get(wsId: string, appId: string): Promise<Out<typeof Service>> {
    return this.full(await this.load(wsId, appId));
  }

  async pipelineState(wsId: string, appId: string): Promise<Out<typeof PipelineState>> {
    const a = await this.load(wsId, appId);
    const spec = specOf(a);
    const p = a.status?.pipeline ?? {};
    const [harbor, usage] = await Promise.all([
      this.d.governance ? this.d.governance.harbor(wsId, appId) : { status: "not_provisioned", guardsEnabled: false, lastEvalAt: null },
      this.d.usage && (p.runtime?.totalReplicas ?? 0) > 0 ? this.d.usage.usage(a.metadata.namespace!, appId) : null,
    ]);
    return {
      source: {
        status: p.source?.status ?? (spec.gitRepoUrl ? "ok" : "none"),
        gitRepo: spec.gitRepoUrl ?? null,
        branch: spec.gitBranch,
        lastCommitSha: p.source?.lastCommitSha ?? null,
        lastCommitMessage: p.source?.lastCommitMessage ?? null,
      },
      build: {
        status: p.build?.status ?? "none",
        buildpack: p.build?.buildpack ?? null,
        imageTag: p.build?.imageTag ?? null,
        durationSeconds: p.build?.durationSeconds ?? null,
      },
      deploy: {
        status: p.deploy?.status ?? "none",
        deployedAt: p.deploy?.deployedAt ?? null,
        revisionName: p.deploy?.revisionName ?? null,
      },
      harbor,
      // From the resource metrics API; null means unknown (no metrics API, no pods), never a made-up zero.
      runtime: {
        status: p.runtime?.status ?? "stopped",
        readyReplicas: p.runtime?.readyReplicas ?? 0,
        totalReplicas: p.runtime?.totalReplicas ?? 0,
        cpuUsageMillicores: usage?.cpuMillicores ?? null,
        memoryUsageMi: usage?.memoryMi ?? null,
      },
      overallStatus: phaseOf(a),
    };
  }

  /** The service's App, from the cache, falling back to the API server (read-your-writes right after a create); 404 app_not_found. */
  async load(wsId: string, appId: string): Promise<AppObject> {
    const ns = await this.d.namespaceOf(wsId);
    const app = await this.cache.getOrFetch<AppObject>(appRef(ns, appId));
    if (!app || app.metadata.deletionTimestamp) throw new NotFoundError("app_not_found", `No service ${appId} in this workspace`);
    return app;
  }

  // ---- writes (App custom resources) ---------------------------------------------------------

  async create(wsId: string, body: CreateServiceBody): Promise<Out<typeof CreatedService>> {
    const ns = await this.d.namespaceOf(wsId);
    const spec = dropNulls(body);
    checkSpec(spec);
    this.assertOwnImage(ns, spec.image);
    this.assertSlugFree(ns, body.slug, undefined);
    await this.assertHostFree(ns, body.slug);
    // The App's name (the service id) is its slug when free; slugs can change later, names cannot.
    // Free means the server holds no App of that name: one this API just deleted may still be
    // there (terminating, held by a finalizer) though it reads as gone.
    const taken = !!this.cache.inCache("App", ns, body.slug) || !!this.cache.get("App", ns, body.slug);
    const name = taken ? `${body.slug.slice(0, 52)}-${randomBytes(4).toString("hex").slice(0, 6)}` : body.slug;
    const obj: AppObject = {
      apiVersion: API_VERSION,
      kind: "App",
      metadata: { name, namespace: ns, labels: { [WORKSPACE_LABEL]: wsId } },
      spec,
    };
    let created: AppObject;
    try {
      created = await this.cache.create(obj);
    } catch (err) {
      if (isConflict(err)) throw new ConflictError("slug_taken", `A service with slug ${body.slug} already exists in this workspace`);
      throw quotaExceeded(err, "services") ?? this.mapInvalid(err);
    }
    return this.created(created);
  }

  async update(wsId: string, appId: string, patch: UpdateServiceBody): Promise<Out<typeof Service>> {
    for (let attempt = 1; ; attempt++) {
      const current = await this.load(wsId, appId);
      const merged = dropNulls({ ...current.spec, ...patch });
      checkSpec(merged);
      if (patch.image) this.assertOwnImage(current.metadata.namespace!, patch.image);
      if (patch.slug && patch.slug !== specOf(current).slug) {
        this.assertSlugFree(current.metadata.namespace!, patch.slug, appId);
        await this.assertHostFree(current.metadata.namespace!, patch.slug);
      }
      const specPatch = Object.fromEntries(Object.entries(patch).filter(([, v]) => v !== undefined));
      try {
        const updated = await this.cache.mergePatch<AppObject>(
          appRef(current.metadata.namespace!, appId),
          // The resourceVersion makes this a compare-and-swap against the spec that was validated.
          { metadata: { resourceVersion: current.metadata.resourceVersion }, spec: specPatch },
        );
        return this.full(updated);
      } catch (err) {
        if (isConflict(err) && attempt < UPDATE_ATTEMPTS) continue;
        if (isConflict(err)) throw new ConflictError("concurrent_update", "The service changed while it was being updated; retry");
        throw this.mapInvalid(err);
      }
    }
  }

  /** Soft delete: workloads stop and routing goes, the App and all its data stay. */
  async suspend(wsId: string, appId: string): Promise<void> {
    await this.setSuspended(wsId, appId, true);
  }

  async resume(wsId: string, appId: string): Promise<Out<typeof Service>> {
    return this.full(await this.setSuspended(wsId, appId, false));
  }

  private async setSuspended(wsId: string, appId: string, suspended: boolean): Promise<AppObject> {
    const app = await this.load(wsId, appId);
    return this.cache.mergePatch<AppObject>(appRef(app.metadata.namespace!, appId), { spec: { suspended } });
  }

  /** Permanent delete: the App and, through owner references, everything it owns. */
  async remove(wsId: string, appId: string): Promise<void> {
    const app = await this.load(wsId, appId);
    await this.cache.delete(appRef(app.metadata.namespace!, appId), app);
  }

  private assertSlugFree(ns: string, slug: string, self: string | undefined): void {
    const clash = this.visible(ns).find((a) => specOf(a).slug === slug && a.metadata.name !== self);
    if (clash) throw new ConflictError("slug_taken", `A service with slug ${slug} already exists in this workspace`);
  }

  /**
   * 422 for a reserved host, 409 host_taken when an App of another of this installation's
   * workspaces has the slug (and so the host): the first App to hold a host keeps it. Two creates
   * racing past this check are settled by the operator, which routes only the first created.
   */
  private async assertHostFree(ns: string, slug: string): Promise<void> {
    const h = this.d.hosts;
    if (!h) return;
    const reserved = reservedHostReason(slug, {
      baseDomain: this.d.baseDomain,
      reservedSlugs: h.reservedSlugs,
      platformHosts: h.platformHosts,
    });
    if (reserved) throw new ValidationError([{ field: "slug", message: reserved }]);
    for (const other of this.cache.list<AppObject>("App")) {
      if (other.metadata.namespace === ns || other.metadata.deletionTimestamp || specOf(other).slug !== slug) continue;
      if (await h.ownsNamespace(other.metadata.namespace!)) {
        throw new ConflictError(
          "host_taken",
          `${appHost({ slug }, this.d.baseDomain)} is held by a service of another workspace: a host belongs to one service in the whole platform; choose another slug`,
        );
      }
    }
  }

  /** 422 on image for another workspace's build. */
  private assertOwnImage(ns: string, image: unknown): void {
    if (typeof image !== "string" || !this.d.buildArea) return;
    const foreign = foreignBuildImage(image, ns, this.d.buildArea);
    if (foreign) throw new ValidationError([{ field: "body.image", message: foreign }]);
  }

  private mapInvalid(err: unknown): Error {
    // The API refuses bad input first; this only fires when the CRD has a rule we do not mirror.
    if (isInvalid(err))
      return new ValidationError([{ field: "body", message: errorMessage(err) }], "The service was refused by Kubernetes");
    return err instanceof Error ? err : new Error(String(err));
  }

  // ---- representations -------------------------------------------------------------------------

  private url(a: AppObject): string | null {
    return appUrl(specOf(a), this.d.baseDomain) ?? null;
  }

  listItem(a: AppObject): Out<typeof ServiceListItem> {
    const s = specOf(a);
    return {
      id: a.metadata.name!,
      name: s.name,
      slug: s.slug,
      status: phaseOf(a),
      type: s.type,
      url: this.url(a),
      gitRepoUrl: s.gitRepoUrl ?? null,
      gitBranch: s.gitBranch,
      createdAt: created(a),
    };
  }

  created(a: AppObject): Out<typeof CreatedService> {
    const s = specOf(a);
    return {
      ...this.listItem(a),
      autoDeploy: s.autoDeploy,
      cpuLimitMillicores: s.cpuLimitMillicores,
      memoryLimitMi: s.memoryLimitMi,
      minReplicas: s.minReplicas,
      maxReplicas: s.maxReplicas ?? s.minReplicas,
      updatedAt: updated(a),
    };
  }

  full(a: AppObject): Out<typeof Service> {
    const s = specOf(a);
    const ld = a.status?.latestDeployment;
    return {
      ...this.created(a),
      description: s.description ?? null,
      dockerfilePath: s.dockerfilePath ?? null,
      releaseCommand: s.releaseCommand ?? null,
      cpuTargetUtilization: s.cpuTargetUtilization ?? DEFAULT_CPU_TARGET,
      visibility: s.visibility,
      gitInstallationId: s.gitInstallationId ?? null,
      image: s.image ?? null,
      schedule: s.schedule ?? null,
      port: s.port,
      latestDeployment: ld
        ? {
            id: ld.id,
            status: ld.status,
            gitCommitSha: ld.gitCommitSha ?? null,
            gitCommitMessage: ld.gitCommitMessage ?? null,
            createdAt: ld.createdAt,
          }
        : null,
    };
  }
}

interface Derived {
  app: AppObject;
  spec: AppSpec;
  searchName: string;
  created: string;
}

// What list and search need from each cached App, computed once per object version: the watch
// cache replaces an object on every change, so a WeakMap keyed by the object never goes stale.
const derivedCache = new WeakMap<AppObject, Derived>();
function derived(app: AppObject): Derived {
  let d = derivedCache.get(app);
  if (!d) {
    const spec = parseSpec(app);
    d = { app, spec, searchName: normalize(spec.name), created: created(app) };
    derivedCache.set(app, d);
  }
  return d;
}

/** The App's spec with CRD defaults applied (objects created by kubectl may predate a default). */
export function specOf(a: AppObject): AppSpec {
  return derived(a).spec;
}

function parseSpec(a: AppObject): AppSpec {
  const parsed = AppSpec.safeParse(a.spec);
  if (parsed.success) return parsed.data;
  // A stored App that no longer parses still lists; fields fall back to the defaults.
  return {
    ...DEFAULTS,
    ...(a.spec as Partial<AppSpec>),
    name: str(a.spec.name) ?? a.metadata.name!,
    slug: str(a.spec.slug) ?? a.metadata.name!,
  };
}

const str = (v: unknown): string | undefined => (typeof v === "string" ? v : undefined);

export function phaseOf(a: AppObject): NonNullable<AppStatus["phase"]> {
  if (a.status?.phase) return a.status.phase;
  return a.spec.suspended === true ? "disabled" : "stopped";
}

function created(a: AppObject): string {
  return new Date(a.metadata.creationTimestamp ?? 0).toISOString();
}

/** Last change of the spec or metadata by any writer (status writes by the operator do not count). */
function updated(a: AppObject): string {
  const times = (a.metadata.managedFields ?? [])
    .filter((m) => m.subresource !== "status" && m.time)
    .map((m) => new Date(m.time!).getTime());
  return new Date(Math.max(new Date(a.metadata.creationTimestamp ?? 0).getTime(), ...times)).toISOString();
}

function dropNulls(o: Record<string, unknown>): Record<string, unknown> {
  return Object.fromEntries(Object.entries(o).filter(([, v]) => v !== null && v !== undefined));
}

/** The spec as the CRD will judge it (fields and cross-field rules), checked before anything reaches Kubernetes. */
function checkSpec(spec: Record<string, unknown>): void {
  const r = AppSpec.safeParse(spec);
  if (!r.success) throw new ValidationError(fieldErrorsFromZod(r.error, "body"));
}
