// hack's client certificate for buildkitd's TCP listener (hack/lib/buildkit.sh makes it; `hack/cluster
// env` exports its directory as BERTH_BUILDKIT_TLS_DIR: ca.crt, tls.crt, tls.key), and the Secret
// berth-buildkit-client that holds it for the operator (docs/builds.md "mTLS"): written by the
// chart from ./hack/up's values (hack/lib/local-values.ts), by the tests' operator helper and by
// the deploys benchmark for the operators they start.
import { readFileSync } from "node:fs";
import { join } from "node:path";
import type { KubeObject } from "../../kube/objects.ts";
import { BUILDKIT_CLIENT_KEYS, BUILDKIT_CLIENT_SECRET } from "../../operator/release/builders.ts";

/** A client certificate for buildkitd as PEM texts: the keys of the Secret berth-buildkit-client. */
export interface BuildkitClient {
  /** ca.crt: the CA of buildkitd's certificate */
  ca: string;
  /** tls.crt */
  cert: string;
  /** tls.key */
  key: string;
}

/** The client certificate in `dir` (BERTH_BUILDKIT_TLS_DIR). */
export function readBuildkitClient(dir: string): BuildkitClient {
  const read = (name: string) => readFileSync(join(dir, name), "utf8");
  return { ca: read(BUILDKIT_CLIENT_KEYS.ca), cert: read(BUILDKIT_CLIENT_KEYS.cert), key: read(BUILDKIT_CLIENT_KEYS.key) };
}

/** The Secret berth-buildkit-client of `namespace` (Berth's) holding `client`, as the platform team would create it. */
export function buildkitClientSecret(namespace: string, client: BuildkitClient): KubeObject & { data: Record<string, string> } {
  const b64 = (text: string) => Buffer.from(text).toString("base64");
  return {
    apiVersion: "v1",
    kind: "Secret",
    metadata: { name: BUILDKIT_CLIENT_SECRET, namespace },
    type: "Opaque",
    data: {
      [BUILDKIT_CLIENT_KEYS.ca]: b64(client.ca),
      [BUILDKIT_CLIENT_KEYS.cert]: b64(client.cert),
      [BUILDKIT_CLIENT_KEYS.key]: b64(client.key),
    },
  } as KubeObject & { data: Record<string, string> };
}
