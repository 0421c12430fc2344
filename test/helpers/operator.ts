// The operator, in-process, as the chart runs it: under the chart's operator ServiceAccount
// (helpers/identities.ts), never the admin kubeconfig, so a call its RBAC does not allow fails.
import { pino, type Logger } from "pino";
import { loadOperatorConfig } from "../../operator/config.ts";
import { startOperator, type RunningOperator } from "../../operator/main.ts";
import { identity } from "./identities.ts";

export interface TestOperatorOptions {
  /** Reconcile Apps of this namespace only (BERTH_WATCH_NAMESPACE). */
  namespace: string;
  /** The API for governance provisioning (BERTH_OPERATOR_API_URL); Apps run without governance when unset. */
  apiUrl?: string;
  /** More configuration variables. */
  env?: Record<string, string>;
  /** Where its logs go (default: silent). */
  logger?: Logger;
}

export async function startTestOperator(opts: TestOperatorOptions): Promise<RunningOperator> {
  const id = await identity("operator");
  return startOperator(
    loadOperatorConfig({
      KUBECONFIG: id.kubeconfig,
      BERTH_OPERATOR_TOKEN_FILE: id.tokenFile,
      BERTH_WATCH_NAMESPACE: opts.namespace,
      BERTH_LEADER_ELECTION: "false",
      BERTH_OPERATOR_HEALTH_PORT: "0",
      ...(opts.apiUrl ? { BERTH_OPERATOR_API_URL: opts.apiUrl } : {}),
      ...opts.env,
    }),
    opts.logger ?? pino({ level: "silent" }),
  );
}
