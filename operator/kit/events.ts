// Which Events the operator records (docs/operating.md "Events"), as cert-manager does: one per
// transition a user acts on or is told about, never one per child object created or pruned (a
// rollout's Deployment, Service, Ingress and HPA are one story, told by the App's conditions).
// Two kinds of Event:
// - a condition's transition (its status or reason changed), told by the primary's status write
//   with the condition's reason (app/status.ts statusEvents, domain/status.ts domainEvents);
// - the lifecycle steps below, told by the controller that takes them, each with its own reason.
import type { EventRecorder } from "../../kube/events.ts";
import type { KubeObject } from "../../kube/objects.ts";

/** Every lifecycle reason, with its Event type. A reason not here is never recorded by a controller. */
export const LIFECYCLE_EVENTS = {
  /** Any failed reconcile (a call the RBAC refuses, the API server unreachable). */
  ReconcileError: "Warning",
  /** App: a forced re-provision wrote a new governance key; the pods roll. */
  KeyRotated: "Normal",
  /** Domain: its certificate was requested from the ClusterIssuer. */
  CertificateRequested: "Normal",
  /** Release phases, each told once, when the release enters it. */
  BuildWaiting: "Normal",
  Building: "Normal",
  Releasing: "Normal",
  Deploying: "Normal",
  Deployed: "Normal",
  Superseded: "Normal",
  Cancelled: "Normal",
  BuildFailed: "Warning",
  ReleaseFailed: "Warning",
  DeployFailed: "Warning",
} as const satisfies Record<string, "Normal" | "Warning">;

export type LifecycleReason = keyof typeof LIFECYCLE_EVENTS;

/** Records a lifecycle Event on `obj` with the type the policy gives its reason (nothing without a recorder). */
export function recordLifecycle(events: EventRecorder | undefined, obj: KubeObject, reason: LifecycleReason, message: string): void {
  events?.event(obj, LIFECYCLE_EVENTS[reason], reason, message);
}
