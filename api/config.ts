// The API's configuration, parsed once with zod. Nothing else in api/ reads process.env.
import { availableParallelism } from "node:os";
import { z } from "zod";
import { ModelPricesConfig } from "./governance/ingest/pricing.ts";
import { parseCidrList } from "../kube/addresses.ts";
import { ReservedSlugsVariable } from "../crds/app.ts";
import { WorkspaceNetworkSchema } from "./workspaces/network.ts";

export const DEFAULT_HEADERS_TIMEOUT_MS = 10_000;
export const DEFAULT_REQUEST_TIMEOUT_MS = 60_000;

const cidrList = z
  .string()
  .default("")
  .transform((raw, ctx) => {
    try {
      return parseCidrList(raw);
    } catch (err) {
      ctx.addIssue({ code: "custom", message: (err as Error).message });
      return z.NEVER;
    }
  });

/** A JSON value of an environment variable, parsed with `schema`; `fallback` when unset or empty. */
function jsonVariable<T extends z.ZodType, F extends z.output<T> | undefined>(schema: T, fallback: F) {
  return z
    .string()
    .optional()
    .transform((raw, ctx): z.output<T> | F => {
      if (raw === undefined || raw.trim() === "") return fallback;
      let json: unknown;
      try {
        json = JSON.parse(raw);
      } catch {
        ctx.addIssue({ code: "custom", message: "must be JSON" });
        return z.NEVER;
      }
      const parsed = schema.safeParse(json);
      if (!parsed.success) {
        for (const i of parsed.error.issues) ctx.addIssue({ code: "custom", message: `${i.path.join(".") || "(root)"}: ${i.message}` });
        return z.NEVER;
      }
      return parsed.data;
    });
}

const Quantities = z.record(
  z.string().regex(/^[a-z0-9./-]+$/i, "must be a resource name"),
  z.string().regex(/^[0-9]+(\.[0-9]+)?([mkMGTPE]i?|[KMGTPE]i)?$/, "must be a quantity"),
);

/** Each workspace's capacity by default (docs/security.md "Capacity"). */
export const DEFAULT_WORKSPACE_QUOTA: Record<string, string> = {
  "count/apps.berth.dev": "100",
  "count/shares.berth.dev": "1000",
  "count/domains.berth.dev": "100",
  pods: "200",
  "requests.cpu": "20",
  "requests.memory": "40Gi",
  "limits.cpu": "40",
  "limits.memory": "80Gi",
};
export const DEFAULT_WORKSPACE_LIMITS = { default: { cpu: "500m", memory: "512Mi" }, defaultRequest: { cpu: "50m", memory: "64Mi" } };

const bool = z.enum(["true", "false", "1", "0"]).transform((v) => v === "true" || v === "1");

export const ConfigSchema = z.object({
  DATABASE_URL: z.url({ protocol: /^postgres(ql)?$/ }).describe("PostgreSQL connection URL"),
  KUBECONFIG: z.string().optional().describe("Path to a kubeconfig; in-cluster config when unset"),
  BERTH_API_HOST: z.string().default("127.0.0.1"),
  BERTH_API_PORT: z.coerce.number().int().min(0).max(65535).default(8080),
  // The internal TLS listener (docs/security.md "The operator's calls"): the operator's bearer token never crosses the network in the clear.
  BERTH_INTERNAL_TLS_PORT: z.coerce
    .number()
    .int()
    .min(0)
    .max(65535)
    .optional()
    .describe(
      "Port of a second listener on BERTH_API_HOST that serves the same API over HTTPS with BERTH_INTERNAL_TLS_CERT_FILE and BERTH_INTERNAL_TLS_KEY_FILE, for callers inside the cluster that send credentials (the operator: the chart's api.internalTls). Unset: plain HTTP on BERTH_API_PORT only",
    ),
  BERTH_INTERNAL_TLS_CERT_FILE: z
    .string()
    .min(1)
    .optional()
    .describe(
      "PEM certificate chain of the internal listener, the leaf first (a cert-manager Secret's tls.crt); read again every 10 s and served to new connections once it changed",
    ),
  BERTH_INTERNAL_TLS_KEY_FILE: z
    .string()
    .min(1)
    .optional()
    .describe("PEM private key of BERTH_INTERNAL_TLS_CERT_FILE's certificate (tls.key); read again with it"),
  BERTH_BASE_DOMAIN: z.string().default("apps.berth.local").describe("Apps are served at <slug>.<baseDomain>"),
  BERTH_RESERVED_SLUGS: ReservedSlugsVariable,
  BERTH_BUILD_REGISTRY: z
    .string()
    .regex(/^[a-z0-9.-]+(:\d+)?$/, "must be host[:port]")
    .optional()
    .describe(
      "The registry builds push to (the operator's BERTH_BUILD_REGISTRY): a service's image under <registry>/<BERTH_BUILD_REPOSITORY_PREFIX>/ must be its own workspace's build",
    ),
  BERTH_BUILD_REPOSITORY_PREFIX: z
    .string()
    .regex(/^[a-z0-9._/-]*$/)
    .default("apps")
    .describe("Built images are <registry>/<prefix>/<namespace>/<app>:<commit>"),
  BERTH_INGRESS_HOST: z
    .string()
    .regex(/^[a-z0-9.-]+$/, "must be a host name")
    .default("ingress.berth.local")
    .describe("Where customers point their CNAME records"),
  BERTH_PUBLIC_URL: z
    .url({ protocol: /^https?$/ })
    .refine((v) => {
      const u = URL.parse(v);
      return !!u && !u.search && !u.hash && !u.username && !u.password;
    }, "must be http(s)://host[:port][/path], without a query, fragment or credentials")
    .optional()
    .transform((v) => v?.replace(/\/+$/, ""))
    .describe(
      "The API's public URL as users and Git hosts reach it, without /api/v1 (https://api.example.com, or with the path its Ingress serves it under): webhook payload URLs are given under it. Unset: they are paths on the API's host",
    ),
  // Requests to user-chosen URLs (api/http/outbound.ts, docs/security.md)
  BERTH_OUTBOUND_ALLOW: cidrList.describe(
    "Comma-separated CIDRs that user-chosen URLs (a service's gitRepoUrl, read for its branch head) may reach although they are loopback, link-local, private or otherwise refused: a Git server on the cluster's own network. Empty: only public addresses",
  ),
  BERTH_OUTBOUND_DENY: cidrList.describe(
    "Comma-separated CIDRs refused to user-chosen URLs on top of the built-in private and special ranges: the cluster's pod and Service ranges where they are public addresses",
  ),
  BERTH_DOMAIN_VERIFY_WAIT_MS: z.coerce
    .number()
    .int()
    .min(0)
    .max(60_000)
    .default(0)
    .describe(
      "How long POST .../domains/{id}/verify waits for the operator's DNS check before answering 202 with the current state and Retry-After. 0 (the default): at once, so that no request is held while DNS is asked",
    ),
  BERTH_BODY_LIMIT_BYTES: z.coerce
    .number()
    .int()
    .min(1024)
    .max(64 * 1024 * 1024)
    .default(1024 * 1024),
  // Rate limits and slow clients (docs/api.md "Limits"). Counted by each API replica on its own.
  BERTH_RATE_LIMIT_API_PER_SECOND: z.coerce
    .number()
    .min(0)
    .max(100_000)
    .default(50)
    .describe(
      "Requests per second each workspace (all its keys together), platform admin key and app key may make to the API (every route but trace ingestion and guard checks), refilled continuously; requests without a valid key count per client address (BERTH_TRUSTED_PROXIES). 0 turns the limit off",
    ),
  BERTH_RATE_LIMIT_API_BURST: z.coerce
    .number()
    .int()
    .min(1)
    .max(1_000_000)
    .default(500)
    .describe("Requests a key (or address) may make at once before BERTH_RATE_LIMIT_API_PER_SECOND applies"),
  BERTH_RATE_LIMIT_INGEST_PER_SECOND: z.coerce
    .number()
    .min(0)
    .max(100_000)
    .default(100)
    .describe(
      "Requests per second each app key may make to POST /governance/traces and GET /governance/config (a request is one trace or a batch). 0 turns the limit off",
    ),
  BERTH_RATE_LIMIT_INGEST_BURST: z.coerce
    .number()
    .int()
    .min(1)
    .max(1_000_000)
    .default(1000)
    .describe("Ingestion requests an app key may make at once before BERTH_RATE_LIMIT_INGEST_PER_SECOND applies"),
  BERTH_RATE_LIMIT_GUARD_PER_SECOND: z.coerce
    .number()
    .min(0)
    .max(100_000)
    .default(200)
    .describe(
      "Requests per second each app key may make to POST /governance/guard-check (a toolkit without the guard engine asks it twice per LLM call: the prompt, then the response), a budget apart from ingestion's. 0 turns the limit off",
    ),
  BERTH_RATE_LIMIT_GUARD_BURST: z.coerce
    .number()
    .int()
    .min(1)
    .max(1_000_000)
    .default(1000)
    .describe("Guard checks an app key may make at once before BERTH_RATE_LIMIT_GUARD_PER_SECOND applies"),
  BERTH_RATE_LIMIT_MODEL_PER_SECOND: z.coerce
    .number()
    .min(0)
    .max(100_000)
    .default(100)
    .describe(
      "Prompt-injection classifier runs per second each app may cause in the API (1-7 ms of CPU each): a guard check of a prompt, and each trace without a score that classifier_on_ingestion has scored on ingestion. Past it: 429 rate_limited with policy model (docs/guards.md). 0 turns the limit off",
    ),
  BERTH_RATE_LIMIT_MODEL_BURST: z.coerce
    .number()
    .int()
    .min(1)
    .max(1_000_000)
    .default(1000)
    .describe("Classifier runs an app may cause at once before BERTH_RATE_LIMIT_MODEL_PER_SECOND applies"),
  BERTH_WORKSPACE_QUOTA: jsonVariable(Quantities, DEFAULT_WORKSPACE_QUOTA).describe(
    'JSON object: the hard limits of the ResourceQuota "berth-workspace" in every workspace namespace (services, shares and domains counted as count/apps.berth.dev and so on; pods; requests and limits of CPU and memory). Default: 100 services, 1000 shares, 100 domains, 200 pods, 20 CPUs and 40Gi requested, 40 CPUs and 80Gi limits',
  ),
  BERTH_WORKSPACE_LIMITS: jsonVariable(
    z.object({ default: Quantities.optional(), defaultRequest: Quantities.optional() }).strict(),
    DEFAULT_WORKSPACE_LIMITS,
  ).describe(
    'JSON object {"default", "defaultRequest"}: the container defaults of the LimitRange "berth-workspace" (what a pod a workspace creates without resources gets, so that the quota can count it). Default: limits 500m and 512Mi, requests 50m and 64Mi',
  ),
  BERTH_WORKSPACE_NETWORK: jsonVariable(WorkspaceNetworkSchema, WorkspaceNetworkSchema.parse({})).describe(
    'JSON object {"enabled", "ingressFrom", "egressTo", "buildEgressTo", "outside"}: the NetworkPolicies "berth-workspace" (every pod: ingress from its own namespace and ingressFrom; egress to its own namespace, egressTo and the outside) and "berth-workspace-builds" (build pods: also buildEgressTo) in every workspace namespace; peers and ports as in a NetworkPolicy (docs/security.md "Network"). Default: no ingress from outside the namespace, egress to kube-system\'s kube-dns and to public addresses only',
  ),
  BERTH_WORKSPACE_ROLE: z
    .string()
    .regex(/^[a-z0-9]([-a-z0-9.:]{0,251}[a-z0-9])?$/, "must be a ClusterRole name")
    .default("berth-api-workspace")
    .describe(
      "The ClusterRole of what the API does only in workspace namespaces (Secrets, Job pods and their logs, pod metrics, quota, limits, NetworkPolicies; the chart renders it unbound): the API binds it to itself in each workspace namespace (RoleBinding berth-api) as it ensures the namespace",
    ),
  BERTH_TRUSTED_PROXIES: cidrList.describe(
    "Comma-separated CIDRs of the proxies in front of the API (the ingress controller): from a peer in them, the client's address is read from X-Forwarded-For (the rightmost hop that is not a trusted proxy), so that callers without a key get a budget each rather than one for everybody behind the proxy. Empty: the socket's peer",
  ),
  BERTH_MAX_KEYS_PER_WORKSPACE: z.coerce
    .number()
    .int()
    .min(1)
    .max(10_000)
    .default(50)
    .describe(
      "Workspace API keys a workspace may hold at once (revoked ones do not count): all of them share the workspace's rate-limit budget",
    ),
  BERTH_RATE_LIMIT_EDGE_PER_SECOND: z.coerce
    .number()
    .min(0)
    .max(100_000)
    .default(100)
    .describe(
      "Forward-auth checks per second each viewer (the client address the ingress names in X-Forwarded-For) may cause; past it that viewer gets 429 through the ingress and every other viewer is still served. 0 turns the limit off",
    ),
  BERTH_RATE_LIMIT_EDGE_BURST: z.coerce
    .number()
    .int()
    .min(1)
    .max(1_000_000)
    .default(1000)
    .describe("Forward-auth checks a viewer may cause at once before BERTH_RATE_LIMIT_EDGE_PER_SECOND applies"),
  BERTH_HEADERS_TIMEOUT_MS: z.coerce
    .number()
    .int()
    .min(100)
    .max(10 * 60_000)
    .default(DEFAULT_HEADERS_TIMEOUT_MS)
    .describe("A client that has not sent its request's headers this long after it started is cut off (408)"),
  BERTH_REQUEST_TIMEOUT_MS: z.coerce
    .number()
    .int()
    .min(100)
    .max(60 * 60_000)
    .default(DEFAULT_REQUEST_TIMEOUT_MS)
    .describe(
      "A client that has not sent its whole request (headers and body) this long after it started is cut off (408); at least BERTH_HEADERS_TIMEOUT_MS",
    ),
  BERTH_LOG_LEVEL: z.enum(["fatal", "error", "warn", "info", "debug", "trace", "silent"]).default("info"),
  BERTH_DB_DEBUG: bool.default(false),
  BERTH_VALIDATE_RESPONSES: bool
    .default(false)
    .describe("Check every response body against the route's documented schema; a mismatch is a 500 (tests turn it on)"),
  BERTH_SHUTDOWN_TIMEOUT_MS: z.coerce
    .number()
    .int()
    .min(0)
    .max(10 * 60_000)
    .default(10_000)
    .describe("On SIGTERM/SIGINT, how long in-flight requests may take to finish before connections are cut"),
  BERTH_GOVERNANCE_HOST: z
    .string()
    .regex(/^[A-Za-z0-9.-]+(:\d{1,5})?$|^\[[0-9A-Fa-f:.]+\](:\d{1,5})?$/, "must be host or host:port")
    .default("127.0.0.1:8080")
    .describe(
      "Host (and port) of this API as services reach it: the host part of GOVDB_CONNECTION. The toolkit speaks HTTP to a loopback host, HTTPS otherwise",
    ),
  BERTH_OPERATOR_WORKSPACE_ROLE: z
    .string()
    .regex(/^[a-z0-9]([-a-z0-9.:]{0,251}[a-z0-9])?$/, "must be a ClusterRole name")
    .default("berth-operator-workspace")
    .describe(
      "The ClusterRole of what the operator does only in workspace namespaces (Berth's Secrets, writes of its workloads, routes and certificates, build logs; the chart renders it unbound): the API binds it to BERTH_OPERATOR_USERNAME in each workspace namespace (RoleBinding berth-operator) as it ensures the namespace",
    ),
  BERTH_OPERATOR_USERNAME: z
    .string()
    .min(1)
    .default("system:serviceaccount:berth-system:berth-operator")
    .describe("The Kubernetes user (from a TokenReview) allowed to call /internal/governance/*: the operator's ServiceAccount"),
  BERTH_OPERATOR_TOKEN_AUDIENCE: z
    .string()
    .regex(/^[A-Za-z0-9._:/-]{1,253}$/, "must be an audience name")
    .optional()
    .describe(
      "The audience the operator's token must be issued for (the chart gives the operator a projected token for berth-api); the TokenReview names it. Unset: the ServiceAccount's default token, of the cluster's audience",
    ),
  BERTH_INGEST_BODY_LIMIT_BYTES: z.coerce
    .number()
    .int()
    .min(1024)
    .max(64 * 1024 * 1024)
    .default(1024 * 1024)
    .describe("Body size limit of POST /governance/traces"),
  BERTH_INGEST_WORKERS: z.coerce
    .number()
    .int()
    .min(0)
    .max(64)
    .default(Math.min(4, Math.max(1, availableParallelism() - 1)))
    .describe("Worker threads that run guards and evals on trace ingestion (0: on the main thread); default one per core but one, 1-4"),
  BERTH_SCORING_TASK_TIMEOUT_MS: z.coerce
    .number()
    .int()
    .min(100)
    .max(600_000)
    .default(5000)
    .describe(
      "Deadline of one scoring task in a worker thread (a chunk of an ingested batch, or one guard check), 100-600000 ms: past it the worker is terminated and replaced, the chunk's traces are stored with the guards' error and a guard check answers 503 guard_timeout. Keep it several times the longest legitimate scoring of a full body (about 1.6 s per MiB on a loaded core; raise it with BERTH_INGEST_BODY_LIMIT_BYTES). Needs BERTH_INGEST_WORKERS > 0: on the main thread nothing can be cut",
    ),
  // Share links and private services (docs/shares.md).
  BERTH_SHARE_COOKIE_KEY: z
    .string()
    .min(32, "must be at least 32 characters (e.g. openssl rand -base64 32)")
    .optional()
    .describe(
      "The key that signs share cookies, sign-in tickets and sign-in state (HMAC-SHA256); every API replica needs the same one. Unset: the Secret berth-share-cookie-key in BERTH_NAMESPACE (created with a random key when missing), else a random key per process (cookies then die with the process)",
    ),
  BERTH_NAMESPACE: z
    .string()
    .regex(/^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/, "must be a namespace name")
    .optional()
    .describe("The namespace the API runs in (the chart sets it): the share cookie key's Secret lives there"),
  BERTH_SHARE_SESSION_SECONDS: z.coerce
    .number()
    .int()
    .min(60)
    .max(30 * 86400)
    .default(12 * 3600)
    .describe("How long a share cookie lasts (never past the share's expiresAt)"),
  BERTH_CONSOLE_DIR: z
    .string()
    .min(1)
    .optional()
    .describe("The console's built files (node hack/console.ts); the image sets it. Without it /console answers 404 console_not_built"),
  BERTH_CONSOLE_SESSION_SECONDS: z.coerce
    .number()
    .int()
    .min(60)
    .max(7 * 86400)
    .default(8 * 3600)
    .describe("How long a console session lasts after sign-in"),
  BERTH_CONSOLE_MAX_SESSIONS_PER_KEY: z.coerce
    .number()
    .int()
    .min(1)
    .max(1000)
    .default(20)
    .describe("Live console sessions one workspace key may hold; signing in once more ends its oldest"),
  BERTH_MAX_MEMBERS_PER_WORKSPACE: z.coerce
    .number()
    .int()
    .min(1)
    .max(100_000)
    .default(1000)
    .describe("Members a workspace may have (people who sign in to its console with the identity provider, BERTH_OIDC_*)"),
  BERTH_OIDC_ISSUER_URL: z
    .url()
    .optional()
    .describe(
      "The organisation's OpenID Connect issuer; requireAuth shares and the console's sign-in of workspace members need it. http:// only for a loopback issuer (tests)",
    ),
  BERTH_OIDC_CLIENT_ID: z.string().min(1).optional(),
  BERTH_OIDC_CLIENT_SECRET: z.string().min(1).optional(),
  BERTH_OIDC_REDIRECT_URL: z
    .url()
    .regex(/\/api\/v1\/auth\/oidc\/callback$/, "must be <the API's public URL>/api/v1/auth/oidc/callback")
    .optional()
    .describe("The callback registered with the identity provider: <the API's public URL>/api/v1/auth/oidc/callback"),
  BERTH_OIDC_SCOPES: z.string().default("openid email profile"),
  BERTH_MODEL_PRICES: jsonVariable(ModelPricesConfig, undefined).describe(
    'Extra or overriding model prices, JSON: {"version"?: string, "models": {"<model>": {"prompt": <USD per 1M tokens>, "completion": <USD per 1M tokens>}}}',
  ),
});
const OIDC_VARIABLES = ["BERTH_OIDC_ISSUER_URL", "BERTH_OIDC_CLIENT_ID", "BERTH_OIDC_CLIENT_SECRET", "BERTH_OIDC_REDIRECT_URL"] as const;
const INTERNAL_TLS_VARIABLES = ["BERTH_INTERNAL_TLS_PORT", "BERTH_INTERNAL_TLS_CERT_FILE", "BERTH_INTERNAL_TLS_KEY_FILE"] as const;

export type Config = z.output<typeof ConfigSchema>;

export function loadConfig(env: NodeJS.ProcessEnv = process.env): Config {
  const parsed = ConfigSchema.safeParse(env);
  if (!parsed.success) {
    const lines = parsed.error.issues.map((i) => `  ${i.path.join(".")}: ${i.message}`);
    throw new Error(`invalid configuration:\n${lines.join("\n")}`);
  }
  if (parsed.data.BERTH_REQUEST_TIMEOUT_MS < parsed.data.BERTH_HEADERS_TIMEOUT_MS) {
    throw new Error("invalid configuration:\n  BERTH_REQUEST_TIMEOUT_MS must be at least BERTH_HEADERS_TIMEOUT_MS");
  }
  const oidc = OIDC_VARIABLES.filter((k) => parsed.data[k] !== undefined);
  if (oidc.length > 0 && oidc.length < OIDC_VARIABLES.length) {
    throw new Error(
      `invalid configuration:\n  sign-in needs all of ${OIDC_VARIABLES.join(", ")} (missing ${OIDC_VARIABLES.filter((k) => !oidc.includes(k)).join(", ")})`,
    );
  }
  const tls = INTERNAL_TLS_VARIABLES.filter((k) => parsed.data[k] !== undefined);
  if (tls.length > 0 && tls.length < INTERNAL_TLS_VARIABLES.length) {
    throw new Error(
      `invalid configuration:\n  the internal TLS listener needs all of ${INTERNAL_TLS_VARIABLES.join(", ")} (missing ${INTERNAL_TLS_VARIABLES.filter((k) => !tls.includes(k)).join(", ")})`,
    );
  }
  if (parsed.data.BERTH_INTERNAL_TLS_PORT && parsed.data.BERTH_INTERNAL_TLS_PORT === parsed.data.BERTH_API_PORT) {
    throw new Error("invalid configuration:\n  BERTH_INTERNAL_TLS_PORT must differ from BERTH_API_PORT");
  }
  return parsed.data;
}
