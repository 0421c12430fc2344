// The operator's permissions, from the code that needs them (kube/rbac.ts): the union of what
// each part declares next to its calls. hack/gen.ts renders them into the chart
// (templates/operator-rbac.yaml); a test fails when the two disagree.
import type { Access } from "../kube/rbac.ts";
import { PER_NAMESPACE_ACCESS } from "./kit/informers.ts";
import { EVENT_RECORDER_ACCESS } from "../kube/events.ts";
import { APP_CONTROLLER_ACCESS } from "./app/reconcile.ts";
import { RELEASE_CONTROLLER_ACCESS } from "./release/reconcile.ts";
import { DOMAIN_CONTROLLER_ACCESS } from "./domain/reconcile.ts";
import { leaderElectionAccess } from "./runtime/leader.ts";
import { LEADER_ELECTION_LEASE } from "./main.ts";

export const OPERATOR_ACCESS: readonly Access[] = [
  ...APP_CONTROLLER_ACCESS,
  ...RELEASE_CONTROLLER_ACCESS,
  ...DOMAIN_CONTROLLER_ACCESS,
  ...EVENT_RECORDER_ACCESS,
  ...PER_NAMESPACE_ACCESS,
  ...leaderElectionAccess(LEADER_ELECTION_LEASE),
];
