// Per-namespace pull credentials for the platform registry (docs/images.md "Pull credentials"),
// shared by the operator, which writes them into each workspace namespace, and the registry's
// token service (api/registry), which checks them. Pure, but for reading the key's file.
//
// A namespace's credential is derived from one platform key, so the token service needs no
// database and no copy of any Secret: the user name says which namespace it is for, and the
// password is an HMAC of that name. Whoever holds the key can derive every namespace's password
// (the operator and the token service); whoever holds one namespace's password holds only it.
import { createHmac, timingSafeEqual } from "node:crypto";
import { readFileSync } from "node:fs";

/** The Secret (type kubernetes.io/dockerconfigjson) of a namespace's pull credential: its pods' imagePullSecrets. */
export const REGISTRY_PULL_SECRET = "berth-registry-pull";

/** The key must carry at least this many bytes (256 bits). */
export const REGISTRY_KEY_MIN_BYTES = 32;

const NAMESPACE = /^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/;
const PULL_USER = "pull@";

/** The user name of `namespace`'s pull credential. */
export function pullUsername(namespace: string): string {
  if (!NAMESPACE.test(namespace)) throw new Error(`not a namespace name: ${JSON.stringify(namespace)}`);
  return PULL_USER + namespace;
}

/** The namespace a pull credential's user name is for; undefined when it names none. */
export function namespaceOfPullUsername(username: string): string | undefined {
  if (!username.startsWith(PULL_USER)) return undefined;
  const ns = username.slice(PULL_USER.length);
  return NAMESPACE.test(ns) ? ns : undefined;
}

/** The password of a user name: HMAC-SHA256 under the platform key, base64url (43 characters). */
export function registryPassword(key: Buffer, username: string): string {
  if (key.length < REGISTRY_KEY_MIN_BYTES)
    throw new Error(`the registry key has ${key.length} bytes, at least ${REGISTRY_KEY_MIN_BYTES} are needed`);
  return createHmac("sha256", key).update(`berth-registry/v1\n${username}`).digest("base64url");
}

/** Whether `password` is `username`'s, compared in constant time. */
export function passwordMatches(key: Buffer, username: string, password: string): boolean {
  const expected = Buffer.from(registryPassword(key, username));
  const given = Buffer.from(password);
  return given.length === expected.length && timingSafeEqual(given, expected);
}

/** The `.dockerconfigjson` of `namespace`'s pull credential for `registry` (host[:port]). */
export function pullDockerConfig(key: Buffer, registry: string, namespace: string): string {
  const username = pullUsername(namespace);
  const password = registryPassword(key, username);
  const auth = Buffer.from(`${username}:${password}`).toString("base64");
  return JSON.stringify({ auths: { [registry]: { username, password, auth } } });
}

/** The HMAC key in `file`: hex text (a trailing newline is ignored). */
export function readRegistryKey(file: string): Buffer {
  const text = readFileSync(file, "utf8").trim();
  if (!/^([0-9a-f]{2})+$/i.test(text)) throw new Error(`${file}: the registry key must be hex text`);
  const key = Buffer.from(text, "hex");
  if (key.length < REGISTRY_KEY_MIN_BYTES)
    throw new Error(`${file}: the registry key has ${key.length} bytes, at least ${REGISTRY_KEY_MIN_BYTES} are needed`);
  return key;
}
