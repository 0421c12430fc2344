// The key that signs share cookies, sign-in tickets and sign-in state (docs/shares.md). Every API
// replica must hold the same key, and it must outlive restarts and upgrades, or viewers' cookies
// stop working. Where it comes from, first match wins:
//   1. BERTH_SHARE_COOKIE_KEY (an operator who manages the key, e.g. from their own Secret);
//   2. the Secret `berth-share-cookie-key` in the API's namespace (BERTH_NAMESPACE; the chart sets
//      it): read, or created with a random key by the first replica that finds none. Created by
//      the API rather than rendered by Helm, so `helm template` and GitOps never rotate it, it is
//      not in the release's history, and `helm uninstall` leaves it (a reinstall keeps cookies);
//   3. a random key of this process (development; cookies die with the process).
import { randomBytes } from "node:crypto";
import { API_FIELD_MANAGER, isConflict, type KubeObject, type ObjectClient } from "../../kube/client.ts";
import type { Logger } from "../../kube/logger.ts";
import type { Access } from "../../kube/rbac.ts";

export const SHARE_KEY_SECRET = "berth-share-cookie-key";
/** The Secret's data key holding the key (base64 in the Secret, as every Secret value). */
export const SHARE_KEY_DATA_KEY = "key";
const KEY_BYTES = 32;

export const SHARE_KEY_ACCESS: Access[] = [
  {
    group: "",
    resource: "secrets",
    verbs: ["get"],
    names: [SHARE_KEY_SECRET],
    scope: "release",
    why: "The share cookie key: read from its Secret in Berth's namespace at start",
  },
  {
    group: "",
    resource: "secrets",
    verbs: ["create"],
    scope: "release",
    why: "The share cookie key: the first API replica that finds no Secret creates it with a random key (create cannot be narrowed by name)",
  },
];

type SecretObject = KubeObject & { data?: Record<string, string>; type?: string };

/** The key held by a Secret; an error names what is wrong with a Secret that holds no usable key. */
export function keyOfSecret(secret: SecretObject, where: string): Buffer {
  const raw = secret.data?.[SHARE_KEY_DATA_KEY];
  const key = raw === undefined ? undefined : Buffer.from(raw, "base64");
  if (!key || key.length < KEY_BYTES) {
    throw new Error(
      `Secret ${where} holds no share cookie key: data.${SHARE_KEY_DATA_KEY} must be at least ${KEY_BYTES} bytes (e.g. kubectl create secret generic ${SHARE_KEY_SECRET} --from-literal=${SHARE_KEY_DATA_KEY}="$(openssl rand -base64 32)"); it is never overwritten`,
    );
  }
  return key;
}

export function shareKeySecret(namespace: string, key: Buffer): SecretObject {
  return {
    apiVersion: "v1",
    kind: "Secret",
    metadata: {
      name: SHARE_KEY_SECRET,
      namespace,
      labels: { "app.kubernetes.io/part-of": "berth", "app.kubernetes.io/component": "api" },
      annotations: {
        "berth.dev/purpose":
          "Signs share cookies and sign-in tickets (docs/shares.md). Deleting it signs every viewer out at the API's next restart.",
      },
    },
    type: "Opaque",
    data: { [SHARE_KEY_DATA_KEY]: key.toString("base64") },
  };
}

/** The Secret's key, creating the Secret when missing; replicas starting together agree on one key. */
export async function loadShareKey(kube: ObjectClient, namespace: string, log: Logger): Promise<Buffer> {
  const ref = { apiVersion: "v1", kind: "Secret", namespace, name: SHARE_KEY_SECRET };
  const where = `${namespace}/${SHARE_KEY_SECRET}`;
  const existing = await kube.get<SecretObject>(ref);
  if (existing) return keyOfSecret(existing, where);
  const key = randomBytes(KEY_BYTES);
  try {
    await kube.create(shareKeySecret(namespace, key), API_FIELD_MANAGER);
    log.info({ secret: where }, "created the share cookie key");
    return key;
  } catch (err) {
    if (!isConflict(err)) throw err;
  }
  // Another replica created it first: theirs is the key every replica signs with.
  const stored = await kube.get<SecretObject>(ref);
  if (!stored) throw new Error(`Secret ${where} was created by another replica and is gone again`);
  return keyOfSecret(stored, where);
}

/** Where this process's key comes from (see the top of this file). */
export async function resolveShareKey(d: {
  configured: string | undefined;
  namespace: string | undefined;
  kube: ObjectClient;
  log: Logger;
}): Promise<Buffer> {
  if (d.configured) return Buffer.from(d.configured, "utf8");
  if (d.namespace) return loadShareKey(d.kube, d.namespace, d.log);
  d.log.warn("neither BERTH_SHARE_COOKIE_KEY nor BERTH_NAMESPACE is set: share cookies are signed with a key of this process only");
  return randomBytes(KEY_BYTES);
}
