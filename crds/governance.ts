// The operator ↔ API contract of governance provisioning (docs/governance.md): the operator,
// authenticated with its ServiceAccount token, asks the API to provision an App's store and mint
// its scoped key (POST /api/v1/internal/governance/provision), or to drop it (DELETE). The API
// validates requests with these schemas and the operator parses the answers with them.
import { z } from "zod";
import { DNS_LABEL } from "./schemas.ts";

export const PROVISION_PATH = "/api/v1/internal/governance/provision";

export const ProvisionRequest = z
  .object({
    namespace: z.string().min(1).max(63),
    appName: z.string().regex(new RegExp(DNS_LABEL), "must be an App name (a DNS label)").max(63),
    appUid: z.string().min(1).max(64),
    generation: z.int().min(1).max(2_147_483_647),
  })
  .strict()
  .meta({ id: "InternalProvisionRequest" });
export type ProvisionRequest = z.output<typeof ProvisionRequest>;

export const DeprovisionRequest = ProvisionRequest.omit({ generation: true }).strict().meta({ id: "InternalDeprovisionRequest" });
export type DeprovisionRequest = z.output<typeof DeprovisionRequest>;

export const Provisioned = z
  .object({
    project: z.string().min(1).describe("GOVERNANCE_PROJECT: the app id (the App's name)"),
    workspaceId: z.string().min(1),
    database: z.string().min(1),
    generation: z.int().min(1),
    connectionString: z
      .string()
      .regex(/^govdb:\/\/[^@\s]+@[^/\s]+\/\S+$/, "must be govdb://<key>@<host>/<database>")
      .describe("GOVDB_CONNECTION, unmasked"),
  })
  .strict()
  .meta({ id: "InternalProvisionResult" });
export type Provisioned = z.output<typeof Provisioned>;

/** The problem `code` with which the API refuses to provision an App whose governance was switched off. */
export const GOVERNANCE_DISABLED_CODE = "governance_disabled";
/** The problem `code` with which the API refuses to provision an App (by uid) whose store its finalizer already dropped. */
export const APP_DELETED_CODE = "app_deleted";
