// Workspace members: the people who sign in to the console with the organisation's identity
// provider (api/console/oidc.ts), managed with the platform admin key. A member is added by email
// (what an admin knows before anybody signed in). At sign-in the ID token must carry that email
// with email_verified true; the first sign-in records the token's issuer and subject, and every
// later one must present the same (an email that moves to another person at the provider does not
// move the membership with it). Removing a member ends their console sessions (the sessions
// reference the member row and go with it).
import type { EntityManager } from "@mikro-orm/postgresql";
import { UniqueConstraintViolationException } from "@mikro-orm/core";
import { randomUUID } from "node:crypto";
import { ConflictError, ForbiddenError, NotFoundError } from "../errors.ts";
import { Workspace, WorkspaceMember } from "./entities.ts";

export interface MemberView {
  id: string;
  workspaceId: string;
  email: string;
  issuer: string | null;
  subject: string | null;
  createdAt: Date;
  lastSignInAt: Date | null;
}

function view(m: WorkspaceMember): MemberView {
  return {
    id: m.id,
    workspaceId: m.workspace.id,
    email: m.email,
    issuer: m.issuer ?? null,
    subject: m.subject ?? null,
    createdAt: m.createdAt,
    lastSignInAt: m.lastSignInAt ?? null,
  };
}

/** Emails are compared without case (the way mail systems and identity providers treat them in practice). */
export function normaliseEmail(email: string): string {
  return email.trim().toLowerCase();
}

/** What the identity provider said about who signed in (the ID token's claims, checked by openid-client). */
export interface SignedInIdentity {
  iss: string;
  sub: string;
  email?: unknown;
  email_verified?: unknown;
}

export interface MembersOptions {
  /** The most members a workspace may have (BERTH_MAX_MEMBERS_PER_WORKSPACE). */
  maxPerWorkspace: number;
  now?: () => Date;
}

export class MembersService {
  readonly #max: number;
  readonly #now: () => Date;

  constructor(o: MembersOptions) {
    this.#max = o.maxPerWorkspace;
    this.#now = o.now ?? (() => new Date());
  }

  async #workspace(em: EntityManager, workspaceId: string): Promise<void> {
    if (!(await em.findOne(Workspace, { id: workspaceId }, { fields: ["id"] })))
      throw new NotFoundError("workspace_not_found", `Workspace ${workspaceId} does not exist.`);
  }

  /** The workspace's members, by email. */
  async list(em: EntityManager, workspaceId: string): Promise<MemberView[]> {
    await this.#workspace(em, workspaceId);
    const rows = await em.find(WorkspaceMember, { workspace: workspaceId }, { orderBy: { email: "asc" } });
    return rows.map(view);
  }

  /** Adds a member by email (idempotent: `created` is false when the email is a member already). */
  async add(em: EntityManager, workspaceId: string, email: string): Promise<{ member: MemberView; created: boolean }> {
    await this.#workspace(em, workspaceId);
    const address = normaliseEmail(email);
    const existing = await em.findOne(WorkspaceMember, { workspace: workspaceId, email: address });
    if (existing) return { member: view(existing), created: false };
    if ((await em.count(WorkspaceMember, { workspace: workspaceId })) >= this.#max) {
      throw new ConflictError(
        "member_limit_reached",
        `The workspace has ${this.#max} members, the most it may (BERTH_MAX_MEMBERS_PER_WORKSPACE): remove one first.`,
      );
    }
    const row = em.create(WorkspaceMember, {
      id: randomUUID(),
      workspace: workspaceId,
      email: address,
      issuer: null,
      subject: null,
      createdAt: this.#now(),
      lastSignInAt: null,
    });
    try {
      await em.persist(row).flush();
    } catch (err) {
      // added at the same moment by another request: that one is the member
      if (!(err instanceof UniqueConstraintViolationException)) throw err;
      em.clear();
      const raced = await em.findOne(WorkspaceMember, { workspace: workspaceId, email: address });
      if (!raced) throw err;
      return { member: view(raced), created: false };
    }
    return { member: view(row), created: true };
  }

  /** Removes a member; their console sessions end with the row. 404 member_not_found when the email is no member. */
  async remove(em: EntityManager, workspaceId: string, email: string): Promise<void> {
    await this.#workspace(em, workspaceId);
    const removed = await em.nativeDelete(WorkspaceMember, { workspace: workspaceId, email: normaliseEmail(email) });
    if (removed === 0) throw new NotFoundError("member_not_found", `${normaliseEmail(email)} is not a member of workspace ${workspaceId}.`);
  }

  /**
   * The membership a signed-in person acts as: their verified email must be a member of
   * `workspaceId` (or, without it, of exactly one workspace), and the member's recorded identity
   * must be theirs (recorded now on a first sign-in). 403 otherwise, with a code saying why.
   */
  async signIn(em: EntityManager, who: SignedInIdentity, workspaceId: string | undefined): Promise<MemberView> {
    if (typeof who.email !== "string" || who.email === "")
      throw new ForbiddenError("email_not_verified", "The identity provider named no email for you; a member signs in with their email.");
    if (who.email_verified !== true)
      throw new ForbiddenError(
        "email_not_verified",
        "The identity provider has not verified your email, so it cannot stand for a workspace member's.",
      );
    const email = normaliseEmail(who.email);
    const rows = await em.find(WorkspaceMember, { email }, { orderBy: { workspace: "asc" } });
    const notMember = () =>
      new ForbiddenError(
        "not_a_member",
        workspaceId
          ? `${email} is not a member of workspace ${workspaceId}: ask a platform admin to add you.`
          : `${email} is not a member of any workspace: ask a platform admin to add you.`,
      );
    let row: WorkspaceMember | undefined;
    if (workspaceId !== undefined) row = rows.find((r) => r.workspace.id === workspaceId);
    else if (rows.length > 1)
      throw new ConflictError(
        "workspace_choice_required",
        `${email} is a member of several workspaces: sign in again naming one (?workspace=<id>).`,
        { details: { workspaces: rows.map((r) => r.workspace.id) } },
      );
    else row = rows[0];
    if (!row) throw notMember();
    if (row.subject !== null && row.subject !== undefined && (row.issuer !== who.iss || row.subject !== who.sub)) {
      throw new ForbiddenError(
        "member_identity_mismatch",
        `The member ${email} of workspace ${row.workspace.id} signed in before as another account of the identity provider; a platform admin can remove and add the member again.`,
      );
    }
    const now = this.#now();
    // first sign-in: the identity is recorded only while none is (two first sign-ins at once: one wins)
    const bound = await em.nativeUpdate(
      WorkspaceMember,
      row.subject ? { id: row.id, issuer: who.iss, subject: who.sub } : { id: row.id, subject: null },
      { issuer: who.iss, subject: who.sub, lastSignInAt: now },
    );
    if (bound === 0) {
      const again = await em.findOne(WorkspaceMember, { id: row.id }, { refresh: true });
      if (!again) throw notMember();
      if (again.issuer !== who.iss || again.subject !== who.sub)
        throw new ForbiddenError("member_identity_mismatch", `The member ${email} signed in as another account of the identity provider.`);
    }
    return { ...view(row), issuer: who.iss, subject: who.sub, lastSignInAt: now };
  }
}
