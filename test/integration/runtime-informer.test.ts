// The Informer (kube) between the runtime and the real API server, with a proxy in the
// middle that can fail requests, drop watches, and answer a watch with 410 Gone: start()
// waits for a complete list, a failed watch restarts and resumes from its resourceVersion
// (missing nothing that happened meanwhile), and 410 relists, dropping what was deleted.
import test from "ava";
import * as k8s from "@kubernetes/client-node";
import http from "node:http";
import https from "node:https";
import type { AddressInfo } from "node:net";
import { ListWatchInformer, type Informer, type InformerEvent, type KubeObject } from "../../kube/index.ts";
import { deleteNamespace, eventually, kube, testNamespace, uniqueName } from "../helpers/kube.ts";

const k = kube();
let ns = "";
test.before(async () => {
  ns = await testNamespace(k, "rt-informer");
});
test.after.always(async () => {
  await deleteNamespace(k, ns);
});

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const until = (what: string, cond: () => boolean, timeoutMs?: number) => eventually(what, () => Promise.resolve(cond()), timeoutMs, 20);

/** Requests and how they were answered; `list` is a list of the collection (not discovery). */
interface Seen {
  watch: boolean;
  list: boolean;
  resourceVersion: string | null;
  status: number;
}

/** A plain-HTTP proxy to the API server (it authenticates upstream with the test's credentials). */
async function apiProxy(t: { teardown(fn: () => Promise<void>): void }) {
  const target = new URL(k.kc.getCurrentCluster()!.server);
  const tls: https.RequestOptions = {};
  await k.kc.applyToHTTPSOptions(tls);
  const seen: Seen[] = [];
  const open = new Set<http.ServerResponse>();
  let mode: "pass" | "down" | "gone" = "pass";
  const server = http.createServer((req, res) => {
    const url = new URL(req.url ?? "/", "http://proxy");
    const watch = url.searchParams.get("watch") === "true";
    const list = !watch && url.pathname.endsWith("/configmaps");
    const record = (status: number) => seen.push({ watch, list, resourceVersion: url.searchParams.get("resourceVersion"), status });
    if (mode === "down") {
      record(503);
      res.writeHead(503).end();
      return;
    }
    if (mode === "gone" && watch) {
      // What the API server sends when a watch asks for a resourceVersion it no longer has.
      record(410);
      mode = "pass"; // once
      res.writeHead(200, { "Content-Type": "application/json" });
      res.end(
        JSON.stringify({
          type: "ERROR",
          object: {
            kind: "Status",
            apiVersion: "v1",
            status: "Failure",
            reason: "Expired",
            code: 410,
            message: "too old resource version",
          },
        }) + "\n",
      );
      return;
    }
    const upstream = https.request(
      {
        ...tls,
        host: target.hostname,
        port: target.port,
        method: req.method,
        path: req.url,
        headers: { ...req.headers, host: target.host },
      },
      (up) => {
        record(up.statusCode ?? 0);
        res.writeHead(up.statusCode ?? 502, up.headers);
        res.flushHeaders();
        up.pipe(res);
      },
    );
    upstream.on("error", () => res.destroy());
    req.pipe(upstream);
    open.add(res);
    res.on("close", () => {
      open.delete(res);
      upstream.destroy();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const port = (server.address() as AddressInfo).port;
  t.teardown(
    () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  );
  const kc = new k8s.KubeConfig();
  kc.loadFromOptions({
    clusters: [{ name: "proxy", server: `http://127.0.0.1:${port}`, skipTLSVerify: true }],
    users: [{ name: "proxy" }],
    contexts: [{ name: "proxy", cluster: "proxy", user: "proxy" }],
    currentContext: "proxy",
  });
  return {
    kc,
    seen,
    set mode(m: typeof mode) {
      mode = m;
    },
    /** Drops every open connection: watches end with an error. */
    drop() {
      for (const res of open) res.destroy();
    },
  };
}

const labels = () => ({ "rt-test": uniqueName("l") });
const createCm = (name: string, l: Record<string, string>) =>
  k.core.createNamespacedConfigMap({ namespace: ns, body: { metadata: { name, labels: l } } });
const names = (i: Informer<KubeObject>) =>
  i
    .list()
    .map((o) => o.metadata.name)
    .sort();

function informerVia(t: { teardown(fn: () => Promise<void>): void }, kc: k8s.KubeConfig, l: Record<string, string>) {
  const [[key, value]] = Object.entries(l) as [[string, string]];
  const warnings: string[] = [];
  const informer = new ListWatchInformer<KubeObject>(
    kc,
    { apiVersion: "v1", kind: "ConfigMap", plural: "configmaps", namespace: ns, labelSelector: `${key}=${value}` },
    { warn: (_o, msg) => warnings.push(msg) },
  );
  const events: Array<[InformerEvent, string]> = [];
  informer.on((event, obj) => events.push([event, obj.metadata.name!]));
  t.teardown(() => informer.stop());
  return { informer, events, warnings };
}

test("start() resolves only once a list has succeeded", async (t) => {
  const proxy = await apiProxy(t);
  const l = labels();
  await createCm(uniqueName("cm"), l);
  const { informer, warnings } = informerVia(t, proxy.kc, l);
  proxy.mode = "down";
  let started = false;
  const starting = informer.start().then(() => {
    started = true;
  });
  await sleep(1200);
  t.false(started, "not started while the API server cannot be listed");
  t.false(informer.synced);
  t.true(warnings.length >= 2, "retried");
  const failedLists = proxy.seen.filter((s) => s.status === 503).length;
  t.true(failedLists >= 2 && failedLists <= 4, `the retries back off (${failedLists} lists in 1.2 s)`);
  proxy.mode = "pass";
  await starting;
  t.true(informer.synced);
  t.is(informer.list().length, 1);
});

test("after a watch error the informer restarts from its resourceVersion and misses nothing", async (t) => {
  const proxy = await apiProxy(t);
  const l = labels();
  const [keep, gone] = [uniqueName("keep"), uniqueName("gone")];
  await Promise.all([createCm(keep, l), createCm(gone, l)]);
  const { informer, events } = informerVia(t, proxy.kc, l);
  informer.on(() => {
    throw new Error("a broken handler");
  });
  await informer.start();
  t.deepEqual(names(informer), [gone, keep].sort());
  const listsBefore = proxy.seen.filter((s) => s.list).length;

  // The watch breaks and the API server is unreachable for a while; meanwhile things change.
  proxy.mode = "down";
  proxy.drop();
  await until("a failed watch attempt", () => proxy.seen.some((s) => s.watch && s.status === 503), 5000);
  const added = uniqueName("added");
  await createCm(added, l);
  await k.core.deleteNamespacedConfigMap({ namespace: ns, name: gone });
  proxy.mode = "pass";

  await until("the cache to catch up", () => names(informer).join() === [added, keep].sort().join(), 15_000);
  t.deepEqual(
    events
      .filter(([e]) => e !== "update")
      .slice(-2)
      .sort(),
    [
      ["add", added],
      ["delete", gone],
    ].sort() as typeof events,
  );
  const after = proxy.seen.slice(proxy.seen.findIndex((s) => s.status === 503));
  t.is(proxy.seen.filter((s) => s.list).length, listsBefore, "no relist: the watch resumed");
  const resumed = after.find((s) => s.watch && s.status === 200);
  t.truthy(resumed?.resourceVersion, "the new watch carries the last resourceVersion");
});

test("a watch answered with 410 Gone relists, and the cache drops what was deleted meanwhile", async (t) => {
  const proxy = await apiProxy(t);
  const l = labels();
  const [keep, gone] = [uniqueName("keep"), uniqueName("gone")];
  await Promise.all([createCm(keep, l), createCm(gone, l)]);
  const { informer, events } = informerVia(t, proxy.kc, l);
  await informer.start();
  const listsBefore = proxy.seen.filter((s) => s.list).length;

  proxy.mode = "down";
  proxy.drop();
  await until("a failed watch attempt", () => proxy.seen.some((s) => s.watch && s.status === 503), 5000);
  await k.core.deleteNamespacedConfigMap({ namespace: ns, name: gone });
  const added = uniqueName("added");
  await createCm(added, l);
  proxy.mode = "gone";

  await until("the cache to match the server", () => names(informer).join() === [added, keep].sort().join(), 15_000);
  t.true(proxy.seen.some((s) => s.status === 410));
  t.is(proxy.seen.filter((s) => s.list && s.status === 200).length, listsBefore + 1, "relisted once");
  t.deepEqual(
    events.filter(([e]) => e === "delete"),
    [["delete", gone]],
  );
  // And it keeps watching after the relist.
  const late = uniqueName("late");
  await createCm(late, l);
  await until("a later change", () => informer.get(ns, late) !== undefined, 10_000);
  t.pass();
});

test("stop() ends the watch: later changes are not seen", async (t) => {
  const l = labels();
  const { informer, events } = informerVia(t, k.kc, l);
  await informer.start();
  await informer.stop();
  await createCm(uniqueName("after"), l);
  await sleep(500);
  t.deepEqual(events, []);
  t.deepEqual(informer.list(), []);
});
