// The operator, in-process, as the chart runs it: under the chart's operator ServiceAccount
// (helpers/identities.ts), never the admin kubeconfig, so a call its RBAC does not allow fails.
// With builds configured on a cluster whose buildkitd asks for a client certificate (hack's,
// BERTH_BUILDKIT_TLS_DIR from `hack/cluster env`), it runs as the chart runs it with
// builder.tls.enabled: the Secret berth-buildkit-client in the release namespace (written here,
// with the admin kubeconfig, as the chart or the platform team would), and BERTH_BUILDKIT_TLS.
// Its grants of workspace namespaces (Berth's Secrets) hold in the namespace it watches through the
// RoleBinding berth-operator the API makes in each workspace namespace, made here (with the admin
// kubeconfig) where the API did not make the namespace. An operator of hack's registry gets the key of
// its pull credentials (registryAuthEnv).
import { pino, type Logger } from "pino";
import { buildkitClientSecret, readBuildkitClient } from "../../hack/lib/buildkit-tls.ts";
import { KubeClient } from "../../kube/client.ts";
import { loadOperatorConfig } from "../../operator/config.ts";
import { startOperator, type RunningOperator } from "../../operator/main.ts";
import { bindOperatorWorkspaceRole, identity, RELEASE_NAMESPACE } from "./identities.ts";
import { kube } from "./kube.ts";

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

/**
 * The configuration of mutual TLS to buildkitd for an operator with builds (`env` sets
 * BERTH_BUILDKIT_HOST) on a cluster whose buildkitd asks for a client certificate: hack's client
 * certificate applied as the Secret berth-buildkit-client of the release namespace, and the
 * variables that make the operator copy it to its build Jobs. Nothing when either is missing, or
 * when `env` says itself (BERTH_BUILDKIT_TLS).
 */
export async function buildkitTlsEnv(env: Record<string, string> = {}): Promise<Record<string, string>> {
  const dir = process.env.BERTH_BUILDKIT_TLS_DIR;
  if (!dir || !env.BERTH_BUILDKIT_HOST || env.BERTH_BUILDKIT_TLS !== undefined) return {};
  await new KubeClient(kube().kc).apply(buildkitClientSecret(RELEASE_NAMESPACE, readBuildkitClient(dir)), "test");
  return { BERTH_BUILDKIT_TLS: "true", BERTH_NAMESPACE: RELEASE_NAMESPACE };
}

/**
 * The pull credentials of hack's registry (docs/images.md "Pull credentials") for an operator whose
 * `env` names that registry (BERTH_BUILD_REGISTRY): the key of `hack/cluster env`, as the chart's
 * registryAuth gives it (a key `env` sets itself wins: it is spread after). Nothing when either is missing.
 */
export function registryAuthEnv(env: Record<string, string> = {}): Record<string, string> {
  const file = process.env.BERTH_REGISTRY_AUTH_KEY_FILE;
  return file && env.BERTH_BUILD_REGISTRY && env.BERTH_BUILD_REGISTRY === process.env.BERTH_REGISTRY
    ? { BERTH_REGISTRY_AUTH_KEY_FILE: file }
    : {};
}

export async function startTestOperator(opts: TestOperatorOptions): Promise<RunningOperator> {
  const id = await identity("operator");
  await bindOperatorWorkspaceRole(opts.namespace);
  const tls = await buildkitTlsEnv(opts.env);
  return startOperator(
    loadOperatorConfig({
      KUBECONFIG: id.kubeconfig,
      BERTH_OPERATOR_TOKEN_FILE: id.tokenFile,
      BERTH_WATCH_NAMESPACE: opts.namespace,
      BERTH_LEADER_ELECTION: "false",
      BERTH_OPERATOR_HEALTH_PORT: "0",
      ...(opts.apiUrl ? { BERTH_OPERATOR_API_URL: opts.apiUrl } : {}),
      ...tls,
      ...registryAuthEnv(opts.env),
      ...opts.env,
    }),
    opts.logger ?? pino({ level: "silent" }),
  );
}
