// The namespace's pull credential for the platform registry (docs/images.md "Pull credentials"):
// one Secret berth-registry-pull (kubernetes.io/dockerconfigjson) per workspace namespace, derived
// from the platform key (kube/registry-credentials.ts), owned by nothing, and named in the
// imagePullSecrets of every pod the operator starts there (kit/pod.ts Placement). The registry's
// token service grants it that namespace's images and the platform's, never another namespace's.
import { MANAGED_BY, convergeChild, withHash } from "./apply.ts";
import type { KubeObject } from "../../kube/objects.ts";
import type { ReadYourWritesCache } from "../../kube/read-your-writes.ts";
import { REGISTRY_PULL_SECRET, pullDockerConfig, readRegistryKey } from "../../kube/registry-credentials.ts";
import type { OperatorConfig } from "../config.ts";

export { REGISTRY_PULL_SECRET };

/** The pull credentials' configuration: the registry (host[:port]) and the platform key. */
export interface RegistryPullSettings {
  registry: string;
  key: Buffer;
}

/** The settings of the configuration (the key read once, at start); undefined without a key. */
export function registryPullSettings(
  cfg: Pick<OperatorConfig, "BERTH_REGISTRY_AUTH_KEY_FILE" | "BERTH_BUILD_REGISTRY">,
): RegistryPullSettings | undefined {
  if (!cfg.BERTH_REGISTRY_AUTH_KEY_FILE || !cfg.BERTH_BUILD_REGISTRY) return undefined;
  return { registry: cfg.BERTH_BUILD_REGISTRY, key: readRegistryKey(cfg.BERTH_REGISTRY_AUTH_KEY_FILE) };
}

/** The label that tells the operator's pull Secrets (with MANAGED_BY). */
export const REGISTRY_PULL_LABEL = { "app.kubernetes.io/component": "registry-pull" } as const;

/** The namespace's pull Secret. Pure. */
export function registryPullSecret(namespace: string, s: RegistryPullSettings): KubeObject {
  return withHash({
    apiVersion: "v1",
    kind: "Secret",
    metadata: {
      name: REGISTRY_PULL_SECRET,
      namespace,
      labels: { ...MANAGED_BY, ...REGISTRY_PULL_LABEL },
      annotations: {
        "berth.dev/purpose": `The namespace's credential for pulling from ${s.registry}: it is granted this namespace's images and the platform's, written by Berth's operator (docs/images.md "Pull credentials").`,
      },
    },
    type: "kubernetes.io/dockerconfigjson",
    data: { ".dockerconfigjson": Buffer.from(pullDockerConfig(s.key, s.registry, namespace)).toString("base64") },
  } as KubeObject);
}

/** Whether a Secret is the operator's pull Secret. */
export const isRegistryPullSecret = (o: KubeObject): boolean =>
  Object.entries({ ...MANAGED_BY, ...REGISTRY_PULL_LABEL }).every(([k, v]) => o.metadata.labels?.[k] === v);

/**
 * Writes the namespace's pull Secret unless the cache holds it as it should be (a Secret of Berth's
 * Secrets informer, label-selected). Returns why it cannot be (a Secret of that name Berth did not
 * write), or undefined. The Secret's data is never logged.
 */
export async function ensureRegistryPull(
  cache: ReadYourWritesCache,
  namespace: string,
  s: RegistryPullSettings,
): Promise<string | undefined> {
  const converged = await convergeChild(
    cache,
    registryPullSecret(namespace, s),
    cache.get("Secret", namespace, REGISTRY_PULL_SECRET),
    isRegistryPullSecret,
  );
  if ("foreign" in converged)
    return `The namespace holds a Secret ${REGISTRY_PULL_SECRET} that Berth did not write, where its pods' credential for the registry goes: the platform's operator must remove or rename it`;
  return undefined;
}
