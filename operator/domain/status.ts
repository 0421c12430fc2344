// A Domain's status as a pure function of what was observed (docs/domains.md), and the Events its
// transitions tell. Conditions: Verified (DNS), Routed (its Ingress), CertificateReady (tlsStatus),
// Ready (all three). lastTransitionTime moves only on a real transition.
import type { DomainStatus, TlsStatus } from "../../crds/schemas.ts";
import type { Verification } from "../../crds/domain.ts";
import { conditionTransitions, setConditions, type ConditionInput } from "../../kube/conditions.ts";
import { statusUnchanged } from "../kit/status.ts";

export interface DomainStatusInput {
  old: DomainStatus | undefined;
  generation: number;
  now: Date;
  /** The domain (spec.domain). */
  domain: string;
  /** The host the domain must point at. */
  dnsTarget: string;
  /** The domain name itself is refused (a Domain applied with kubectl that the API would refuse). */
  invalid?: { reason: string; message: string } | undefined;
  /** A DNS check made in this reconcile. */
  check?: { verification: Verification } | undefined;
  /** The verify request (annotation token) this reconcile answered, with or without a check. */
  request?: string | undefined;
  /** Another App's Domain holds this domain (the first verified claim wins). */
  claimedElsewhere?: boolean;
  /** The next automatic check, or expired: 48 hours passed and checks stopped. */
  schedule: { at: Date } | { expired: true };
  routed: { ok: boolean; reason: string; message: string };
  tls: { status: TlsStatus; message: string; notAfter?: string | undefined };
}

export function computeDomainStatus(i: DomainStatusInput): DomainStatus {
  const old = i.old ?? {};
  const now = i.now.toISOString();
  const expired = "expired" in i.schedule;
  let verified = old.verified === true && !i.claimedElsewhere && !i.invalid;
  let verifiedAt = verified ? old.verifiedAt : undefined;
  let vc: ConditionInput;
  const oldVerified = old.conditions?.find((c) => c.type === "Verified");
  if (i.invalid) {
    vc = { type: "Verified", status: "False", reason: i.invalid.reason, message: i.invalid.message };
  } else if (i.claimedElsewhere) {
    vc = {
      type: "Verified",
      status: "False",
      reason: "ClaimedByAnotherApp",
      message:
        "Another service already verified this domain: a domain belongs to one service in the whole platform (the first verified claim wins). Remove it there first.",
    };
  } else if (verified) {
    vc =
      oldVerified?.status === "True"
        ? { type: "Verified", status: "True", reason: oldVerified.reason, message: oldVerified.message }
        : { type: "Verified", status: "True", reason: "Verified", message: "DNS points at the platform" };
  } else if (i.check?.verification.verified) {
    verified = true;
    verifiedAt = now;
    vc = { type: "Verified", status: "True", reason: i.check.verification.reason, message: i.check.verification.message };
  } else {
    const last =
      i.check?.verification ??
      (oldVerified && oldVerified.reason !== "VerificationExpired"
        ? { reason: oldVerified.reason, message: oldVerified.message }
        : undefined);
    // The last check's finding, without what this function appended to it before.
    const core = (
      last?.message ??
      oldVerified?.message ??
      `Waiting for the first DNS check: create the record ${i.domain} CNAME ${i.dnsTarget}`
    )
      .replace(/ (Checked again at|Automatic checks stopped) .*$/, "")
      .replace(/\.$/, "");
    vc = expired
      ? {
          type: "Verified",
          status: "False",
          reason: "VerificationExpired",
          message: `${core}. Automatic checks stopped 48 hours after the domain was added: fix the record, then POST .../verify.`,
        }
      : {
          type: "Verified",
          status: "False",
          reason: last?.reason ?? "Pending",
          message: `${core}. Checked again at ${(i.schedule as { at: Date }).at.toISOString()}.`,
        };
  }
  const tlsReady = i.tls.status === "active" || i.tls.status === "expiring";
  const conditions = setConditions(
    old.conditions,
    [
      { ...vc, observedGeneration: i.generation },
      {
        type: "Routed",
        status: i.routed.ok ? "True" : "False",
        reason: i.routed.reason,
        message: i.routed.message,
        observedGeneration: i.generation,
      },
      {
        type: "CertificateReady",
        status: tlsReady ? "True" : "False",
        reason: tlsReason(i.tls.status),
        message: i.tls.message,
        observedGeneration: i.generation,
      },
      {
        type: "Ready",
        observedGeneration: i.generation,
        ...(verified && i.routed.ok && tlsReady
          ? { status: "True" as const, reason: "Serving", message: `https://${i.domain} is served with a valid certificate` }
          : {
              status: "False" as const,
              reason: !verified ? "NotVerified" : !i.routed.ok ? i.routed.reason : tlsReason(i.tls.status),
              message: !verified ? vc.message : !i.routed.ok ? i.routed.message : i.tls.message,
            }),
      },
    ],
    i.now,
  );
  const check = i.check;
  return {
    observedGeneration: i.generation,
    verified,
    ...(verifiedAt ? { verifiedAt } : {}),
    tlsStatus: i.tls.status,
    dnsTarget: i.dnsTarget,
    ...(check ? { lastCheckedAt: now } : old.lastCheckedAt ? { lastCheckedAt: old.lastCheckedAt } : {}),
    ...(!verified && !expired && !i.invalid && !i.claimedElsewhere ? { nextCheckAt: (i.schedule as { at: Date }).at.toISOString() } : {}),
    ...(i.request
      ? { handledVerifyRequest: i.request }
      : old.handledVerifyRequest
        ? { handledVerifyRequest: old.handledVerifyRequest }
        : {}),
    ...(i.tls.notAfter ? { certificateNotAfter: new Date(i.tls.notAfter).toISOString() } : {}),
    conditions,
  };
}

function tlsReason(s: TlsStatus): string {
  return {
    pending: "CertificatePending",
    issuing: "CertificateIssuing",
    active: "CertificateActive",
    expiring: "CertificateExpiring",
    failed: "CertificateFailed",
    expired: "CertificateExpired",
  }[s];
}

/** True when writing `b` over the stored `a` would change nothing. */
export function domainStatusEqual(a: DomainStatus | undefined, b: DomainStatus): boolean {
  return statusUnchanged(a, b);
}

export interface DomainEvent {
  type: "Normal" | "Warning";
  reason: string;
  message: string;
}

const WARNINGS: ReadonlySet<string> = new Set([
  "VerificationExpired",
  "ClaimedByAnotherApp",
  "InvalidDomain",
  "CertificateFailed",
  "CertificateExpiring",
  "CertificateExpired",
  "AppNotFound",
  "HostServedElsewhere",
]);
const EVENT_CONDITIONS = ["Verified", "Routed", "CertificateReady"] as const;

/**
 * The Events a status write tells (kubectl describe domain): one per condition whose status or
 * reason changed, with its reason and message; Warning for what needs a user. A failed check
 * that fails again for the same reason tells nothing new. Pure.
 */
export function domainEvents(prev: DomainStatus | undefined, next: DomainStatus): DomainEvent[] {
  const out: DomainEvent[] = [];
  for (const { condition: c, was } of conditionTransitions(prev?.conditions, next.conditions, EVENT_CONDITIONS)) {
    const type = c.type;
    if (!was && c.reason === "Pending") continue;
    if (!was && type === "CertificateReady" && c.reason === "CertificatePending") continue;
    if (!was && type === "Routed" && c.status === "False" && c.reason === "NotVerified") continue;
    const warning = WARNINGS.has(c.reason) || (type === "Verified" && c.status === "False" && c.reason !== "Pending");
    out.push({
      type: warning ? "Warning" : "Normal",
      reason: type === "Verified" && c.status === "True" ? "Verified" : c.reason,
      message: c.message,
    });
  }
  return out;
}
