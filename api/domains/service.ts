// Custom domains (docs/spec.md part 4, docs/domains.md): each one is a Domain custom resource in the
// workspace's namespace, owned by its App. This module checks names, the claim rule (one App per
// domain in the whole cluster) and that no Ingress of the cluster serves the domain already;
// creates, lists and deletes Domains, and asks the operator for a DNS check now (POST .../verify),
// waiting for its answer. The operator verifies DNS, routes the domain (refusing, too, a host
// another Ingress serves) and requests its certificate; it alone writes a Domain's status.
import { randomUUID } from "node:crypto";
import { z } from "zod";
import { API_VERSION, APP_LABEL, AppSpec, TLS_STATUSES, WORKSPACE_LABEL } from "../../crds/schemas.ts";
import {
  blocksNewClaim,
  challengeHost,
  challengeToken,
  checkDomainName,
  domainRef,
  ingressServes,
  VERIFY_REQUEST_ANNOTATION,
  type DomainObject,
  type IngressView,
} from "../../crds/domain.ts";
import { isConflict, isNotFound, type KubeClient, type KubeObject } from "../../kube/client.ts";
import { groupOf, type Access } from "../../kube/rbac.ts";
import { ConflictError, DomainError, NotFoundError, quotaExceeded } from "../errors.ts";
import type { AppObject, AppsService } from "../apps/service.ts";

export const DOMAINS_ACCESS: Access[] = [
  {
    group: groupOf(API_VERSION),
    resource: "domains",
    verbs: ["list"],
    why: "A domain belongs to one service in the whole platform: adding one lists the Domains of every workspace namespace for other claims",
  },
  {
    group: groupOf(API_VERSION),
    resource: "domains",
    verbs: ["get", "create", "patch", "delete"],
    why: "Custom domains are Domain resources: created, read, annotated to ask for a DNS check now, and deleted",
  },
  {
    group: "networking.k8s.io",
    resource: "ingresses",
    verbs: ["list"],
    why: "A domain that another Ingress of the cluster already serves is refused: adding one lists the Ingresses of every namespace (read only)",
  },
];

const INGRESS_API_VERSION = "networking.k8s.io/v1";

export const CustomDomain = z
  .object({
    id: z.string().describe("The Domain resource's name: the domain itself"),
    domain: z.string().describe("Fully qualified, lower-case, internationalized names in punycode"),
    targetPort: z.int().describe("Container port the domain routes to (the service's port unless set)"),
    verified: z.boolean(),
    tlsStatus: z.enum(TLS_STATUSES).describe("pending, issuing, active, expiring, failed or expired (docs/domains.md)"),
    createdAt: z.string(),
    verifiedAt: z.string().nullable(),
    dnsTarget: z.string().describe("Point a CNAME record for the domain at this host"),
    challenge: z
      .object({
        name: z.string().describe("_berth-challenge.<domain>"),
        value: z.string().describe("This claim's own value: another claim of the same domain has another"),
      })
      .describe(
        "The TXT record that proves this workspace controls the domain's DNS; the domain verifies once it exists and the domain points at dnsTarget",
      ),
    verification: z.object({
      status: z
        .enum(["pending", "verified", "failed", "expired", "claimed", "invalid"])
        .describe(
          "pending: not checked yet; failed: the last check did not find the record (checked again at nextCheckAt); expired: 48 hours passed, automatic checks stopped; claimed: another service holds the domain",
        ),
      reason: z.string(),
      message: z.string(),
      lastCheckedAt: z.string().nullable(),
      nextCheckAt: z.string().nullable(),
    }),
    tls: z.object({ message: z.string(), expiresAt: z.string().nullable() }),
  })
  .meta({ id: "CustomDomain" });
export type CustomDomain = z.output<typeof CustomDomain>;

export const CustomDomainList = z.array(CustomDomain).meta({ id: "CustomDomainList" });

export const AddDomainBody = z
  .object({
    domain: z
      .string()
      .min(1)
      .max(1000)
      .describe("A fully qualified domain name (an internationalized name is converted to punycode; no wildcards)"),
    targetPort: z.int().min(1).max(65535).optional().describe("Container port to route to; defaults to the service's port"),
  })
  .strict()
  .meta({ id: "AddDomainRequest" });

export interface DomainsDeps {
  kube: KubeClient;
  /** The service's App, or 404 app_not_found (AppsService.load). */
  apps: Pick<AppsService, "load">;
  baseDomain: string;
  ingressHost: string;
  /** The platform's own hosts (the API's public host): never a custom domain. */
  platformHosts?: readonly string[];
  /** How long POST .../verify waits for the operator's check. */
  verifyWaitMs: number;
  now?: () => Date;
}

type Domain = KubeObject & DomainObject;

const sleep = (ms: number) =>
  new Promise<void>((r) => {
    setTimeout(r, ms);
  });

export class DomainsService {
  readonly #d: DomainsDeps;

  constructor(d: DomainsDeps) {
    this.#d = d;
  }

  #now(): Date {
    return this.#d.now?.() ?? new Date();
  }

  async #app(wsId: string, appId: string): Promise<{ ns: string; app: AppObject; spec: AppSpec | undefined }> {
    const app = await this.#d.apps.load(wsId, appId);
    const ns = app.metadata.namespace!;
    const parsed = AppSpec.safeParse(app.spec);
    return { ns, app, spec: parsed.success ? parsed.data : undefined };
  }

  #view(d: Domain, appPort: number | undefined): CustomDomain {
    const s = d.status ?? {};
    const cond = (t: string) => s.conditions?.find((c) => c.type === t);
    const v = cond("Verified");
    const vstatus: CustomDomain["verification"]["status"] = s.verified
      ? "verified"
      : !v
        ? "pending"
        : v.reason === "VerificationExpired"
          ? "expired"
          : v.reason === "ClaimedByAnotherApp"
            ? "claimed"
            : v.reason === "InvalidDomain"
              ? "invalid"
              : v.reason === "Pending"
                ? "pending"
                : "failed";
    return {
      id: d.metadata.name!,
      domain: d.spec.domain,
      targetPort: d.spec.targetPort ?? appPort ?? 0,
      verified: s.verified === true,
      tlsStatus: s.tlsStatus ?? "pending",
      createdAt: new Date(d.metadata.creationTimestamp ?? 0).toISOString(),
      verifiedAt: s.verifiedAt ?? null,
      dnsTarget: s.dnsTarget ?? this.#d.ingressHost,
      challenge: { name: challengeHost(d.spec.domain), value: challengeToken(d.metadata.uid!) },
      verification: {
        status: vstatus,
        reason: v?.reason ?? "Pending",
        message:
          v?.message ??
          `Waiting for the first DNS check: create the records ${d.spec.domain} CNAME ${this.#d.ingressHost} and ${challengeHost(d.spec.domain)} TXT ${challengeToken(d.metadata.uid!)}`,
        lastCheckedAt: s.lastCheckedAt ?? null,
        nextCheckAt: s.nextCheckAt ?? null,
      },
      tls: {
        message: cond("CertificateReady")?.message ?? "No certificate has been requested yet: the domain must be verified first",
        expiresAt: s.certificateNotAfter ?? null,
      },
    };
  }

  async list(wsId: string, appId: string): Promise<CustomDomain[]> {
    const { ns, spec } = await this.#app(wsId, appId);
    const all = await this.#d.kube.list<Domain>(API_VERSION, "Domain", ns);
    return all.items
      .filter((d) => d.spec?.appRef?.name === appId && !d.metadata.deletionTimestamp)
      .sort((a, b) => a.spec.domain.localeCompare(b.spec.domain))
      .map((d) => this.#view(d, spec?.port));
  }

  /** POST .../domains: the name checked and canonicalized, the claim rule, no other Ingress serving it, then the Domain. */
  async add(wsId: string, appId: string, body: z.output<typeof AddDomainBody>): Promise<CustomDomain> {
    const { ns, app, spec } = await this.#app(wsId, appId);
    const check = checkDomainName(body.domain, { baseDomain: this.#d.baseDomain, ingressHost: this.#d.ingressHost });
    if (!check.ok)
      throw new DomainError(422, check.code, check.message, { fieldErrors: [{ field: "body.domain", message: check.message }] });
    const domain = check.domain;
    if (this.#d.platformHosts?.includes(domain)) {
      throw new DomainError(422, "domain_reserved", `${domain} is one of the platform's own hosts`, {
        fieldErrors: [{ field: "body.domain", message: "is one of the platform's own hosts" }],
      });
    }
    const claims = (await this.#d.kube.list<Domain>(API_VERSION, "Domain")).items.filter((d) => d.spec?.domain === domain);
    const mine = claims.find((d) => d.metadata.namespace === ns && d.spec.appRef?.name === appId && !d.metadata.deletionTimestamp);
    if (mine)
      throw new ConflictError("domain_exists", `${domain} is already a domain of this service`, { details: { id: mine.metadata.name } });
    if (claims.some((d) => blocksNewClaim(d))) {
      throw new ConflictError(
        "domain_taken",
        `${domain} is verified for another service: a domain belongs to one service in the whole platform.`,
      );
    }
    // Which Ingress serves it is not said: it may be another tenant's, or the platform's own.
    const ingresses = (await this.#d.kube.list<KubeObject & IngressView>(INGRESS_API_VERSION, "Ingress")).items;
    if (ingresses.some((i) => ingressServes(i, domain))) {
      throw new ConflictError(
        "domain_served",
        `${domain} is already served by another Ingress in the cluster: a custom domain cannot take over a host that something else serves.`,
      );
    }
    const obj: Domain = {
      apiVersion: API_VERSION,
      kind: "Domain",
      metadata: {
        name: domain,
        namespace: ns,
        labels: { [APP_LABEL]: appId, [WORKSPACE_LABEL]: wsId },
        ownerReferences: [
          { apiVersion: API_VERSION, kind: "App", name: appId, uid: app.metadata.uid!, controller: false, blockOwnerDeletion: false },
        ],
      },
      spec: { appRef: { name: appId }, domain, ...(body.targetPort ? { targetPort: body.targetPort } : {}) },
    };
    try {
      return this.#view(await this.#d.kube.create<Domain>(obj, "berth-api"), spec?.port);
    } catch (err) {
      // A Domain of that name left in the namespace (an expired claim of another service here, or one being deleted).
      if (isConflict(err))
        throw new ConflictError(
          "domain_taken",
          `${domain} is still held in this workspace by another service's Domain (it may be being deleted): remove it there, or retry in a moment.`,
        );
      throw quotaExceeded(err, "custom domains") ?? err;
    }
  }

  async #domain(wsId: string, appId: string, id: string): Promise<{ ns: string; d: Domain; port: number | undefined }> {
    const { ns, spec } = await this.#app(wsId, appId);
    const d = await this.#d.kube.get<Domain>(domainRef(ns, id));
    if (!d || d.spec?.appRef?.name !== appId || d.metadata.deletionTimestamp)
      throw new NotFoundError("domain_not_found", `No domain ${id} on service ${appId}`);
    return { ns, d, port: spec?.port };
  }

  /**
   * POST .../verify: asks the operator to check DNS now (the annotation berth.dev/verify-requested
   * with a fresh token) and waits for the status that answers it. 200 with the answer; 202 with
   * the current record when the operator did not answer within verifyWaitMs (it still will).
   */
  async verify(wsId: string, appId: string, id: string): Promise<{ status: 200 | 202; body: CustomDomain }> {
    const { ns, d, port } = await this.#domain(wsId, appId, id);
    const token = `${this.#now().toISOString()}/${randomUUID().slice(0, 8)}`;
    await this.#d.kube.mergePatch(domainRef(ns, id), { metadata: { annotations: { [VERIFY_REQUEST_ANNOTATION]: token } } }, "berth-api");
    const deadline = Date.now() + this.#d.verifyWaitMs;
    let latest = d;
    while (Date.now() < deadline) {
      await sleep(150);
      const got = await this.#d.kube.get<Domain>(domainRef(ns, id));
      if (!got) throw new NotFoundError("domain_not_found", `No domain ${id} on service ${appId}`);
      latest = got;
      if (got.status?.handledVerifyRequest === token) return { status: 200, body: this.#view(got, port) };
    }
    return { status: 202, body: this.#view(latest, port) };
  }

  /** DELETE .../domains/{id}: the Domain goes; its route, Certificate and Secret go with it (owner references). */
  async remove(wsId: string, appId: string, id: string): Promise<void> {
    const { ns } = await this.#domain(wsId, appId, id);
    try {
      await this.#d.kube.delete(domainRef(ns, id));
    } catch (err) {
      if (!isNotFound(err)) throw err;
    }
  }
}
