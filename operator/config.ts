// The operator's configuration, parsed once with zod. Nothing else in operator/ reads process.env.
import { hostname } from "node:os";
import { z } from "zod";
import { ReservedSlugsVariable } from "../crds/app.ts";

const bool = z.enum(["true", "false", "1", "0"]).transform((v) => v === "true" || v === "1");

/** A JSON value in an environment variable, checked with `schema`. */
const json = <T extends z.ZodType>(schema: T) =>
  z
    .string()
    .transform((v, ctx) => {
      try {
        return JSON.parse(v) as unknown;
      } catch {
        ctx.addIssue({ code: "custom", message: "must be JSON" });
        return z.NEVER;
      }
    })
    .pipe(schema);

const LABEL_KEY = /^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*\/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$/;
const Toleration = z
  .object({
    key: z.string().regex(LABEL_KEY).optional(),
    operator: z.enum(["Exists", "Equal"]).optional(),
    value: z.string().max(63).optional(),
    effect: z.enum(["NoSchedule", "PreferNoSchedule", "NoExecute"]).optional(),
    tolerationSeconds: z.int().min(0).optional(),
  })
  .strict();

export const OperatorConfigSchema = z.object({
  KUBECONFIG: z.string().optional().describe("Path to a kubeconfig; in-cluster config when unset"),
  KUBERNETES_SERVICE_HOST: z.string().optional().describe("Set by the kubelet: the API server's address for the in-cluster config"),
  KUBERNETES_SERVICE_PORT: z.string().optional().describe("Set by the kubelet: the API server's port for the in-cluster config"),
  BERTH_BASE_DOMAIN: z.string().default("apps.berth.local"),
  BERTH_RESERVED_SLUGS: ReservedSlugsVariable,
  BERTH_PLATFORM_HOSTS: z
    .string()
    .optional()
    .transform((v) =>
      (v ?? "")
        .split(",")
        .map((s) => s.trim().toLowerCase())
        .filter(Boolean),
    )
    .pipe(z.array(z.string().regex(/^[a-z0-9.-]+$/, "must be host names")).max(16))
    .describe(
      "Comma-separated hosts of the platform itself (the API's public host): no App is routed at them; BERTH_INGRESS_HOST is one too",
    ),
  BERTH_WATCH_NAMESPACE: z.string().optional().describe("Reconcile Apps of this namespace only; all namespaces when unset"),
  BERTH_INGRESS_CLASS: z.string().optional(),
  BERTH_DEFAULT_TLS_SECRET: z.string().optional(),
  BERTH_FORWARD_AUTH_URL: z
    .url()
    .optional()
    .describe(
      "The API's forward-auth endpoint as the ingress controller reaches it (<API>/api/v1/forward-auth); private Apps are guarded by it. Default: BERTH_OPERATOR_API_URL's (required when BERTH_OPERATOR_API_CA_FILE is set), else http://berth-api.berth-system.svc.cluster.local/api/v1/forward-auth",
    ),
  BERTH_SIGN_IN_URL: z
    .url()
    .optional()
    .describe("ingress-nginx only: the viewers' sign-in (<API public URL>/api/v1/auth/oidc/login), its auth-signin annotation"),
  BERTH_WORKLOAD_NODE_SELECTOR: json(z.record(z.string().regex(LABEL_KEY), z.string().max(63)))
    .optional()
    .describe("JSON object: the nodeSelector of every App's pods (e.g. the nodes set aside for workloads)"),
  BERTH_WORKLOAD_TOLERATIONS: json(z.array(Toleration).max(32))
    .optional()
    .describe("JSON array: tolerations of every App's pods (e.g. of the taint on those nodes)"),
  // Builds from Git (docs/builds.md): off unless a builder image is configured.
  BERTH_BUILDER_IMAGE: z
    .string()
    .min(1)
    .optional()
    .describe("The builder image (berth-builder) that build Jobs run; builds are off when unset"),
  BERTH_BUILDKIT_HOST: z
    .string()
    .regex(/^(tcp|unix|tcp\+tls):\/\//, "must be a BuildKit address: tcp://host:port")
    .optional()
    .describe("BuildKit's address as build Jobs reach it"),
  BERTH_BUILDKIT_TLS: bool
    .default(false)
    .describe(
      "Mutual TLS to buildkitd: build Jobs present the client certificate of the Secret berth-buildkit-client in BERTH_NAMESPACE (keys ca.crt, tls.crt, tls.key), which the operator copies into each namespace it builds in",
    ),
  BERTH_BUILDKIT_TLS_SERVER_NAME: z
    .string()
    .regex(/^[A-Za-z0-9.:-]{1,253}$/, "must be a host name or an IP address")
    .optional()
    .describe("With BERTH_BUILDKIT_TLS: the name buildkitd's certificate is checked against; the host of BERTH_BUILDKIT_HOST when unset"),
  BERTH_NAMESPACE: z
    .string()
    .regex(/^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/, "must be a namespace name")
    .default("berth-system")
    .describe("Berth's own namespace (the release namespace): where the Secret berth-buildkit-client is read (BERTH_BUILDKIT_TLS)"),
  BERTH_BUILD_REGISTRY: z
    .string()
    .regex(/^[a-z0-9.-]+(:\d+)?$/, "must be host[:port]")
    .optional()
    .describe("The registry built images are pushed to (and the nodes pull from)"),
  BERTH_BUILD_REPOSITORY_PREFIX: z
    .string()
    .regex(/^[a-z0-9._/-]*$/)
    .default("apps")
    .describe("Built images are <registry>/<prefix>/<namespace>/<app>:<commit>"),
  BERTH_REGISTRY_AUTH_KEY_FILE: z
    .string()
    .min(1)
    .optional()
    .describe(
      "The key of the registry's per-namespace pull credentials (hex, at least 32 bytes; the token service's file of the same name): with it, each workspace namespace gets the Secret berth-registry-pull for BERTH_BUILD_REGISTRY, named in the imagePullSecrets of its pods",
    ),
  BERTH_BUILD_REGISTRY_INSECURE: bool.default(false).describe("Push over plain HTTP (a registry on loopback or inside the cluster)"),
  BERTH_BUILD_BASE_IMAGES: json(z.partialRecord(z.enum(["node", "python", "go", "static"]), z.string().min(1)))
    .optional()
    .describe("JSON object: the base image of each detected stack (node, python, go, static)"),
  BERTH_BUILD_CPU_MILLICORES: z.coerce.number().int().min(100).max(32000).default(1000),
  BERTH_BUILD_MEMORY_MI: z.coerce.number().int().min(128).max(131072).default(2048),
  BERTH_BUILD_STORAGE_MI: z.coerce.number().int().min(512).max(1048576).default(5120),
  BERTH_BUILD_CACHE: z
    .enum(["local", "registry"])
    .default("local")
    .describe(
      "local: buildkitd's own cache; registry: also each App's cache in the build registry (<image>:buildcache), for a buildkitd without a persistent disk",
    ),
  BERTH_BUILD_NETWORK: z
    .enum(["proxy", "daemon"])
    .default("proxy")
    .describe(
      "How builds' RUN steps reach the network. proxy: only through BuildKit's own HTTP(S) proxy, never to loopback or private addresses, and no raw connections (HTTPS through BuildKit's CA, added to the image's system trust bundle during the step); daemon: on buildkitd's own network as it is configured",
    ),
  BERTH_BUILD_MAX_PER_WORKSPACE: z.coerce
    .number()
    .int()
    .min(1)
    .max(100)
    .default(4)
    .describe("Builds one workspace may run at once; the others wait, queued, and start oldest first"),
  BERTH_BUILD_TIMEOUT_SECONDS: z.coerce.number().int().min(60).max(86400).default(1800),
  // Custom domains (docs/domains.md).
  BERTH_INGRESS_HOST: z
    .string()
    .regex(/^[a-z0-9.-]+$/, "must be a host name")
    .default("ingress.berth.local")
    .describe("The host custom domains must point at (their CNAME target; an apex's A/AAAA records must equal its addresses)"),
  BERTH_DNS_RESOLVER: z
    .string()
    .optional()
    .transform((v) =>
      (v ?? "")
        .split(",")
        .map((s) => s.trim())
        .filter(Boolean),
    )
    .pipe(z.array(z.string().regex(/^(\[[0-9a-fA-F:.]+\]|[0-9a-fA-F:.]+)(:\d{1,5})?$/, "must be ip or ip:port ([ipv6]:port)")).max(8))
    .describe("Comma-separated DNS servers that verify custom domains (ip or ip:port); the system's resolvers when unset"),
  BERTH_DOMAIN_ISSUER: z
    .string()
    .regex(/^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$/)
    .optional()
    .describe("The cert-manager ClusterIssuer that issues custom domains' certificates; no certificates (HTTP only) when unset"),
  BERTH_OPERATOR_CONCURRENCY: z.coerce.number().int().min(1).max(64).default(8),
  BERTH_OPERATOR_RESYNC_SECONDS: z.coerce.number().int().min(10).default(600),
  BERTH_OPERATOR_HEALTH_HOST: z.string().default("127.0.0.1"),
  BERTH_OPERATOR_HEALTH_PORT: z.coerce.number().int().min(0).max(65535).default(8081),
  BERTH_LEADER_ELECTION: bool.default(true),
  BERTH_LEADER_ELECTION_NAMESPACE: z.string().default("berth-system"),
  BERTH_OPERATOR_IDENTITY: z.string().optional().describe("Leader-election identity; POD_NAME or the hostname when unset"),
  POD_NAME: z.string().optional(),
  BERTH_OPERATOR_API_URL: z
    .url({ protocol: /^https?$/ })
    .optional()
    .describe(
      "The Berth API (governance provisioning): http(s)://host[:port]; the chart's https://<api>.<namespace>.svc:<port> is the API's internal TLS listener with api.internalTls. Apps run without governance when unset",
    ),
  BERTH_OPERATOR_API_CA_FILE: z
    .string()
    .min(1)
    .optional()
    .describe(
      "PEM CA certificate(s) the operator trusts for BERTH_OPERATOR_API_URL, instead of the system's (the chart mounts the ca.crt of the API's internal certificate); read again on every call. With it the URL must be https://, and BERTH_FORWARD_AUTH_URL must be set (the ingress controller does not trust this CA)",
    ),
  BERTH_OPERATOR_TOKEN_FILE: z
    .string()
    .default("/var/run/secrets/kubernetes.io/serviceaccount/token")
    .describe("ServiceAccount token the operator presents to the API"),
  BERTH_LOG_LEVEL: z.enum(["fatal", "error", "warn", "info", "debug", "trace", "silent"]).default("info"),
});
export type OperatorConfig = z.output<typeof OperatorConfigSchema> & { identity: string };

export function loadOperatorConfig(env: NodeJS.ProcessEnv = process.env): OperatorConfig {
  const parsed = OperatorConfigSchema.safeParse(env);
  if (!parsed.success) {
    throw new Error(`invalid configuration:\n${parsed.error.issues.map((i) => `  ${i.path.join(".")}: ${i.message}`).join("\n")}`);
  }
  const c = parsed.data;
  if (c.BERTH_REGISTRY_AUTH_KEY_FILE && !c.BERTH_BUILD_REGISTRY)
    throw new Error(
      "invalid configuration:\n  BERTH_REGISTRY_AUTH_KEY_FILE is set: BERTH_BUILD_REGISTRY must name the registry its credentials are for",
    );
  if (c.BERTH_OPERATOR_API_CA_FILE) {
    // The CA is there to keep the operator's token off the network in the clear: never send it over plain HTTP.
    if (!c.BERTH_OPERATOR_API_URL?.startsWith("https://"))
      throw new Error("invalid configuration:\n  BERTH_OPERATOR_API_CA_FILE is set: BERTH_OPERATOR_API_URL must be an https:// URL");
    // The forward-auth address would otherwise be derived from the TLS URL, whose CA the ingress controller does not trust.
    if (!c.BERTH_FORWARD_AUTH_URL)
      throw new Error(
        "invalid configuration:\n  BERTH_OPERATOR_API_CA_FILE is set: BERTH_FORWARD_AUTH_URL must be set too (the ingress controller calls it, and does not trust that CA)",
      );
  }
  return { ...c, identity: c.BERTH_OPERATOR_IDENTITY ?? c.POD_NAME ?? `${hostname()}-${process.pid}` };
}
