// Console sessions: a workspace key exchanged once for a session cookie, or a member's sign-in
// with the identity provider (api/console/sessions.ts). Only the SHA-256 of the session's secret
// is stored, as for keys; the session belongs to the key or the member that opened it (exactly
// one of them) and ends with it (revoking the key, removing the member, deleting the workspace).
import { defineEntity, p, type InferEntity } from "@mikro-orm/core";
import { ApiKey, Workspace, WorkspaceMember } from "../workspaces/entities.ts";

export const ConsoleSession = defineEntity({
  name: "ConsoleSession",
  tableName: "console_sessions",
  properties: {
    id: p.uuid().primary(),
    /** SHA-256 of the session cookie's value, hex. */
    hash: p.string().length(64).unique(),
    workspace: () => p.manyToOne(Workspace).deleteRule("cascade"),
    apiKey: () => p.manyToOne(ApiKey).deleteRule("cascade").nullable(),
    member: () => p.manyToOne(WorkspaceMember).deleteRule("cascade").nullable(),
    createdAt: p.datetime(),
    expiresAt: p.datetime().index(),
    revokedAt: p.datetime().nullable(),
  },
});
export type ConsoleSession = InferEntity<typeof ConsoleSession>;
