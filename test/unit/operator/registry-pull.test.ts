// The namespace's pull credential as the operator writes it (operator/kit/registry-pull.ts), and
// where it goes: every pod's imagePullSecrets, from the configuration.
import test from "ava";
import { randomBytes } from "node:crypto";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { appBuildConfig } from "../../../operator/app/controller.ts";
import { loadOperatorConfig } from "../../../operator/config.ts";
import { restrictedPod } from "../../../operator/kit/pod.ts";
import { isRegistryPullSecret, REGISTRY_PULL_SECRET, registryPullSecret } from "../../../operator/kit/registry-pull.ts";
import { callerOf } from "../../../api/registry/token-service.ts";

const key = randomBytes(32);

test("the pull Secret: a dockerconfigjson of the namespace's own credential, which the token service takes as that namespace's", (t) => {
  const secret = registryPullSecret("berth-a", { registry: "127.0.0.1:5000", key }) as {
    metadata: { name: string; namespace: string; labels: Record<string, string> };
    type: string;
    data: Record<string, string>;
  };
  t.is(secret.metadata.name, REGISTRY_PULL_SECRET);
  t.is(secret.metadata.namespace, "berth-a");
  t.is(secret.type, "kubernetes.io/dockerconfigjson");
  t.true(isRegistryPullSecret(secret));
  t.false(isRegistryPullSecret({ apiVersion: "v1", kind: "Secret", metadata: { name: REGISTRY_PULL_SECRET, labels: {} } }));
  const config = JSON.parse(Buffer.from(secret.data[".dockerconfigjson"]!, "base64").toString()) as {
    auths: Record<string, { auth: string }>;
  };
  t.deepEqual(Object.keys(config.auths), ["127.0.0.1:5000"]);
  const basic = `Basic ${config.auths["127.0.0.1:5000"]!.auth}`;
  t.deepEqual(callerOf(basic, key), { kind: "namespace", namespace: "berth-a" });
  t.is(callerOf(basic, randomBytes(32)), undefined, "another key's credential is no credential");
  // the same inputs give the same object (no write when nothing changed)
  t.deepEqual(registryPullSecret("berth-a", { registry: "127.0.0.1:5000", key }), secret as never);
});

test("with the key configured, every App pod names the namespace's pull Secret; without it, none", (t) => {
  const dir = mkdtempSync(join(tmpdir(), "berth-registry-key-"));
  const file = join(dir, "registry.key");
  writeFileSync(file, key.toString("hex") + "\n");
  const withKey = appBuildConfig(loadOperatorConfig({ BERTH_BUILD_REGISTRY: "127.0.0.1:5000", BERTH_REGISTRY_AUTH_KEY_FILE: file }));
  t.deepEqual(restrictedPod("Always", withKey).imagePullSecrets, [{ name: REGISTRY_PULL_SECRET }]);
  t.deepEqual(withKey.registryPull?.key, key);
  const without = appBuildConfig(loadOperatorConfig({ BERTH_BUILD_REGISTRY: "127.0.0.1:5000" }));
  t.false("imagePullSecrets" in restrictedPod("Always", without));
  t.throws(() => loadOperatorConfig({ BERTH_REGISTRY_AUTH_KEY_FILE: file }), { message: /BERTH_BUILD_REGISTRY must name the registry/ });
  writeFileSync(file, "abcd\n");
  t.throws(() => appBuildConfig(loadOperatorConfig({ BERTH_BUILD_REGISTRY: "r:1", BERTH_REGISTRY_AUTH_KEY_FILE: file })), {
    message: /at least 32 are needed/,
  });
});
