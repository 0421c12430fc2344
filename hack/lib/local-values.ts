// The Helm values ./hack/up installs charts/berth with on the local cluster (hack/lib/up-helm.sh):
// Berth's own images from the local registry, every pod of the chart and every App's pods on the
// real node (its label and taint, hack/lib/realnode.sh), the database URL from a Secret hack/up
// creates, one API replica, the API's Ingress on the node's Traefik, the operator calling the
// API over its internal TLS listener (cert-manager runs with the real node), and with a builder,
// mutual TLS to buildkitd with hack's client certificate (hack/lib/buildkit.sh), the chart
// writing its Secret, and the key of the namespaces' pull credentials for the registry's gate.
//
//   node hack/lib/local-values.ts --api-image REG/berth/berth-api:TAG --operator-image REG/berth/berth-operator:TAG
// prints the values as JSON (a YAML document Helm reads with -f).

import { readFileSync } from "node:fs";
import { parseArgs } from "node:util";
import { NODE_UID } from "../images.ts";
import { readBuildkitClient, type BuildkitClient } from "./buildkit-tls.ts";

/** The real node's label and taint (hack/lib/realnode.sh: --node-labels, registerWithTaints). */
export const REAL_NODE_SELECTOR = { "berth.dev/node": "real" } as const;
export const REAL_NODE_TOLERATIONS = [{ key: "berth.dev/real-node", operator: "Exists", effect: "NoSchedule" }] as const;
/** The Secret holding DATABASE_URL, created by hack/up before the install (the migration hook reads it). */
export const DATABASE_SECRET = "berth-database";
/** The CA ClusterIssuer hack/lib/realnode.sh creates for custom domains' certificates (docs/domains.md). */
export const DOMAIN_ISSUER = "berth-local-ca";
/** Host name of the API's Ingress: curl -H "Host: api.berth.local" "$BERTH_INGRESS_URL/api/v1/..." */
export const API_INGRESS_HOST = "api.berth.local";

export interface ImageRef {
  repository: string;
  tag: string;
}

/** "host:port/name:tag" -> { repository: "host:port/name", tag } (the tag after the last "/"). */
export function parseReference(ref: string): ImageRef {
  const slash = ref.lastIndexOf("/");
  const colon = ref.lastIndexOf(":");
  if (colon <= slash || ref.includes("@"))
    throw new Error(`expected an image reference with a tag (registry/name:tag), got ${JSON.stringify(ref)}`);
  return { repository: ref.slice(0, colon), tag: ref.slice(colon + 1) };
}

/** Builds from Git on the local cluster (docs/builds.md): the builder image, BuildKit and the registry as build pods reach them. */
export interface LocalBuilder {
  image: ImageRef;
  /** tcp://<node ip>:<port>: buildkitd through the node's bridge (BERTH_BUILDKIT_CLUSTER_ADDR) */
  buildkitHost: string;
  /** 127.0.0.1:<port>: the registry, as buildkitd (on the host) pushes to it and the node pulls from it */
  registry: string;
  baseImages: Partial<Record<"node" | "python" | "go" | "static", string>>;
  /** Mutual TLS to buildkitd: the client certificate build Jobs present (chart builder.tls) */
  tls?: BuildkitClient;
  /** The key of the namespaces' pull credentials for the registry's gate (chart builder.registryAuth), hex */
  registryAuthKey?: string;
}

/**
 * The workspaces' NetworkPolicies on the local node: cluster DNS (CoreDNS) is a process of the node,
 * and so are buildkitd and the Git server that build pods reach (the chart adds its API's pods).
 */
export function localWorkspaceNetwork(nodeIp: string, builder?: LocalBuilder, gitUrl?: string): Record<string, unknown> {
  const node = { ipBlock: { cidr: `${nodeIp}/32` } };
  const buildPorts = [builder ? new URL(builder.buildkitHost).port : "", gitUrl ? new URL(gitUrl).port : ""]
    .filter(Boolean)
    .map((p) => ({ protocol: "TCP", port: Number(p) }));
  return { dns: [node], buildEgressTo: buildPorts.length ? [{ to: [node], ports: buildPorts }] : [] };
}

export function localValues(input: {
  api: ImageRef;
  operator: ImageRef;
  builder?: LocalBuilder;
  gitUrl?: string;
  nodeIp?: string;
}): Record<string, unknown> {
  const onRealNode = { nodeSelector: { ...REAL_NODE_SELECTOR }, tolerations: REAL_NODE_TOLERATIONS.map((t) => ({ ...t })) };
  const image = (ref: ImageRef) => ({ repository: ref.repository, tag: ref.tag, digest: "", pullPolicy: "IfNotPresent" });
  return {
    database: { existingSecret: DATABASE_SECRET, existingSecretKey: "DATABASE_URL" },
    ...(input.nodeIp ? { workspaces: { network: localWorkspaceNetwork(input.nodeIp, input.builder, input.gitUrl) } } : {}),
    // the chart's pods run as berth/node's own user
    securityContext: { runAsUser: NODE_UID, runAsGroup: NODE_UID, fsGroup: NODE_UID },
    operator: {
      replicas: 1,
      image: image(input.operator),
      config: {
        // Apps' pods go to the real node too: kwok's node stays for scale tests.
        workloadNodeSelector: { ...REAL_NODE_SELECTOR },
        workloadTolerations: REAL_NODE_TOLERATIONS.map((t) => ({ ...t })),
        // custom domains' certificates from the local CA (cert-manager runs with the real node)
        domainIssuer: DOMAIN_ISSUER,
      },
      ...onRealNode,
    },
    ...(input.builder
      ? {
          builder: {
            enabled: true,
            image: image(input.builder.image),
            buildkitHost: input.builder.buildkitHost,
            registry: input.builder.registry,
            registryInsecure: true,
            baseImages: input.builder.baseImages,
            // buildkitd's TCP listener asks for hack's client certificate: the chart writes its Secret
            ...(input.builder.tls ? { tls: { enabled: true, client: { ...input.builder.tls } } } : {}),
            // the node pulls through the registry's gate: each workspace namespace's own credential
            ...(input.builder.registryAuthKey ? { registryAuth: { enabled: true, key: input.builder.registryAuthKey } } : {}),
          },
        }
      : {}),
    api: {
      replicas: 1,
      image: image(input.api),
      ingress: { enabled: true, host: API_INGRESS_HOST },
      // the operator's calls over TLS, with a certificate from the release's own CA (cert-manager runs with the real node)
      internalTls: { enabled: true },
      // the local Git server is on the node's private address: the API may read branch heads there
      ...(input.gitUrl ? { config: { outbound: { allow: [`${new URL(input.gitUrl).hostname}/32`] } } } : {}),
      ...onRealNode,
    },
  };
}

if (import.meta.main) {
  const { values } = parseArgs({
    options: {
      "api-image": { type: "string" },
      "operator-image": { type: "string" },
      "builder-image": { type: "string" },
      "buildkit-host": { type: "string" },
      registry: { type: "string" },
      "base-image": { type: "string", multiple: true },
      "buildkit-tls-dir": { type: "string" },
      "registry-auth-key-file": { type: "string" },
      "git-url": { type: "string" },
      "node-ip": { type: "string" },
    },
  });
  if (!values["api-image"] || !values["operator-image"]) {
    process.stderr.write(
      "usage: node hack/lib/local-values.ts --api-image REG/berth/berth-api:TAG --operator-image REG/berth/berth-operator:TAG\n" +
        "         [--builder-image REG/berth/berth-builder:TAG --buildkit-host tcp://IP:PORT --registry 127.0.0.1:PORT --base-image STACK=REF...\n" +
        "          [--buildkit-tls-dir DIR (ca.crt, tls.crt, tls.key: mutual TLS to buildkitd, BERTH_BUILDKIT_TLS_DIR)]\n" +
        "          [--registry-auth-key-file FILE (the pull credentials' key, BERTH_REGISTRY_AUTH_KEY_FILE)]]\n" +
        "         [--git-url http://IP:PORT (the local Git server as pods reach it)] [--node-ip IP (the real node's: DNS, buildkitd and Git for the workspaces' NetworkPolicies)]\n",
    );
    process.exit(2);
  }
  const builder: LocalBuilder | undefined =
    values["builder-image"] && values["buildkit-host"] && values.registry
      ? {
          image: parseReference(values["builder-image"]),
          buildkitHost: values["buildkit-host"],
          registry: values.registry,
          baseImages: Object.fromEntries((values["base-image"] ?? []).map((b) => b.split("=", 2) as [string, string])),
          ...(values["buildkit-tls-dir"] ? { tls: readBuildkitClient(values["buildkit-tls-dir"]) } : {}),
          ...(values["registry-auth-key-file"] ? { registryAuthKey: readFileSync(values["registry-auth-key-file"], "utf8").trim() } : {}),
        }
      : undefined;
  process.stdout.write(
    JSON.stringify(
      localValues({
        api: parseReference(values["api-image"]),
        operator: parseReference(values["operator-image"]),
        ...(builder ? { builder } : {}),
        ...(values["git-url"] ? { gitUrl: values["git-url"] } : {}),
        ...(values["node-ip"] ? { nodeIp: values["node-ip"] } : {}),
      }),
      null,
      2,
    ) + "\n",
  );
}
