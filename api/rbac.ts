// The API's permissions, from the code that needs them (kube/rbac.ts): the union of what each
// module declares next to its calls. hack/gen.ts renders them into the chart
// (templates/api-rbac.yaml); a test fails when the two disagree. The API never touches
// workloads: the operator does. Of Ingresses it only lists, to refuse a custom domain another
// Ingress serves. The Secrets it writes are the services' own, one at a time by name:
// `<app>-env` (environment variables) and `<app>-webhook`; it reads Git credentials.
import type { Access } from "../kube/rbac.ts";
import { APPS_SERVICE_ACCESS } from "./apps/service.ts";
import { DEPLOYMENTS_ACCESS } from "./deployments/service.ts";
import { ENV_ACCESS } from "./apps/env.ts";
import { SHARES_ACCESS } from "./shares/service.ts";
import { SHARE_KEY_ACCESS } from "./shares/cookie-key.ts";
import { DOMAINS_ACCESS } from "./domains/service.ts";
import { POD_METRICS_ACCESS } from "./apps/metrics.ts";
import { TOKEN_REVIEWER_ACCESS } from "./auth/operator.ts";
import { GOVERNANCE_APPS_ACCESS } from "./governance/stores/apps.ts";
import { NAMESPACE_ENSURER_ACCESS } from "./workspaces/namespaces.ts";

export const API_ACCESS: readonly Access[] = [
  ...APPS_SERVICE_ACCESS,
  ...DEPLOYMENTS_ACCESS,
  ...ENV_ACCESS,
  ...SHARES_ACCESS,
  ...SHARE_KEY_ACCESS,
  ...DOMAINS_ACCESS,
  ...GOVERNANCE_APPS_ACCESS,
  ...POD_METRICS_ACCESS,
  ...NAMESPACE_ENSURER_ACCESS,
  ...TOKEN_REVIEWER_ACCESS,
];
