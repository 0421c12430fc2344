// Berth runs in tests under the identities it has in production: the chart's ServiceAccounts and
// RBAC, never the admin kubeconfig. The chart is rendered with the pinned helm (release "berth" in
// "berth-system", as docs/operating.md installs it), its ServiceAccounts, Roles and bindings are
// applied to the test control plane (server-side apply: idempotent, so every test process may do
// it), with the admission policy that bounds what the API binds and labels, and tokens are minted for the ServiceAccounts with the TokenRequest API. The operator and
// the API then get a kubeconfig holding nothing but that token: a call the chart does not allow is
// refused by the real API server and fails the test. Only the harness itself (namespaces,
// fixtures, assertions) uses the admin kubeconfig.
import { mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import * as yaml from "js-yaml";
import { K8S_VERSION, helm, kubectl, root } from "./binaries.ts";
import { eventually, kube } from "./kube.ts";
import { KubeClient } from "../../kube/client.ts";
import { OPERATOR_WORKSPACE_BINDING, subjectOf, workspaceBinding } from "../../api/workspaces/access.ts";

export const RELEASE = "berth";
export const RELEASE_NAMESPACE = "berth-system";
const SERVICE_ACCOUNTS = { operator: `${RELEASE}-operator`, api: `${RELEASE}-api` } as const;
export type Component = keyof typeof SERVICE_ACCOUNTS;

/** The Kubernetes user name of a component's ServiceAccount. */
export function usernameOf(c: Component): string {
  return `system:serviceaccount:${RELEASE_NAMESPACE}:${SERVICE_ACCOUNTS[c]}`;
}

/**
 * The operator's workspace grants (its Secrets and its writes) in `namespace`, as the API binds
 * them in each workspace namespace it makes: for a test namespace the API did not make.
 */
export async function bindOperatorWorkspaceRole(namespace: string): Promise<void> {
  await new KubeClient(kube().kc).apply(
    workspaceBinding(namespace, `${RELEASE}-operator-workspace`, subjectOf(usernameOf("operator")), OPERATOR_WORKSPACE_BINDING),
    "test",
  );
}

export interface Identity {
  /** A kubeconfig file with the API server, its CA and the ServiceAccount's token: nothing else. */
  kubeconfig: string;
  /** The token alone, in a file (as the kubelet projects it). */
  tokenFile: string;
  token: string;
  username: string;
}

const TEMPLATES = [
  "templates/operator-serviceaccount.yaml",
  "templates/api-serviceaccount.yaml",
  "templates/operator-rbac.yaml",
  "templates/api-rbac.yaml",
  "templates/api-workspace-policy.yaml",
];

let installed: Promise<void> | undefined;

/** Renders the chart's ServiceAccounts and RBAC and applies them (once per process). */
export function installChartIdentities(): Promise<void> {
  installed ??= (async () => {
    const rendered = await helm([
      "template",
      RELEASE,
      join(root, "charts/berth"),
      "--namespace",
      RELEASE_NAMESPACE,
      "--kube-version",
      K8S_VERSION,
      ...TEMPLATES.flatMap((t) => ["--show-only", t]),
    ]);
    if (rendered.code !== 0) throw new Error(`helm template of the chart's RBAC failed:\n${rendered.stderr}`);
    const ns = await kubectl(["create", "namespace", RELEASE_NAMESPACE, "--dry-run=client", "-o", "yaml"]);
    const applied = await kubectl(
      ["apply", "--server-side", "--force-conflicts", "--field-manager", "berth-tests", "-f", "-"],
      `${ns.stdout}\n---\n${rendered.stdout}`,
    );
    if (applied.code !== 0) throw new Error(`applying the chart's RBAC failed:\n${applied.stderr}`);
    // The authorizer follows new bindings within moments.
    const can = async (c: Component, verb: string, resource: string) =>
      (await kubectl(["auth", "can-i", verb, resource, "-A", `--as=${usernameOf(c)}`])).code === 0;
    await eventually(
      "the chart's RBAC to take effect",
      async () => (await can("operator", "watch", "apps.berth.dev")) && (await can("api", "create", "namespaces")),
      15_000,
    );
  })();
  installed.catch(() => {
    installed = undefined;
  });
  return installed;
}

const identities = new Map<Component, Promise<Identity>>();

/** A token of the component's ServiceAccount and a kubeconfig holding only it (cached per process). */
export function identity(c: Component): Promise<Identity> {
  let id = identities.get(c);
  if (!id) {
    id = mint(c);
    identities.set(c, id);
    id.catch(() => identities.delete(c));
  }
  return id;
}

async function mint(c: Component): Promise<Identity> {
  await installChartIdentities();
  const k = kube();
  // Two hours: longer than any test run; the API server's maximum is not configured lower.
  const tr = await k.core.createNamespacedServiceAccountToken({
    namespace: RELEASE_NAMESPACE,
    name: SERVICE_ACCOUNTS[c],
    body: { spec: { audiences: [], expirationSeconds: 7200 } },
  });
  const token = tr.status?.token;
  if (!token) throw new Error(`no token for ServiceAccount ${RELEASE_NAMESPACE}/${SERVICE_ACCOUNTS[c]}`);
  const admin = yaml.load(readFileSync(process.env.KUBECONFIG!, "utf8")) as {
    "current-context": string;
    contexts: { name: string; context: { cluster: string } }[];
    clusters: { name: string; cluster: Record<string, unknown> }[];
  };
  const context = admin.contexts.find((x) => x.name === admin["current-context"])!.context;
  const cluster = admin.clusters.find((x) => x.name === context.cluster)!.cluster;
  const dir = mkdtempSync(join(tmpdir(), `berth-${c}-`));
  const kubeconfig = join(dir, "kubeconfig");
  const tokenFile = join(dir, "token");
  writeFileSync(tokenFile, token, { mode: 0o600 });
  writeFileSync(
    kubeconfig,
    yaml.dump({
      apiVersion: "v1",
      kind: "Config",
      clusters: [{ name: "test", cluster }],
      users: [{ name: SERVICE_ACCOUNTS[c], user: { token } }],
      contexts: [{ name: "test", context: { cluster: "test", user: SERVICE_ACCOUNTS[c] } }],
      "current-context": "test",
    }),
    { mode: 0o600 },
  );
  return { kubeconfig, tokenFile, token, username: usernameOf(c) };
}
