// Workspaces and their API keys. A workspace maps to one namespace labelled
// berth.dev/workspace=<id>. Keys are stored only as SHA-256 digests of their secret.
import { defineEntity, p, type InferEntity } from "@mikro-orm/core";
import { keyProperties } from "../auth/entities.ts";

export const Workspace = defineEntity({
  name: "Workspace",
  tableName: "workspaces",
  properties: {
    id: p.string().primary().length(32),
    name: p.string().length(100),
    namespace: p.string().length(63).unique(),
    createdAt: p.datetime().onCreate(() => new Date()),
  },
});
export type Workspace = InferEntity<typeof Workspace>;

export const ApiKey = defineEntity({
  name: "ApiKey",
  tableName: "api_keys",
  properties: {
    ...keyProperties(),
    workspace: () => p.manyToOne(Workspace).deleteRule("cascade"),
  },
});
export type ApiKey = InferEntity<typeof ApiKey>;

/**
 * A workspace's member: a person who signs in to the console with the organisation's identity
 * provider (api/console/oidc.ts). A platform admin adds them by email, which is what an admin
 * knows; the identity (issuer and subject of the ID token) is recorded at the first sign-in and
 * must match on every later one.
 */
export const WorkspaceMember = defineEntity({
  name: "WorkspaceMember",
  tableName: "workspace_members",
  properties: {
    id: p.uuid().primary(),
    workspace: () => p.manyToOne(Workspace).deleteRule("cascade"),
    /** Lowercase. */
    email: p.string().length(254),
    /** The identity provider's issuer and the member's subject there: null until the first sign-in. */
    issuer: p.string().length(2048).nullable(),
    subject: p.string().length(255).nullable(),
    createdAt: p.datetime(),
    lastSignInAt: p.datetime().nullable(),
  },
});
export type WorkspaceMember = InferEntity<typeof WorkspaceMember>;
