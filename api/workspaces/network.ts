// The NetworkPolicies of a workspace namespace (docs/security.md "Network"), written by the
// NamespaceEnsurer beside the quota. A workspace's pods accept connections only from their own
// namespace and from the peers the platform names (the ingress controller), and open them only to
// their own namespace, the peers the platform names (cluster DNS, Berth's API) and "the outside"
// (by default every address but the private, shared, link-local and loopback ranges, so neither
// other namespaces' pods and Services nor the node nor a cloud's metadata address). Build pods may
// also reach what builds need (buildkitd, a Git server on the cluster's network). Pure: the shapes
// here are Kubernetes' own (NetworkPolicyPeer, NetworkPolicyPort), so a platform team writes its
// peers as it would in a policy of its own.
import { isIP } from "node:net";
import { z } from "zod";
import { RELEASE_STEP_LABEL } from "../../crds/release.ts";
import type { KubeObject } from "../../kube/objects.ts";
import { cidrMatcher, parseCidrList } from "../../kube/addresses.ts";

/** Every pod of the namespace: its own ingress and egress. */
export const NETWORK_POLICY = "berth-workspace";
/** Build pods (the operator's build Jobs): what builds reach besides. */
export const BUILD_NETWORK_POLICY = "berth-workspace-builds";

const Cidr = z.string().refine((v) => {
  if (!/^[0-9a-f.:]+\/\d{1,3}$/i.test(v)) return false;
  try {
    parseCidrList(v);
    return true;
  } catch {
    return false;
  }
}, "must be a CIDR (address/prefix)");

const LabelSelector = z
  .object({
    matchLabels: z.record(z.string(), z.string()).optional(),
    matchExpressions: z
      .array(
        z
          .object({
            key: z.string().min(1),
            operator: z.enum(["In", "NotIn", "Exists", "DoesNotExist"]),
            values: z.array(z.string()).optional(),
          })
          .strict(),
      )
      .optional(),
  })
  .strict();

/** Whether `inner` is a strict subset of `outer` (what the API server requires of an except). */
function strictSubset(inner: string, outer: string): boolean {
  const [address = "", bits = ""] = inner.split("/");
  const [outerAddress = "", outerBits = ""] = outer.split("/");
  return isIP(address) === isIP(outerAddress) && Number(bits) > Number(outerBits) && cidrMatcher([outer])(address);
}

const IpBlock = z
  .object({ cidr: Cidr, except: z.array(Cidr).optional() })
  .strict()
  .superRefine((b, ctx) => {
    for (const [i, e] of (b.except ?? []).entries()) {
      if (!strictSubset(e, b.cidr)) ctx.addIssue({ code: "custom", path: ["except", i], message: `must be a strict subset of ${b.cidr}` });
    }
  });

const Peer = z.union([
  z.object({ ipBlock: IpBlock }).strict(),
  z
    .object({ namespaceSelector: LabelSelector.optional(), podSelector: LabelSelector.optional() })
    .strict()
    .refine(
      (p) => p.namespaceSelector !== undefined || p.podSelector !== undefined,
      "a peer names an ipBlock, a namespaceSelector or a podSelector",
    ),
]);

const Port = z
  .object({
    protocol: z.enum(["TCP", "UDP", "SCTP"]).default("TCP"),
    port: z.union([
      z.number().int().min(1).max(65535),
      z.string().regex(/^[a-z0-9]([a-z0-9-]{0,13}[a-z0-9])?$/, "must be a port number or name"),
    ]),
    endPort: z.number().int().min(1).max(65535).optional(),
  })
  .strict();

const EgressRule = z.object({ to: z.array(Peer).min(1), ports: z.array(Port).optional() }).strict();

export type NetworkPeer = z.output<typeof Peer>;
export type NetworkEgressRule = z.output<typeof EgressRule>;

/** Cluster DNS as most clusters run it: the kube-dns pods of kube-system, port 53. */
export const DEFAULT_DNS_EGRESS: NetworkEgressRule[] = [
  {
    to: [
      {
        namespaceSelector: { matchLabels: { "kubernetes.io/metadata.name": "kube-system" } },
        podSelector: { matchLabels: { "k8s-app": "kube-dns" } },
      },
    ],
    ports: [
      { protocol: "UDP", port: 53 },
      { protocol: "TCP", port: 53 },
    ],
  },
];

/**
 * "The outside": every address but loopback, the private ranges (RFC 1918, and fc00::/7), the
 * shared address space (RFC 6598, often the pods' or nodes'), link-local (the metadata address
 * 169.254.169.254, fe80::/10) and this-network. Pods, Services and nodes of most clusters live in
 * these; a cluster whose pods or nodes have public addresses adds them to `except`.
 */
export const DEFAULT_OUTSIDE = [
  {
    cidr: "0.0.0.0/0",
    except: ["0.0.0.0/8", "10.0.0.0/8", "100.64.0.0/10", "127.0.0.0/8", "169.254.0.0/16", "172.16.0.0/12", "192.168.0.0/16"],
  },
  { cidr: "::/0", except: ["::1/128", "fc00::/7", "fe80::/10"] },
];

export const WorkspaceNetworkSchema = z
  .object({
    enabled: z
      .boolean()
      .default(true)
      .describe(
        "Whether Berth writes the workspace's NetworkPolicies; false removes the ones it wrote (for a cluster whose network enforces none, they change nothing)",
      ),
    ingressFrom: z
      .array(Peer)
      .default([])
      .describe(
        "Who may connect to a workspace's pods besides its own namespace: the ingress controller's pods (a controller on the node's network is let in by most policy engines as the node)",
      ),
    egressTo: z
      .array(EgressRule)
      .default(DEFAULT_DNS_EGRESS)
      .describe(
        "Where a workspace's pods may connect besides their own namespace and the outside: cluster DNS and Berth's API (its Service's pods). Default: kube-system's kube-dns pods on port 53",
      ),
    buildEgressTo: z
      .array(EgressRule)
      .default([])
      .describe("Where build pods may connect besides: buildkitd, and a Git server on the cluster's network"),
    outside: z
      .array(IpBlock)
      .default(DEFAULT_OUTSIDE)
      .describe(
        "The addresses that count as the outside, open to every pod. Default: all but loopback, private, shared and link-local ranges (so not other namespaces, the node or the metadata address); [] closes it",
      ),
  })
  .strict();

export type WorkspaceNetwork = z.output<typeof WorkspaceNetworkSchema>;

const MANAGED = { "app.kubernetes.io/managed-by": "berth" };

/** The policies of a workspace namespace: every pod's, and build pods' (pure). */
export function workspaceNetworkPolicies(namespace: string, n: WorkspaceNetwork): KubeObject[] {
  const ownNamespace = { podSelector: {} };
  const everyPod: KubeObject = {
    apiVersion: "networking.k8s.io/v1",
    kind: "NetworkPolicy",
    metadata: { name: NETWORK_POLICY, namespace, labels: MANAGED },
    spec: {
      podSelector: {},
      policyTypes: ["Ingress", "Egress"],
      ingress: [{ from: [ownNamespace, ...n.ingressFrom] }],
      egress: [{ to: [ownNamespace] }, ...n.egressTo, ...(n.outside.length ? [{ to: n.outside.map((ipBlock) => ({ ipBlock })) }] : [])],
    },
  };
  const builds: KubeObject = {
    apiVersion: "networking.k8s.io/v1",
    kind: "NetworkPolicy",
    metadata: { name: BUILD_NETWORK_POLICY, namespace, labels: MANAGED },
    spec: {
      podSelector: { matchLabels: { [RELEASE_STEP_LABEL]: "build" } },
      policyTypes: ["Egress"],
      egress: n.buildEgressTo,
    },
  };
  return [everyPod, builds];
}
