// The API's internal TLS listener (api/server.ts `listen` with `tls`, api/http/tls.ts) and the
// operator's client of it (operator/app/governance.ts): the real app (the provisioning routes, the
// operator verifier) on loopback over HTTPS, with certificates from a throwaway CA in a directory
// laid out as the kubelet lays out a Secret's volume (files linked through ..data, replaced by an
// atomic swap of that link). The operator's client trusting the CA provisions; a client without
// it, or trusting another CA, fails the handshake before its token is sent; a renewed certificate
// is served without a restart; an unusable one is refused and the previous one kept.
import test from "ava";
import { once } from "node:events";
import { mkdirSync, mkdtempSync, renameSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { request } from "node:https";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { connect, type PeerCertificate } from "node:tls";
import { Writable } from "node:stream";
import type Koa from "koa";
import type { MikroORM } from "@mikro-orm/postgresql";
import { z } from "zod";
import { loadConfig } from "../../../api/config.ts";
import { buildServer, listen, listenAll, type RunningServer } from "../../../api/server.ts";
import { operatorVerifier } from "../../../api/auth/operator.ts";
import { governanceRoutes } from "../../../api/governance/routes.ts";
import type { Governance } from "../../../api/governance/service.ts";
import { defineRoute } from "../../../api/http/route.ts";
import { createLogger } from "../../../kube/logger.ts";
import { HttpGovernanceClient } from "../../../operator/app/governance.ts";
import type { ProvisionRequest } from "../../../crds/governance.ts";
import { issueServerCertificate, makeCa, type Pem } from "../../helpers/certificates.ts";

const OPERATOR = "system:serviceaccount:berth-system:berth-operator";
const b64 = (o: object) => Buffer.from(JSON.stringify(o)).toString("base64url");
/** A token shaped as the operator's (the verifier reads its claims before the review, which the test fakes). */
const TOKEN = `${b64({ alg: "RS256" })}.${b64({ sub: OPERATOR, aud: ["berth-api"] })}.c2lnbmF0dXJl`;
const NAMES = { dnsNames: ["localhost"], ipAddresses: ["127.0.0.1"] };

const lines: Record<string, unknown>[] = [];
const logger = createLogger({
  level: "info",
  destination: new Writable({
    write(chunk: Buffer, _e, cb) {
      lines.push(JSON.parse(chunk.toString()) as Record<string, unknown>);
      cb();
    },
  }),
});

let dir = "";
let caA: Pem;
let caB: Pem;
let tokenFile = "";
const provisioned: ProvisionRequest[] = [];
/** The slow route's request: `entered` once it is in the handler, answered by `release()`. */
let slowCall: { entered: Promise<void>; arrived: () => void; release: () => void } = newSlowCall();
function newSlowCall(): typeof slowCall {
  let arrived = () => {};
  const entered = new Promise<void>((r) => (arrived = r));
  return { entered, arrived, release: () => {} };
}

/** A directory as the kubelet writes a Secret's volume: tls.crt -> ..data/tls.crt, ..data -> ..<version>/, swapped at once. */
function secretVolume(name: string): { dir: string; write(files: Record<string, string>): void } {
  const volume = join(dir, name);
  mkdirSync(volume);
  let version = 0;
  return {
    dir: volume,
    write(files) {
      const next = `..v${++version}`;
      mkdirSync(join(volume, next));
      for (const [file, text] of Object.entries(files)) writeFileSync(join(volume, next, file), text);
      symlinkSync(next, join(volume, "..data_tmp"));
      renameSync(join(volume, "..data_tmp"), join(volume, "..data")); // the atomic swap
      for (const file of Object.keys(files)) {
        try {
          symlinkSync(join("..data", file), join(volume, file));
        } catch {
          /* linked by an earlier version */
        }
      }
      if (version > 1) rmSync(join(volume, `..v${version - 1}`), { recursive: true });
    },
  };
}

function app(): Koa {
  const governance = {
    provisioning: {
      provisionForOperator: (body: ProvisionRequest) => {
        provisioned.push(body);
        return Promise.resolve({
          project: body.appName,
          workspaceId: "wsabcdefghij",
          database: `gov_${body.appName}`,
          generation: body.generation,
          connectionString: `govdb://gov_sk_x@berth-api.berth-system.svc:80/gov_${body.appName}`,
        });
      },
      deprovisionForOperator: () => Promise.resolve(),
    },
  } as unknown as Governance;
  const slow = defineRoute({
    method: "get",
    path: "/slow",
    operationId: "slow",
    tags: ["test"],
    auth: "none",
    rateLimit: "none",
    summary: "answers when the test says so",
    responses: { 200: z.object({ ok: z.boolean() }).strict() },
    handler: () =>
      new Promise((resolve) => {
        slowCall.release = () => resolve({ status: 200, body: { ok: true } });
        slowCall.arrived();
      }),
  });
  return buildServer({
    config: loadConfig({ DATABASE_URL: "postgres://u:p@localhost/db", BERTH_VALIDATE_RESPONSES: "true" }),
    // the routes here never reach the database (the app's readiness is not asked)
    orm: {} as MikroORM,
    logger,
    routes: [...governanceRoutes(governance, { ingestBodyLimitBytes: () => 1 << 20 }).filter((r) => r.path.startsWith("/internal/")), slow],
    readiness: [],
    operatorVerifier: operatorVerifier({
      review: (token) => Promise.resolve(token === TOKEN ? OPERATOR : undefined),
      username: OPERATOR,
      audience: "berth-api",
    }),
  });
}

async function tlsServer(volume: string, reloadIntervalMs = 50): Promise<RunningServer> {
  return listen(app(), {
    host: "127.0.0.1",
    port: 0,
    shutdownTimeoutMs: 2000,
    logger,
    tls: { certFile: join(volume, "tls.crt"), keyFile: join(volume, "tls.key"), reloadIntervalMs },
  });
}

/** The certificate a new connection is served, verified against `ca` (or not verified: undefined). */
async function served(url: string, ca?: string): Promise<PeerCertificate> {
  const u = new URL(url);
  const socket = connect({
    host: u.hostname,
    port: Number(u.port),
    servername: "localhost",
    ...(ca ? { ca } : { rejectUnauthorized: false }),
  });
  try {
    await once(socket, "secureConnect");
    return socket.getPeerCertificate();
  } finally {
    socket.destroy();
  }
}

function writeFile(name: string, text: string): string {
  const path = join(dir, name);
  writeFileSync(path, text);
  return path;
}

const request1 = { namespace: "berth-wsabcdefghij", appName: "shop", appUid: "uid-1", generation: 1 };

test.before(() => {
  dir = mkdtempSync(join(tmpdir(), "berth-internal-tls-"));
  caA = makeCa("berth-api-internal-ca A");
  caB = makeCa("berth-api-internal-ca B");
  tokenFile = writeFile("token", `${TOKEN}\n`);
});
test.after.always(() => {
  if (dir) rmSync(dir, { recursive: true, force: true });
});

test.serial("the operator's client, trusting the internal CA, provisions through the TLS listener", async (t) => {
  const volume = secretVolume("ok");
  const leaf = issueServerCertificate(caA, NAMES);
  volume.write({ "tls.crt": leaf.cert, "tls.key": leaf.key, "ca.crt": caA.cert });
  const server = await tlsServer(volume.dir);
  t.teardown(() => server.close());
  t.regex(server.url, /^https:\/\/127\.0\.0\.1:\d+$/);

  const client = new HttpGovernanceClient({ baseUrl: server.url, tokenFile, caFile: join(volume.dir, "ca.crt") });
  const answer = await client.provision(request1);
  t.like(answer, { project: "shop", database: "gov_shop", generation: 1 });
  t.deepEqual(provisioned.at(-1), request1);
  await t.notThrowsAsync(client.deprovision({ namespace: request1.namespace, appName: "shop", appUid: "uid-1" }));
  // the operator's token is still what decides: another bearer is refused over TLS too
  const other = new HttpGovernanceClient({
    baseUrl: server.url,
    tokenFile: writeFile("other-token", "not-a-jwt"),
    caFile: join(volume.dir, "ca.crt"),
  });
  await t.throwsAsync(other.provision(request1), { message: /HTTP 401 unauthorized/ });
  t.is((await served(server.url, caA.cert)).serialNumber, leaf.serial);
});

test.serial("a client without the CA, or trusting another one, is refused at the handshake: its token is never sent", async (t) => {
  const volume = secretVolume("refused");
  const leaf = issueServerCertificate(caA, NAMES);
  volume.write({ "tls.crt": leaf.cert, "tls.key": leaf.key });
  const server = await tlsServer(volume.dir);
  t.teardown(() => server.close());
  const before = provisioned.length;

  // the system's trust store: the internal CA is in none
  const system = new HttpGovernanceClient({ baseUrl: server.url, tokenFile });
  const e1 = await t.throwsAsync(system.provision(request1));
  t.regex((e1 as NodeJS.ErrnoException).code ?? "", /SELF_SIGNED_CERT_IN_CHAIN|UNABLE_TO_VERIFY_LEAF_SIGNATURE|UNABLE_TO_GET_ISSUER_CERT/);
  t.true(e1.message.startsWith(`governance provisioning: no answer from the API at ${server.url}: `), e1.message);
  // another CA
  const wrong = new HttpGovernanceClient({ baseUrl: server.url, tokenFile, caFile: writeFile("ca-b.crt", caB.cert) });
  const e2 = await t.throwsAsync(wrong.provision(request1));
  t.regex((e2 as NodeJS.ErrnoException).code ?? "", /UNABLE_TO_VERIFY_LEAF_SIGNATURE|UNABLE_TO_GET_ISSUER_CERT/);
  t.is(provisioned.length, before, "no request reached the API");
  // a name the certificate does not hold
  const e3 = await t.throwsAsync(
    new Promise((resolve, reject) => {
      const u = new URL(server.url);
      request({ host: "127.0.0.1", port: u.port, path: "/healthz", ca: caA.cert, servername: "berth-api.elsewhere.svc" }, resolve)
        .on("error", reject)
        .end();
    }),
  );
  t.is((e3 as NodeJS.ErrnoException).code, "ERR_TLS_CERT_ALTNAME_INVALID");
  t.true(
    lines.some((l) => l.msg === "internal TLS: a client's handshake failed"),
    "the API logs the failed handshakes",
  );
});

test.serial("with a CA the operator never calls the API over plain HTTP", (t) => {
  t.throws(() => new HttpGovernanceClient({ baseUrl: "http://berth-api.berth-system.svc:80", tokenFile, caFile: "/ca.crt" }), {
    message: /must be https:\/\//,
  });
  t.notThrows(() => new HttpGovernanceClient({ baseUrl: "http://berth-api.berth-system.svc:80", tokenFile }));
});

test.serial(
  "a renewed certificate on disk is served to new connections without a restart; an unusable pair is refused and the last good one kept",
  async (t) => {
    const volume = secretVolume("rotate");
    const first = issueServerCertificate(caA, NAMES);
    volume.write({ "tls.crt": first.cert, "tls.key": first.key, "ca.crt": caA.cert });
    const server = await tlsServer(volume.dir);
    t.teardown(() => server.close());
    const caFile = join(volume.dir, "ca.crt");
    const client = new HttpGovernanceClient({ baseUrl: server.url, tokenFile, caFile });
    await client.provision(request1); // a keep-alive connection of the first certificate
    t.is((await served(server.url, caA.cert)).serialNumber, first.serial);

    const waitFor = async (serial: string) => {
      for (const until = Date.now() + 5000; Date.now() < until; await new Promise((r) => setTimeout(r, 25))) {
        if ((await served(server.url)).serialNumber === serial) return true;
      }
      return false;
    };

    // renewed by the same CA: the operator's CA file is unchanged
    const renewed = issueServerCertificate(caA, NAMES);
    volume.write({ "tls.crt": renewed.cert, "tls.key": renewed.key, "ca.crt": caA.cert });
    t.true(await waitFor(renewed.serial), "the renewed certificate is served");
    t.like(await client.provision({ ...request1, generation: 2 }), { generation: 2 });
    t.true(
      lines.some((l) => l.msg === "internal TLS: serving the renewed certificate"),
      "the API logs the renewal",
    );

    // a new CA (the CA Certificate renewed): the CA file the operator reads is rewritten with it
    const rekeyed = issueServerCertificate(caB, NAMES);
    volume.write({ "tls.crt": rekeyed.cert, "tls.key": rekeyed.key, "ca.crt": caB.cert });
    t.true(await waitFor(rekeyed.serial));
    t.like(await client.provision({ ...request1, generation: 3 }), { generation: 3 }, "the client reads the CA file again");
    await t.throwsAsync(served(server.url, caA.cert), { code: "UNABLE_TO_VERIFY_LEAF_SIGNATURE" });

    // a certificate with another certificate's key: not served, the last good pair stays
    const warned = lines.length;
    const mismatched = issueServerCertificate(caB, NAMES);
    volume.write({ "tls.crt": mismatched.cert, "tls.key": rekeyed.key, "ca.crt": caB.cert });
    await new Promise((r) => setTimeout(r, 300));
    t.is((await served(server.url, caB.cert)).serialNumber, rekeyed.serial);
    t.is(
      lines.slice(warned).filter((l) => l.msg === "internal TLS: the new certificate is not usable; still serving the previous one").length,
      1,
      "logged once, not at every read",
    );
    // its key arrives: now it is served
    volume.write({ "tls.crt": mismatched.cert, "tls.key": mismatched.key, "ca.crt": caB.cert });
    t.true(await waitFor(mismatched.serial));
  },
);

test.serial("the listener does not start on a missing or unusable certificate", async (t) => {
  const volume = secretVolume("broken");
  await t.throwsAsync(tlsServer(volume.dir), { message: /cannot read .*tls\.crt \(internal TLS\)/ });
  const a = issueServerCertificate(caA, NAMES);
  const b = issueServerCertificate(caA, NAMES);
  volume.write({ "tls.crt": a.cert, "tls.key": b.key });
  await t.throwsAsync(tlsServer(volume.dir), { message: /are not usable/ });
});

test.serial("close() drains the TLS listener as the plain one: an in-flight request is answered, with Connection: close", async (t) => {
  const volume = secretVolume("drain");
  const leaf = issueServerCertificate(caA, NAMES);
  volume.write({ "tls.crt": leaf.cert, "tls.key": leaf.key });
  const server = await tlsServer(volume.dir);
  slowCall = newSlowCall();
  const u = new URL(server.url);
  const answer = new Promise<{ status: number; connection: string | undefined; text: string }>((resolve, reject) => {
    request({ host: u.hostname, port: u.port, path: "/api/v1/slow", ca: caA.cert, servername: "localhost" }, (res) => {
      let text = "";
      res.setEncoding("utf8").on("data", (c: string) => (text += c));
      res.on("end", () => resolve({ status: res.statusCode ?? 0, connection: res.headers.connection, text }));
    })
      .on("error", reject)
      .end();
  });
  await slowCall.entered;
  const closed = server.close();
  slowCall.release();
  t.like(await answer, { status: 200, connection: "close", text: '{"ok":true}' });
  await closed;
  await t.throwsAsync(served(server.url), { code: "ECONNREFUSED" });
});

test.serial("listenAll opens the internal TLS listener from the configuration, next to the plain one", async (t) => {
  const volume = secretVolume("config");
  const leaf = issueServerCertificate(caA, NAMES);
  volume.write({ "tls.crt": leaf.cert, "tls.key": leaf.key });
  const config = loadConfig({
    DATABASE_URL: "postgres://u:p@localhost/db",
    BERTH_API_PORT: "0",
    BERTH_INTERNAL_TLS_PORT: "0",
    BERTH_INTERNAL_TLS_CERT_FILE: join(volume.dir, "tls.crt"),
    BERTH_INTERNAL_TLS_KEY_FILE: join(volume.dir, "tls.key"),
  });
  const listeners = await listenAll(app(), config, logger);
  t.teardown(() => listeners.close());
  t.regex(listeners.plain.url, /^http:\/\//);
  t.regex(listeners.internal?.url ?? "", /^https:\/\//);
  const health = await fetch(`${listeners.plain.url}/healthz`);
  t.is(health.status, 200);
  t.is((await served(listeners.internal!.url, caA.cert)).serialNumber, leaf.serial);
  const without = await listenAll(app(), loadConfig({ DATABASE_URL: "postgres://u:p@localhost/db", BERTH_API_PORT: "0" }), logger);
  t.is(without.internal, undefined);
  await without.close();
});
