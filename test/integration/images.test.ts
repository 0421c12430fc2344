// The local images against a real registry (distribution v3, test/helpers/registry.ts): the pause,
// Debian, Node.js and sample images are built by hack/images.ts (from its cache when warm), pushed
// over the OCI distribution API, read back (manifests and configs by digest), pushed again without
// sending anything; the pause binary and the sample image's filesystem really run.
// A cold cache builds berth/debian with debootstrap, which needs root and the Debian mirror (the
// tests fail without them); a warm cache needs neither.
import test from "ava";
import { execFile, spawn } from "node:child_process";
import { existsSync } from "node:fs";
import { chmod, mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { freePort } from "../../hack/bench/proc.ts";
import type { BuiltImage } from "../../hack/images.ts";
import { buildBase, buildPause, buildSample, IMAGES, NODE_UID, pushImages } from "../../hack/images.ts";
import { ImageCache, defaultCacheDir } from "../../hack/images.ts";
import { MEDIA_TYPE, sha256 } from "../../hack/lib/oci.ts";
import { eventually } from "../helpers/kube.ts";
import { startRegistry, type TestRegistry } from "../helpers/registry.ts";

const execFileAsync = promisify(execFile);
const log = () => {};
let reg: TestRegistry;
let base: { pause: BuiltImage; debian: BuiltImage; node: BuiltImage } | undefined;
let sample: BuiltImage | undefined;

test.before(async () => {
  reg = await startRegistry();
});

test.after.always(async () => {
  await reg?.stop();
});

/** The manifest, config and layers of name:tag as the registry serves them. */
async function pulled(name: string, tag: string) {
  const m = await reg.client.getManifest(name, tag);
  const manifest = JSON.parse(m.bytes.toString()) as {
    mediaType: string;
    config: { digest: `sha256:${string}`; mediaType: string };
    layers: { digest: `sha256:${string}`; mediaType: string; size: number }[];
  };
  const config = JSON.parse((await reg.client.getBlob(name, manifest.config.digest)).toString()) as {
    config: Record<string, unknown>;
    rootfs: { diff_ids: string[] };
  };
  return { digest: m.digest, contentType: m.mediaType, manifest, config };
}

async function tempDir(): Promise<string> {
  return mkdtemp(join(tmpdir(), "berth-image-run-"));
}

test.serial("berth/pause: pushed, read back by digest, and its binary waits until SIGTERM and exits 0", async (t) => {
  const pause = await buildPause({ log });
  const [pushed] = await pushImages(reg.host, [pause], { log });
  t.like(pushed, { reference: `${reg.host}/berth/pause:v1`, digest: pause.image.manifestDigest, upToDate: false, blobsUploaded: 2 });
  const back = await pulled(IMAGES.pause.name, IMAGES.pause.tag);
  t.is(back.digest, pause.image.manifestDigest);
  t.is(back.contentType, MEDIA_TYPE.manifest);
  t.is(back.manifest.config.mediaType, MEDIA_TYPE.config);
  t.deepEqual(back.config.config, { Entrypoint: ["/pause"], StopSignal: "SIGTERM", User: "65535:65535" });
  t.is(await reg.client.manifestDigest(IMAGES.pause.name, pause.image.manifestDigest), pause.image.manifestDigest, "addressable by digest");

  // the layer from the registry, unpacked: a static binary that runs anywhere
  const dir = await tempDir();
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  const layer = await reg.client.getBlob(IMAGES.pause.name, back.manifest.layers[0]!.digest);
  await writeFile(join(dir, "layer.tar.gz"), layer);
  await execFileAsync("tar", ["-xzf", join(dir, "layer.tar.gz"), "-C", dir]);
  const child = spawn(join(dir, "pause"), { stdio: "ignore" });
  const exit = new Promise<number | null>((r) => child.once("exit", (code) => r(code)));
  await new Promise((r) => setTimeout(r, 300));
  t.is(child.exitCode, null, "still running");
  child.kill("SIGTERM");
  t.is(await exit, 0);
});

test.serial(
  "base and sample images: pushed, read back, the sample on top of berth/node with its blobs mounted, not uploaded",
  async (t) => {
    base = await buildBase({ log });
    const results = await pushImages(reg.host, [base.debian, base.node], { log });
    for (const [r, b] of [
      [results[0]!, base.debian],
      [results[1]!, base.node],
    ] as const) {
      t.is(r.digest, b.image.manifestDigest);
      t.is((await pulled(b.name, b.tag)).digest, b.image.manifestDigest, `${b.name} read back`);
    }
    t.is(results[1]!.blobsMounted, 1, "berth/node mounts the Debian layer from berth/debian");

    sample = await buildSample({ log }, base.node);
    t.regex(sample.tag, /^[0-9a-f]{12}$/);
    const [pushed] = await pushImages(reg.host, [sample], { log });
    t.like(pushed, { reference: `${reg.host}/berth/samples-hello:${sample.tag}`, upToDate: false, blobsMounted: 2 });
    t.is(pushed!.blobsUploaded, 3, "its two layers and its config");
    const back = await pulled(IMAGES.sample.name, sample.tag);
    t.is(back.digest, sample.image.manifestDigest);
    const nodeLayers = base.node.image.spec.layers.map((l) => l.digest);
    t.deepEqual(
      back.manifest.layers.slice(0, nodeLayers.length).map((l) => l.digest),
      nodeLayers,
      "berth/node's layers, then the sample's",
    );
    t.is(back.manifest.layers.length, nodeLayers.length + 2);
    t.true(back.manifest.layers.every((l) => l.mediaType === MEDIA_TYPE.layer));
    t.like(back.config.config, {
      User: `${NODE_UID}:${NODE_UID}`,
      WorkingDir: "/app",
      Entrypoint: ["node", "/app/server.ts"],
      ExposedPorts: { "8080/tcp": {} },
    });
    t.true((back.config.config.Env as string[]).includes("PORT=8080"));
    t.deepEqual(
      back.config.rootfs.diff_ids,
      sample.image.spec.layers.map((l) => l.diffId),
    );
  },
);

test.serial("a rebuild gives the same digests and a second push sends nothing", async (t) => {
  const again = await buildBase({ log });
  const sampleAgain = await buildSample({ log }, again.node);
  t.is(again.pause.image.manifestDigest, base!.pause.image.manifestDigest);
  t.is(again.debian.image.manifestDigest, base!.debian.image.manifestDigest);
  t.is(again.node.image.manifestDigest, base!.node.image.manifestDigest);
  t.is(sampleAgain.image.manifestDigest, sample!.image.manifestDigest);
  const results = await pushImages(reg.host, [again.pause, again.debian, again.node, sampleAgain], { log });
  for (const r of results) t.like(r, { upToDate: true, blobsUploaded: 0, bytesUploaded: 0, blobsMounted: 0 }, r.reference);
});

test.serial("the sample image's filesystem runs the service as user 10001 with the image's Node.js", async (t) => {
  const image = sample!;
  const rootfs = await tempDir();
  t.teardown(() => rm(rootfs, { recursive: true, force: true }));
  await chmod(rootfs, 0o755); // the image's root directory, which user 10001 must traverse
  const cache = new ImageCache(defaultCacheDir());
  for (const l of image.image.spec.layers) {
    t.is(sha256(await readFile(cache.blobPath(l.digest))), l.digest);
    await execFileAsync("tar", ["--numeric-owner", "-xzf", cache.blobPath(l.digest), "-C", rootfs]);
  }
  // the toolkit as a user's image has it: its npm package in node_modules, no sources
  const toolkit = JSON.parse(await readFile(join(rootfs, "app/node_modules/@berth/toolkit/package.json"), "utf8")) as { name: string };
  t.is(toolkit.name, "@berth/toolkit");
  t.true(existsSync(join(rootfs, "app/node_modules/@berth/toolkit/dist/langchain/index.js")));
  t.false(existsSync(join(rootfs, "app/node_modules/@berth/toolkit/src")), "the package has no sources");
  t.false(existsSync(join(rootfs, "app/toolkit")), "no toolkit sources beside the app");
  const port = await freePort();
  // the image's own entrypoint, environment and user; ungoverned (no API here: tested on the host in sample-hello.test.ts)
  const config = image.image.spec.config;
  const env = [
    ...(config.Env ?? []).filter((e) => !e.startsWith("PORT=")),
    `PORT=${port}`,
    "HOST=127.0.0.1",
    "BERTH_GOVERNANCE=off",
    "HELLO_VERSION=image",
  ];
  const child = spawn("chroot", [`--userspec=${config.User!}`, rootfs, "/usr/bin/env", "-i", ...env, ...config.Entrypoint!], {
    stdio: ["ignore", "pipe", "pipe"],
  });
  let output = "";
  child.stdout.on("data", (d: Buffer) => {
    output += d.toString();
  });
  child.stderr.on("data", (d: Buffer) => {
    output += d.toString();
  });
  const exit = new Promise<number | null>((r) => child.once("exit", (code) => r(code)));
  t.teardown(() => {
    if (child.exitCode === null) child.kill("SIGKILL");
  });
  const url = `http://127.0.0.1:${port}`;
  const hello = await eventually(
    "the sample in the image's filesystem",
    async () => {
      if (child.exitCode !== null) return { exited: child.exitCode };
      const r = await fetch(`${url}/`);
      return r.ok ? { text: await r.text() } : undefined;
    },
    30_000,
  );
  t.regex(hello.text ?? `exited ${hello.exited}: ${output}`, /version image/);
  // chroot and env exec the next program: the child's pid is node's
  const proc = (await execFileAsync("ps", ["-o", "uid=,args=", "-p", String(child.pid)])).stdout.trim();
  t.regex(proc, /^10001\s+node \/app\/server\.ts$/, "runs as 10001");
  const chat = await fetch(`${url}/chat`, { method: "POST", body: JSON.stringify({ message: "hello" }) });
  t.is(chat.status, 200, "the toolkit and @langchain/core resolve from /app/node_modules");
  child.kill("SIGTERM");
  t.is(await exit, 0, output);
});
