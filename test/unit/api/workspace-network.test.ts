// A workspace namespace's NetworkPolicies (api/workspaces/network.ts) and BERTH_WORKSPACE_NETWORK:
// what every pod and build pods may reach, and what the variable refuses. The policies enforced on
// the real node: test/e2e/hostile-tenant.test.ts.
import test from "ava";
import { loadConfig } from "../../../api/config.ts";
import {
  BUILD_NETWORK_POLICY,
  DEFAULT_DNS_EGRESS,
  NETWORK_POLICY,
  WorkspaceNetworkSchema,
  workspaceNetworkPolicies,
} from "../../../api/workspaces/network.ts";

const base = { DATABASE_URL: "postgres://u:p@localhost/db" };
type Policy = {
  metadata: { name: string; namespace: string };
  spec: { podSelector: unknown; policyTypes: string[]; ingress?: { from: unknown[] }[]; egress: { to: unknown[]; ports?: unknown[] }[] };
};

test("by default: ingress from the own namespace only; egress to the own namespace, kube-dns and public addresses only", (t) => {
  const [every, builds] = workspaceNetworkPolicies("berth-wsa", loadConfig(base).BERTH_WORKSPACE_NETWORK) as unknown as Policy[];
  t.is(every!.metadata.name, NETWORK_POLICY);
  t.is(every!.metadata.namespace, "berth-wsa");
  t.deepEqual(every!.spec.podSelector, {});
  t.deepEqual(every!.spec.policyTypes, ["Ingress", "Egress"]);
  t.deepEqual(every!.spec.ingress, [{ from: [{ podSelector: {} }] }]);
  const egress = every!.spec.egress;
  t.deepEqual(egress[0], { to: [{ podSelector: {} }] });
  t.deepEqual(egress[1], DEFAULT_DNS_EGRESS[0]);
  // the outside leaves out every range a cluster's pods, Services, nodes and metadata live in
  const outside = egress[2]!.to as { ipBlock: { cidr: string; except: string[] } }[];
  t.is(egress.length, 3);
  t.deepEqual(
    outside.map((p) => p.ipBlock.cidr),
    ["0.0.0.0/0", "::/0"],
  );
  for (const cidr of ["10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "169.254.0.0/16", "127.0.0.0/8", "100.64.0.0/10"])
    t.true(outside[0]!.ipBlock.except.includes(cidr), cidr);
  for (const cidr of ["fc00::/7", "fe80::/10", "::1/128"]) t.true(outside[1]!.ipBlock.except.includes(cidr), cidr);
  // build pods: their own policy, adding nothing unless the platform names it
  t.is(builds!.metadata.name, BUILD_NETWORK_POLICY);
  t.deepEqual(builds!.spec.podSelector, { matchLabels: { "berth.dev/release-step": "build" } });
  t.deepEqual(builds!.spec.policyTypes, ["Egress"]);
  t.deepEqual(builds!.spec.egress, []);
});

test("the platform's peers: the ingress controller in, DNS, the API and builders out; outside [] closes the outside", (t) => {
  const node = { ipBlock: { cidr: "10.201.0.1/32" } };
  const n = WorkspaceNetworkSchema.parse({
    ingressFrom: [{ namespaceSelector: { matchLabels: { "kubernetes.io/metadata.name": "ingress" } } }],
    egressTo: [{ to: [node], ports: [{ protocol: "UDP", port: 53 }, { port: 8080 }] }],
    buildEgressTo: [{ to: [node], ports: [{ port: 1234 }] }],
    outside: [],
  });
  const [every, builds] = workspaceNetworkPolicies("berth-wsb", n) as unknown as Policy[];
  t.deepEqual(every!.spec.ingress, [
    { from: [{ podSelector: {} }, { namespaceSelector: { matchLabels: { "kubernetes.io/metadata.name": "ingress" } } }] },
  ]);
  t.deepEqual(every!.spec.egress, [
    { to: [{ podSelector: {} }] },
    {
      to: [node],
      ports: [
        { protocol: "UDP", port: 53 },
        { protocol: "TCP", port: 8080 },
      ],
    },
  ]);
  t.deepEqual(builds!.spec.egress, [{ to: [node], ports: [{ protocol: "TCP", port: 1234 }] }]);
});

test("BERTH_WORKSPACE_NETWORK refuses what a NetworkPolicy would, naming the field", (t) => {
  const bad: [unknown, RegExp][] = [
    [{ egressTo: [{ to: [{ ipBlock: { cidr: "10.0.0.1" } }] }] }, /egressTo\.0\.to\.0.*CIDR|egressTo\.0\.to\.0/],
    [{ egressTo: [{ to: [] }] }, /egressTo\.0\.to/],
    [{ ingressFrom: [{}] }, /ingressFrom\.0/],
    [{ ingressFrom: [{ ipBlock: { cidr: "10.0.0.0/8" }, podSelector: {} }] }, /ingressFrom\.0/],
    [{ egressTo: [{ to: [{ podSelector: {} }], ports: [{ port: 70000 }] }] }, /egressTo\.0\.ports\.0\.port/],
    [{ egressTo: [{ to: [{ podSelector: {} }], ports: [{ port: 53, protocol: "ICMP" }] }] }, /protocol/],
    [{ outside: [{ cidr: "0.0.0.0/0", except: ["nope"] }] }, /outside\.0\.except\.0/],
    [{ outside: [{ cidr: "10.0.0.0/8", except: ["10.0.0.0/8"] }] }, /outside\.0\.except\.0: must be a strict subset of 10\.0\.0\.0\/8/],
    [{ outside: [{ cidr: "10.0.0.0/8", except: ["192.168.0.0/16"] }] }, /outside\.0\.except\.0/],
    [{ outside: [{ cidr: "::/0", except: ["10.0.0.0/8"] }] }, /outside\.0\.except\.0/],
    [{ enable: false }, /enable/],
  ];
  for (const [value, message] of bad) {
    const err = t.throws(() => loadConfig({ ...base, BERTH_WORKSPACE_NETWORK: JSON.stringify(value) }), undefined, JSON.stringify(value));
    t.regex(err.message, /BERTH_WORKSPACE_NETWORK/);
    t.regex(err.message, message, JSON.stringify(value));
  }
  t.throws(() => loadConfig({ ...base, BERTH_WORKSPACE_NETWORK: "{" }), { message: /BERTH_WORKSPACE_NETWORK: must be JSON/ });
  t.false(loadConfig({ ...base, BERTH_WORKSPACE_NETWORK: '{"enabled":false}' }).BERTH_WORKSPACE_NETWORK.enabled);
});
