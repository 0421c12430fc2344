// LeanKubeConfig: what a kubeconfig file or the in-cluster ServiceAccount turns into for a request.
import test from "ava";
import { mkdtempSync, writeFileSync } from "node:fs";
import type https from "node:https";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createServer, type IncomingMessage } from "node:http";
import { connect, type AddressInfo } from "node:net";
import type { Duplex } from "node:stream";
import { LeanKubeConfig, loadLeanKubeConfig } from "../../../kube/kubeconfig.ts";
import { KubeRest } from "../../../kube/transport.ts";

const b64 = (s: string) => Buffer.from(s).toString("base64");

function kubeconfig(dir: string, user: Record<string, unknown>, cluster: Record<string, unknown> = {}): string {
  const path = join(dir, "config");
  writeFileSync(
    path,
    JSON.stringify({
      apiVersion: "v1",
      kind: "Config",
      "current-context": "b",
      clusters: [
        { name: "other", cluster: { server: "https://wrong:1" } },
        { name: "c", cluster: { server: "https://127.0.0.1:6443", "certificate-authority-data": b64("CA"), ...cluster } },
      ],
      users: [{ name: "u", user }],
      contexts: [
        { name: "a", context: { cluster: "other", user: "u" } },
        { name: "b", context: { cluster: "c", user: "u" } },
      ],
    }),
  );
  return path;
}

async function optionsOf(path: string): Promise<https.RequestOptions> {
  const kc = await loadLeanKubeConfig(path);
  const opts: https.RequestOptions = {};
  await kc.applyToHTTPSOptions(opts);
  return opts;
}

test("the current context's cluster and client certificate", async (t) => {
  const dir = mkdtempSync(join(tmpdir(), "kc-"));
  const path = kubeconfig(dir, { "client-certificate-data": b64("CERT"), "client-key-data": b64("KEY") });
  t.is((await loadLeanKubeConfig(path)).getCurrentCluster()?.server, "https://127.0.0.1:6443");
  const o = await optionsOf(path);
  t.deepEqual(o.ca, Buffer.from("CA"));
  t.deepEqual(o.cert, Buffer.from("CERT"));
  t.deepEqual(o.key, Buffer.from("KEY"));
  t.deepEqual(o.headers, {});
});

test("files relative to the kubeconfig, a token file, TLS options", async (t) => {
  const dir = mkdtempSync(join(tmpdir(), "kc-"));
  writeFileSync(join(dir, "ca.crt"), "CAFILE");
  writeFileSync(join(dir, "token"), "tok-1\n");
  const path = kubeconfig(
    dir,
    { tokenFile: "token", as: "someone" },
    {
      "certificate-authority-data": undefined,
      "certificate-authority": "ca.crt",
      "insecure-skip-tls-verify": true,
      "tls-server-name": "kubernetes",
    },
  );
  const o = await optionsOf(path);
  t.deepEqual(o.ca, Buffer.from("CAFILE"));
  t.false(o.rejectUnauthorized);
  t.is(o.servername, "kubernetes");
  t.deepEqual(o.headers, { Authorization: "Bearer tok-1", "Impersonate-User": "someone" });
});

test("basic auth", async (t) => {
  const dir = mkdtempSync(join(tmpdir(), "kc-"));
  const o = await optionsOf(kubeconfig(dir, { username: "admin", password: "pw" }));
  t.is(o.auth, "admin:pw");
});

test("an exec plugin is handed to client-node's KubeConfig", async (t) => {
  const dir = mkdtempSync(join(tmpdir(), "kc-"));
  const kc = await loadLeanKubeConfig(kubeconfig(dir, { exec: { apiVersion: "client.authentication.k8s.io/v1", command: "true" } }));
  t.false(kc instanceof LeanKubeConfig);
  t.is(kc.getCurrentCluster()?.server, "https://127.0.0.1:6443");
});

test("in cluster: the service address, the ServiceAccount's CA and token; outside a cluster a clear error", (t) => {
  t.is(LeanKubeConfig.inCluster({ host: "10.96.0.1", port: "443" }).getCurrentCluster().server, "https://10.96.0.1:443");
  t.is(LeanKubeConfig.inCluster({ host: "fd00::1", port: "443" }).getCurrentCluster().server, "https://[fd00::1]:443");
  t.throws(() => LeanKubeConfig.inCluster({}), { message: /not running in a cluster/ });
});

test("a cluster behind a proxy-url is reached through the proxy", async (t) => {
  // the API server answers on loopback; its name in the kubeconfig resolves nowhere, so only a
  // tunnel through the proxy (CONNECT, as client-node's proxy agent asks) reaches it
  const apiServer = createServer((_req, res) => {
    res.setHeader("Content-Type", "application/json");
    res.end('{"gitVersion":"v1.36.3"}');
  });
  await new Promise<void>((r) => apiServer.listen(0, "127.0.0.1", r));
  const tunnels: string[] = [];
  const proxy = createServer();
  proxy.on("connect", (req: IncomingMessage, client: Duplex) => {
    tunnels.push(req.url ?? "");
    const upstream = connect((apiServer.address() as AddressInfo).port, "127.0.0.1", () => {
      client.write("HTTP/1.1 200 Connection Established\r\n\r\n");
      upstream.pipe(client);
      client.pipe(upstream);
    });
    upstream.on("error", () => client.destroy());
    client.on("error", () => upstream.destroy());
  });
  await new Promise<void>((r) => proxy.listen(0, "127.0.0.1", r));
  t.teardown(() => {
    proxy.close();
    apiServer.close();
    apiServer.closeAllConnections();
  });
  const dir = mkdtempSync(join(tmpdir(), "kc-"));
  const path = kubeconfig(
    dir,
    { token: "t" },
    {
      server: "http://kube.invalid:8080",
      "insecure-skip-tls-verify": true,
      "proxy-url": `http://127.0.0.1:${(proxy.address() as AddressInfo).port}`,
    },
  );
  const rest = new KubeRest(await loadLeanKubeConfig(path));
  t.deepEqual(await rest.request("GET", "/version", { timeoutMs: 5000 }), { gitVersion: "v1.36.3" });
  t.deepEqual(tunnels, ["kube.invalid:8080"]);
});
