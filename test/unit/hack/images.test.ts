// The pure parts of the image tooling (hack/lib/oci.ts, hack/lib/registry.ts, hack/images.ts):
// reproducible layers (the same files give the same digest, whatever their times or order), tar
// archives that GNU tar reads back as written (long and non-ASCII names, links, setuid, owners),
// the OCI config and manifest shapes and media types, and the helpers around them.
import test from "ava";
import { execFileSync } from "node:child_process";
import { createHash } from "node:crypto";
import { link, mkdir, mkdtemp, readFile, rm, symlink, utimes, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { gunzipSync } from "node:zlib";
import type { ImageSpec, Layer, TarEntry } from "../../../hack/lib/oci.ts";
import {
  canonicalJson,
  entryHeader,
  extendImage,
  imageBlobs,
  layerBytes,
  LAYER_MTIME,
  MEDIA_TYPE,
  mergeEnv,
  parentDirs,
  paxRecord,
  sha256,
  sortEntries,
} from "../../../hack/lib/oci.ts";
import { loopbackRegistry, uploadUrl } from "../../../hack/lib/registry.ts";
import {
  ACMESOLVER_UID,
  buildAcmeSolver,
  cacheKey,
  contentTag,
  debianMirror,
  ImageCache,
  sampleAppEntries,
  SAMPLE_ENTRYPOINT,
  treeEntries,
  withNodeUser,
} from "../../../hack/images.ts";

const file = (path: string, text: string, mode = 0o644): TarEntry => ({
  path,
  type: "file",
  mode,
  uid: 0,
  gid: 0,
  data: Buffer.from(text),
});

async function tempDir(t: { teardown(f: () => Promise<void>): void }): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), "berth-images-"));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  return dir;
}

/** `tar -tvf` of a layer's uncompressed tar: one line per entry, GNU tar's own reading. */
async function gnuTarList(t: { teardown(f: () => Promise<void>): void }, gz: Buffer): Promise<string[]> {
  const dir = await tempDir(t);
  await writeFile(join(dir, "layer.tar.gz"), gz);
  return execFileSync("tar", ["--numeric-owner", "-tvzf", join(dir, "layer.tar.gz")], { encoding: "utf8" })
    .trim()
    .split("\n");
}

test("the same entries give the same layer digest, in any order; other content gives another", async (t) => {
  const entries = [file("app/a.txt", "a"), file("app/b.txt", "b"), { path: "app", type: "dir" as const, mode: 0o755, uid: 0, gid: 0 }];
  const one = await layerBytes(entries);
  const two = await layerBytes([...entries].reverse());
  t.is(one.digest, two.digest);
  t.is(one.diffId, two.diffId);
  t.true(one.bytes.equals(two.bytes));
  t.is(one.digest, sha256(one.bytes), "the digest is of the gzip blob");
  t.is(one.diffId, sha256(gunzipSync(one.bytes)), "the diff_id is of the uncompressed tar");
  t.is(one.size, one.bytes.length);
  const other = await layerBytes([file("app/a.txt", "A"), file("app/b.txt", "b"), entries[2]!]);
  t.not(other.digest, one.digest);
  // gzip's header carries no time and no name: bytes 4-7 (mtime) are zero
  t.deepEqual([...one.bytes.subarray(4, 8)], [0, 0, 0, 0]);
});

test("a tree read twice gives the same digest whatever the files' times and creation order", async (t) => {
  const a = await tempDir(t);
  const b = await tempDir(t);
  const make = async (dir: string, order: string[], time: number) => {
    await mkdir(join(dir, "sub/deeper"), { recursive: true });
    for (const name of order) await writeFile(join(dir, name), `content of ${name}`);
    await symlink("../x.txt", join(dir, "sub/link"));
    for (const name of [...order, "sub", "sub/deeper"]) await utimes(join(dir, name), time, time);
  };
  await make(a, ["x.txt", "sub/y.txt", "sub/deeper/z.txt"], 1_000_000);
  await make(b, ["sub/deeper/z.txt", "sub/y.txt", "x.txt"], 1_700_000_000);
  const owner = { uid: 0, gid: 0 };
  const la = await layerBytes(await treeEntries(a, "app", { owner, normalizeModes: true }));
  const lb = await layerBytes(await treeEntries(b, "app", { owner, normalizeModes: true }));
  t.is(la.digest, lb.digest);
  const list = await gnuTarList(t, la.bytes);
  t.true(
    list.every((l) => l.includes("1970-01-01 00:00")),
    `every mtime is ${LAYER_MTIME}: ${list.join("\n")}`,
  );
  t.deepEqual(
    list.map((l) => l.split(/\s+/).slice(5).join(" ")),
    ["app/sub/", "app/sub/deeper/", "app/sub/deeper/z.txt", "app/sub/link -> ../x.txt", "app/sub/y.txt", "app/x.txt"],
    "sorted bytewise, directories with a trailing slash, the link kept",
  );
});

test("GNU tar reads back long and non-ASCII names, hard and symbolic links, setuid, sticky bits and owners", async (t) => {
  const long = `app/${"d".repeat(60)}/${"f".repeat(80)}.js`;
  const entries: TarEntry[] = [
    file(long, "long"),
    file("app/ünïcödé.txt", "utf-8"),
    file("usr/bin/su", "su", 0o4755),
    { path: "tmp", type: "dir", mode: 0o1777, uid: 0, gid: 0 },
    { path: "home/node", type: "dir", mode: 0o750, uid: 10001, gid: 10001 },
    { path: "usr/bin/perl", type: "file", mode: 0o755, uid: 0, gid: 0, data: Buffer.from("perl") },
    { path: "usr/bin/perl5", type: "hardlink", mode: 0o755, uid: 0, gid: 0, linkname: "usr/bin/perl" },
    { path: "app/link", type: "symlink", mode: 0o777, uid: 0, gid: 0, linkname: `/${"t".repeat(120)}` },
  ];
  const layer = await layerBytes([...entries, ...parentDirs(entries)]);
  const list = await gnuTarList(t, layer.bytes);
  const line = (path: string) => list.find((l) => l.endsWith(` ${path}`) || l.includes(` ${path} `)) ?? "";
  t.regex(line(long), /^-rw-r--r-- 0\/0 +4 /);
  t.regex(line("app/ünïcödé.txt"), /^-rw-r--r-- 0\/0 +5 /);
  t.regex(line("usr/bin/su"), /^-rwsr-xr-x 0\/0 /);
  t.regex(line("tmp/"), /^drwxrwxrwt 0\/0 /);
  t.regex(line("home/node/"), /^drwxr-x--- 10001\/10001 /);
  t.regex(line("usr/bin/perl5"), /^hrwxr-xr-x .* usr\/bin\/perl5 link to usr\/bin\/perl$/);
  t.regex(line("app/link"), new RegExp(`-> /${"t".repeat(120)}$`));
  // the content of the long-named file, extracted by GNU tar
  const dir = await tempDir(t);
  await writeFile(join(dir, "l.tar.gz"), layer.bytes);
  execFileSync("tar", ["-xzf", join(dir, "l.tar.gz"), "-C", dir, long]);
  t.is(await readFile(join(dir, long), "utf8"), "long");
});

test("ustar headers: 512 bytes, a checksum over the header, numeric owners only", (t) => {
  const h = entryHeader(file("etc/passwd", "root"));
  t.is(h.length, 512);
  let sum = 0;
  for (let i = 0; i < 512; i++) sum += i >= 148 && i < 156 ? 0x20 : h[i]!;
  t.is(parseInt(h.subarray(148, 154).toString("ascii"), 8), sum);
  t.is(h.subarray(257, 265).toString("latin1"), "ustar\u000000");
  t.is(h.subarray(265, 297).toString("latin1").replaceAll("\0", ""), "", "no user name");
  t.is(entryHeader(file(`a/${"x".repeat(120)}`, "")).length, 512 * 3, "a pax header, its records, then the ustar header");
});

test("pax records count their own length", (t) => {
  for (let n = 1; n < 1100; n += 7) {
    const r = paxRecord("path", "p".repeat(n));
    t.is(Number(r.split(" ", 1)[0]), Buffer.byteLength(r), r.slice(0, 12));
  }
});

test("archive order: bytewise by path; unclean or repeated paths and a hard link before its file are refused", (t) => {
  t.deepEqual(
    sortEntries([file("a/b", ""), file("a-c", ""), file("a", ""), file("B", "")]).map((e) => e.path),
    ["B", "a", "a-c", "a/b"],
  );
  for (const path of ["/abs", "./rel", "dir/", "a//b", "a/../b", ""])
    t.throws(() => sortEntries([file(path, "")]), { message: /not a clean relative path/ });
  t.throws(() => sortEntries([file("x", ""), file("x", "")]), { message: /appears twice/ });
  t.throws(() => sortEntries([file("b", ""), { path: "a", type: "hardlink", mode: 0o644, uid: 0, gid: 0, linkname: "b" }]), {
    message: /not before it/,
  });
  t.deepEqual(
    parentDirs([file("usr/local/bin/node", ""), { path: "usr", type: "dir", mode: 0o755, uid: 0, gid: 0 }])
      .map((e) => e.path)
      .sort(),
    ["usr/local", "usr/local/bin"],
  );
});

test("treeEntries: a file with other names becomes hard links to its first name in archive order", async (t) => {
  const dir = await tempDir(t);
  await writeFile(join(dir, "z-first-created"), "same inode");
  await link(join(dir, "z-first-created"), join(dir, "a-second-name"));
  const entries = await treeEntries(dir, "");
  t.like(
    entries.find((e) => e.path === "a-second-name"),
    { type: "file" },
  );
  t.like(
    entries.find((e) => e.path === "z-first-created"),
    { type: "hardlink", linkname: "a-second-name" },
  );
});

const layer = (n: number): Layer => ({ digest: sha256(`blob ${n}`), diffId: sha256(`tar ${n}`), size: 100 + n, createdBy: `step ${n}` });

test("image config and manifest: the OCI image spec's shapes and media types, canonical JSON", (t) => {
  const spec: ImageSpec = {
    layers: [layer(1), layer(2)],
    config: { User: "10001:10001", Env: ["PATH=/bin"], Entrypoint: ["/pause"] },
    annotations: { "org.opencontainers.image.title": "x" },
  };
  const image = imageBlobs(spec);
  const config = JSON.parse(image.config.toString()) as Record<string, unknown>;
  t.deepEqual(config, {
    architecture: "amd64",
    os: "linux",
    config: { Entrypoint: ["/pause"], Env: ["PATH=/bin"], User: "10001:10001" },
    rootfs: { type: "layers", diff_ids: [layer(1).diffId, layer(2).diffId] },
    history: [
      { created: "1970-01-01T00:00:00.000Z", created_by: "step 1" },
      { created: "1970-01-01T00:00:00.000Z", created_by: "step 2" },
    ],
  });
  const manifest = JSON.parse(image.manifest.toString()) as Record<string, unknown>;
  t.deepEqual(manifest, {
    schemaVersion: 2,
    mediaType: "application/vnd.oci.image.manifest.v1+json",
    config: { mediaType: "application/vnd.oci.image.config.v1+json", digest: sha256(image.config), size: image.config.length },
    layers: [1, 2].map((n) => ({ mediaType: "application/vnd.oci.image.layer.v1.tar+gzip", digest: layer(n).digest, size: 100 + n })),
    annotations: { "org.opencontainers.image.title": "x" },
  });
  t.is(image.manifestDigest, `sha256:${createHash("sha256").update(image.manifest).digest("hex")}`);
  t.is(image.configDescriptor.mediaType, MEDIA_TYPE.config);
  t.is(image.manifest.toString(), canonicalJson(manifest), "keys sorted at every level");
  // the same spec written with its keys in another order gives the same bytes
  const reordered = imageBlobs({
    annotations: spec.annotations!,
    config: { Entrypoint: ["/pause"], Env: ["PATH=/bin"], User: "10001:10001" },
    layers: spec.layers,
  });
  t.is(reordered.manifestDigest, image.manifestDigest);
});

test("extendImage: base layers first, the runtime config overridden field by field, Env merged by name", (t) => {
  const base: ImageSpec = { layers: [layer(1)], config: { Env: ["PATH=/bin", "A=1"], Cmd: ["bash"], User: "0" } };
  const child = extendImage(base, {
    layers: [layer(2)],
    config: { Env: ["A=2", "B=3"], Entrypoint: ["node", "server.ts"], User: "10001:10001" },
  });
  t.deepEqual(
    child.layers.map((l) => l.createdBy),
    ["step 1", "step 2"],
  );
  t.deepEqual(
    child.config,
    { Env: ["PATH=/bin", "A=2", "B=3"], Entrypoint: ["node", "server.ts"], User: "10001:10001" },
    "a new Entrypoint resets the base's Cmd",
  );
  t.deepEqual(mergeEnv(["X=1=2"], ["X=3"]), ["X=3"]);
});

test("the Debian mirror comes from the machine's apt sources, deb822 or one-line, never the security archive", (t) => {
  const deb822 =
    "Types: deb\nURIs: http://deb.debian.org/debian-security\nSuites: bookworm-security\nComponents: main\n\nTypes: deb\n# snapshot\nURIs: http://mirror.example/debian/\nSuites: bookworm bookworm-updates\nComponents: main\n";
  t.is(debianMirror([{ name: "debian.sources", text: deb822 }]), "http://mirror.example/debian");
  t.is(
    debianMirror([
      {
        name: "sources.list",
        text: "# x\ndeb http://security.debian.org/debian-security bookworm main\ndeb [arch=amd64] http://ftp.example/debian bookworm main\n",
      },
    ]),
    "http://ftp.example/debian",
  );
  t.is(debianMirror([{ name: "other.list", text: "deb https://packages.example/apt cloud-sdk-bookworm main\n" }]), undefined);
});

test("the sample's /app and everything in it belong to root, as samples/hello/Dockerfile builds it", async (t) => {
  const entries = await sampleAppEntries();
  t.true(
    entries.some((e) => e.path === "app" && e.type === "dir"),
    "the layer has the directory app/",
  );
  t.deepEqual(
    entries.filter((e) => e.uid !== 0 || e.gid !== 0).map((e) => e.path),
    [],
    "the process's user cannot change its code",
  );
});

test("the sample's app layer is samples/hello at /app as a user's service: no node_modules, no toolkit sources", async (t) => {
  const paths = (await sampleAppEntries()).map((e) => e.path);
  for (const p of ["app/server.ts", "app/chat.ts", "app/package.json", "app/package-lock.json", "app/.npmrc"]) t.true(paths.includes(p), p);
  t.deepEqual(
    paths.filter((p) => p !== "app" && !p.startsWith("app/")),
    [],
  );
  t.deepEqual(
    paths.filter((p) => /(^|\/)(node_modules|toolkit)(\/|$)/.test(p)),
    [],
    "node_modules come from the other layer, the toolkit from its package there",
  );
  t.deepEqual(SAMPLE_ENTRYPOINT, ["node", "/app/server.ts"]);
});

test("the node user is added to passwd and group once", (t) => {
  const once = withNodeUser("root:x:0:0:root:/root:/bin/bash\n", "root:x:0:\n");
  t.is(once.passwd, "root:x:0:0:root:/root:/bin/bash\nnode:x:10001:10001:Node.js:/home/node:/usr/sbin/nologin\n");
  t.is(once.group, "root:x:0:\nnode:x:10001:\n");
  t.deepEqual(withNodeUser(once.passwd, once.group), once);
});

test("cache keys and content tags follow the content", (t) => {
  t.is(cacheKey("node", { a: 1, b: 2 }), cacheKey("node", { b: 2, a: 1 }));
  t.not(cacheKey("node", { a: 1 }), cacheKey("node", { a: 2 }));
  t.regex(cacheKey("pause", {}), /^pause-[0-9a-f]{16}$/);
  const image = imageBlobs({ layers: [layer(1)], config: {} });
  t.is(contentTag(image), image.manifestDigest.slice(7, 19));
});

test("the registry is loopback only; upload locations resolve against it and keep their query", (t) => {
  for (const ok of ["127.0.0.1:5000", "localhost:5000", "[::1]:5000", "127.0.0.2:1"]) t.is(loopbackRegistry(ok), ok);
  for (const bad of ["10.0.0.1:5000", "registry.example:5000", "127.0.0.1", "http://127.0.0.1:5000"]) t.throws(() => loopbackRegistry(bad));
  t.is(
    uploadUrl("http://127.0.0.1:5000", "/v2/a/blobs/uploads/u1?_state=s", { digest: "sha256:ab" }),
    "http://127.0.0.1:5000/v2/a/blobs/uploads/u1?_state=s&digest=sha256%3Aab",
  );
  t.is(
    uploadUrl("http://127.0.0.1:5000", "http://127.0.0.1:5000/v2/a/blobs/uploads/u2", { digest: "sha256:cd" }),
    "http://127.0.0.1:5000/v2/a/blobs/uploads/u2?digest=sha256%3Acd",
  );
});

test("the ACME solver's image: the binary as /acmesolver, tagged with the binary's version and hash, run as a non-root user", async (t) => {
  const dir = await tempDir(t);
  const bin = join(dir, "acmesolver-v1.21.2-0123abcd");
  await writeFile(bin, "#!fake solver binary\n", { mode: 0o755 });
  const built = await buildAcmeSolver(bin, { cacheDir: join(dir, "cache"), log: () => {} });
  t.is(built.name, "berth/acmesolver");
  t.is(built.tag, "v1.21.2-0123abcd");
  const config = JSON.parse(built.image.config.toString()) as { config: { Entrypoint: string[]; User: string } };
  t.deepEqual(config.config.Entrypoint, ["/acmesolver"]);
  t.is(config.config.User, `${ACMESOLVER_UID}:${ACMESOLVER_UID}`, "numeric, so that runAsNonRoot can check it");
  t.not(ACMESOLVER_UID, 0);
  const layer = built.image.spec.layers[0]!;
  const listing = await gnuTarList(t, await readFile(new ImageCache(join(dir, "cache")).blobPath(layer.digest)));
  t.is(listing.length, 1);
  t.regex(listing[0]!, /^-rwxr-xr-x 0\/0 .* acmesolver$/);
  const again = await buildAcmeSolver(bin, { cacheDir: join(dir, "cache"), log: () => {} });
  t.is(again.image.manifestDigest, built.image.manifestDigest, "the same binary gives the same image");
  await writeFile(bin, "#!another solver\n");
  t.not(
    (await buildAcmeSolver(bin, { cacheDir: join(dir, "cache"), log: () => {} })).image.manifestDigest,
    built.image.manifestDigest,
    "another binary another image",
  );
  const wrong = join(dir, "solver");
  await writeFile(wrong, "x");
  await t.throwsAsync(buildAcmeSolver(wrong, { cacheDir: join(dir, "cache") }), { message: /acmesolver-<version>-<hash>/ });
});
