// Custom domain endpoints (docs/spec.md part 4 "Custom domains"; docs/domains.md): one definition validates and documents each.
import { z } from "zod";
import { defineRoute, type RouteDef } from "../http/route.ts";
import { AppParams, ObjectId } from "../apps/schemas.ts";
import { AddDomainBody, CustomDomain, CustomDomainList, type DomainsService } from "./service.ts";

const tags = ["Custom domains"];
const DomainParams = AppParams.extend({ domainId: ObjectId }).strict();

/** When a 202 from verify suggests asking again: a check takes a DNS round trip or two. */
const VERIFY_RETRY_AFTER_SECONDS = 2;

export function domainRoutes(d: DomainsService): RouteDef[] {
  return [
    defineRoute({
      method: "post",
      path: "/workspaces/:wsId/apps/:appId/domains",
      operationId: "addDomain",
      tags,
      auth: "workspace",
      summary: "Add a custom domain",
      description:
        "The name is lower-cased and an internationalized name converted to punycode. Refused (422): not a fully qualified name, a wildcard, the platform's base domain or a name under it, the API's own host (domain_reserved). 409 quota_exceeded: the workspace holds its quota of domains. 409 domain_taken: another service's claim is verified (a domain belongs to one service in the whole platform; unverified claims keep nobody out). 409 domain_served: an Ingress in the cluster already serves the name (a rule or TLS host equal to it, or a wildcard covering it), whoever made it; which one is not said. Then point a CNAME at dnsTarget and create the TXT record challenge.name with challenge.value (this claim's own); the domain is checked at once and again with backoff for 48 hours.",
      params: AppParams,
      body: AddDomainBody,
      responses: { 201: CustomDomain, 409: null },
      handler: async ({ params, body }) => {
        const created = await d.add(params.wsId, params.appId, body);
        return {
          status: 201,
          body: created,
          headers: { Location: `/api/v1/workspaces/${params.wsId}/apps/${params.appId}/domains/${created.id}` },
        };
      },
    }),
    defineRoute({
      method: "get",
      path: "/workspaces/:wsId/apps/:appId/domains",
      operationId: "listDomains",
      tags,
      auth: "workspace",
      summary: "List a service's custom domains with their verification and TLS status",
      params: AppParams,
      responses: { 200: CustomDomainList },
      handler: async ({ params }) => ({ status: 200, body: await d.list(params.wsId, params.appId) }),
    }),
    defineRoute({
      method: "post",
      path: "/workspaces/:wsId/apps/:appId/domains/:domainId/verify",
      operationId: "verifyDomain",
      tags,
      auth: "workspace",
      summary: "Check the domain's DNS now",
      description:
        "Asks the operator to check the domain's DNS now. 202 with the domain's current state and Retry-After (seconds): GET the domain after it for the outcome (verification.lastCheckedAt moves). With BERTH_DOMAIN_VERIFY_WAIT_MS set, the answer waits that long for the check and is 200 with its outcome when it came in time. Works after the 48-hour window too.",
      params: DomainParams,
      body: z.object({}).strict().optional(),
      responses: { 200: CustomDomain, 202: CustomDomain },
      handler: async ({ params }) => {
        const r = await d.verify(params.wsId, params.appId, params.domainId);
        return r.status === 202 ? { ...r, headers: { "Retry-After": String(VERIFY_RETRY_AFTER_SECONDS) } } : r;
      },
    }),
    defineRoute({
      method: "delete",
      path: "/workspaces/:wsId/apps/:appId/domains/:domainId",
      operationId: "deleteDomain",
      tags,
      auth: "workspace",
      summary: "Remove a custom domain",
      description: "Removes its route, its certificate and the certificate's Secret.",
      params: DomainParams,
      responses: { 204: null },
      handler: async ({ params }) => {
        await d.remove(params.wsId, params.appId, params.domainId);
        return { status: 204 };
      },
    }),
  ];
}
