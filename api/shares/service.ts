// Public share links (docs/spec.md part 4 "Public shares", docs/shares.md) on top of Share custom
// resources: each link is a Share in the workspace's namespace, owned by its App, whose spec holds
// the SHA-256 of the link's token and never the token. The token is returned once, by create.
import { randomBytes } from "node:crypto";
import { z } from "zod";
import { API_VERSION, APP_LABEL, ShareSpec, type ShareStatus } from "../../crds/schemas.ts";
import { FORWARD_AUTH, appUrl, isServed } from "../../crds/app.ts";
import type { KubeObject } from "../../kube/client.ts";
import type { ReadYourWritesCache } from "../../kube/read-your-writes.ts";
import { groupOf, type Access } from "../../kube/rbac.ts";
import { ConflictError, NotFoundError, ValidationError, quotaExceeded } from "../errors.ts";
import type { AppObject, AppsService } from "../apps/service.ts";
import { specOf } from "../apps/service.ts";
import { mintShareToken, shareTokenHash, type ShareView } from "./grants.ts";

export type ShareObject = KubeObject & { spec: ShareSpec; status?: ShareStatus };

export const SHARES_ACCESS: Access[] = [
  {
    group: groupOf(API_VERSION),
    resource: "shares",
    verbs: ["list", "watch"],
    why: "Share links are listed, and every request to a private service is decided, from a watch cache of Shares (a revoked share is gone from it on the next request)",
  },
  {
    group: groupOf(API_VERSION),
    resource: "shares",
    verbs: ["get", "create", "delete"],
    why: "A share link is a Share resource: created (its token's hash only), read right after, and deleted to revoke it",
  },
];

export const CreateShareBody = z
  .object({
    expiresAt: z.iso
      .datetime({ offset: true })
      .optional()
      .describe("When the link stops working (ISO 8601); never when omitted. Must be in the future"),
    requireAuth: z
      .boolean()
      .default(false)
      .describe("Viewers must also sign in with a platform account (the organisation's identity provider)"),
  })
  .strict()
  .optional();
export type CreateShareBody = z.output<typeof CreateShareBody>;

export const Share = z
  .object({
    id: z.string(),
    appId: z.string(),
    requireAuth: z.boolean(),
    expiresAt: z.string().nullable().describe("null: never expires"),
    active: z.boolean().describe("Not expired; a revoked share is deleted and no longer listed"),
    createdAt: z.string(),
  })
  .meta({ id: "PublicShare" });
export type Share = z.output<typeof Share>;

export const CreatedShare = Share.extend({
  token: z.string().describe("Shown once: the share's secret. Only its SHA-256 is stored"),
  url: z.string().describe("Shown once: the link to hand out, the service's URL with ?berth_share=<token>"),
}).meta({ id: "CreatedPublicShare" });

export const ShareList = z.object({ data: z.array(Share) }).meta({ id: "PublicShareList" });

export interface SharesServiceDeps {
  /** The API's read-your-writes cache, tracking Apps and Shares. */
  cache: ReadYourWritesCache;
  /** The service's App, or 404 app_not_found (AppsService.load). */
  apps: Pick<AppsService, "load">;
  baseDomain: string;
  /** Whether viewers can sign in (OIDC configured): requireAuth shares need it. */
  signInConfigured: boolean;
  now: () => Date;
}

/** A Share as the forward-auth decision reads it; undefined when it is not a well-formed Share. */
export function shareView(s: ShareObject | undefined): ShareView | undefined {
  if (!s?.metadata.name || !s.metadata.uid || s.metadata.deletionTimestamp) return undefined;
  const spec = ShareSpec.safeParse(s.spec);
  if (!spec.success) return undefined;
  return {
    name: s.metadata.name,
    uid: s.metadata.uid,
    app: spec.data.appRef.name,
    requireAuth: spec.data.requireAuth,
    ...(spec.data.expiresAt ? { expiresAt: Date.parse(spec.data.expiresAt) } : {}),
  };
}

export class SharesService {
  readonly #d: SharesServiceDeps;

  constructor(d: SharesServiceDeps) {
    this.#d = d;
  }

  async #app(wsId: string, appId: string): Promise<{ ns: string; app: AppObject }> {
    const app = await this.#d.apps.load(wsId, appId);
    return { ns: app.metadata.namespace!, app };
  }

  #toShare(s: ShareObject, nowMs: number): Share {
    const view = shareView(s);
    return {
      id: s.metadata.name!,
      appId: s.spec.appRef.name,
      requireAuth: s.spec.requireAuth ?? false,
      expiresAt: s.spec.expiresAt ? new Date(s.spec.expiresAt).toISOString() : null,
      active: view !== undefined && (view.expiresAt === undefined || view.expiresAt > nowMs),
      createdAt: new Date(s.metadata.creationTimestamp ?? nowMs).toISOString(),
    };
  }

  async create(wsId: string, appId: string, body: CreateShareBody): Promise<z.output<typeof CreatedShare>> {
    const { ns, app } = await this.#app(wsId, appId);
    const spec = specOf(app);
    if (!isServed(spec.type)) throw new ConflictError("not_served", `Service ${appId} is a ${spec.type}: it has no URL to share`);
    const now = this.#d.now();
    const expiresAt = body?.expiresAt ? new Date(body.expiresAt) : undefined;
    if (expiresAt && expiresAt.getTime() <= now.getTime())
      throw new ValidationError([{ field: "body.expiresAt", message: "must be in the future" }]);
    const requireAuth = body?.requireAuth ?? false;
    if (requireAuth && !this.#d.signInConfigured) {
      throw new ConflictError(
        "sign_in_not_configured",
        "requireAuth needs viewers to sign in, and this Berth has no identity provider configured (BERTH_OIDC_*)",
      );
    }
    const token = mintShareToken();
    const obj: ShareObject = {
      apiVersion: API_VERSION,
      kind: "Share",
      metadata: {
        name: `${appId.slice(0, 240)}-${randomBytes(5).toString("hex")}`,
        namespace: ns,
        labels: { [APP_LABEL]: appId },
        ownerReferences: [
          { apiVersion: API_VERSION, kind: "App", name: appId, uid: app.metadata.uid!, controller: false, blockOwnerDeletion: false },
        ],
      },
      spec: {
        appRef: { name: appId },
        requireAuth,
        tokenHash: shareTokenHash(token),
        ...(expiresAt ? { expiresAt: expiresAt.toISOString().replace(/\.\d{3}Z$/, "Z") } : {}),
      },
    };
    let created: ShareObject;
    try {
      created = await this.#d.cache.create<ShareObject>(obj);
    } catch (err) {
      throw quotaExceeded(err, "shares") ?? err;
    }
    const url = new URL(appUrl(spec, this.#d.baseDomain)!);
    url.searchParams.set(FORWARD_AUTH.shareParam, token);
    return { ...this.#toShare(created, now.getTime()), token, url: url.href };
  }

  /** The App's active shares (not expired), newest first. */
  async list(wsId: string, appId: string): Promise<z.output<typeof ShareList>> {
    const { ns } = await this.#app(wsId, appId);
    const nowMs = this.#d.now().getTime();
    const data = this.#d.cache
      .list<ShareObject>("Share", ns)
      .filter((s) => s.spec?.appRef?.name === appId && !s.metadata.deletionTimestamp)
      .map((s) => this.#toShare(s, nowMs))
      .filter((s) => s.active)
      .sort((a, b) => (a.createdAt < b.createdAt ? 1 : a.createdAt > b.createdAt ? -1 : a.id.localeCompare(b.id)));
    return { data };
  }

  /** Revokes (deletes) the share: the next request that presents it is refused. */
  async revoke(wsId: string, appId: string, shareId: string): Promise<void> {
    const { ns } = await this.#app(wsId, appId);
    const ref = { apiVersion: API_VERSION, kind: "Share", namespace: ns, name: shareId };
    const share = await this.#d.cache.getOrFetch<ShareObject>(ref);
    if (!share || share.metadata.deletionTimestamp || share.spec?.appRef?.name !== appId)
      throw new NotFoundError("share_not_found", `No share ${shareId} of service ${appId}`);
    await this.#d.cache.delete(ref, share);
  }
}
