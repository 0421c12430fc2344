// OCI images without a daemon (docs/images.md): reproducible tar layers, image configs and
// manifests of the OCI image spec v1.1. The tar writer, the JSON builders and the digests are pure;
// writeLayer streams a layer through gzip to any sink, hashing both sides (the digest of the blob
// and the diff_id of the uncompressed tar). hack/images.ts builds the images, hack/lib/registry.ts
// pushes them.
//
// Reproducible: entries are sorted by path (bytewise), every mtime is LAYER_MTIME, owners are
// numeric (no user or group names), gzip's header carries no time or name, and JSON is written with
// sorted keys. The same files give the same bytes, so the same digests.
import { createHash } from "node:crypto";
import { createReadStream } from "node:fs";
import { Writable } from "node:stream";
import { pipeline } from "node:stream/promises";
import { createGzip } from "node:zlib";

export const MEDIA_TYPE = {
  manifest: "application/vnd.oci.image.manifest.v1+json",
  index: "application/vnd.oci.image.index.v1+json",
  config: "application/vnd.oci.image.config.v1+json",
  layer: "application/vnd.oci.image.layer.v1.tar+gzip",
} as const;

/** The modification time of every entry of every layer (seconds since the epoch). */
export const LAYER_MTIME = 0;
/** gzip level of the layers: zlib's default, a fair trade of time and size for local pushes. */
export const GZIP_LEVEL = 6;

export type Digest = `sha256:${string}`;

export function sha256(data: Uint8Array | string): Digest {
  return `sha256:${createHash("sha256").update(data).digest("hex")}`;
}

/** JSON with object keys sorted at every level: the same value always gives the same bytes. */
export function canonicalJson(value: unknown): string {
  return JSON.stringify(value, (_key, v: unknown) => {
    if (v === null || typeof v !== "object" || Array.isArray(v)) return v;
    const o = v as Record<string, unknown>;
    return Object.fromEntries(
      Object.keys(o)
        .sort()
        .map((k) => [k, o[k]]),
    );
  });
}

// ---------------------------------------------------------------------------------------------
// tar (POSIX ustar, with pax extended headers where ustar's fields are too small)

export type TarEntryType = "file" | "dir" | "symlink" | "hardlink";

export interface TarEntry {
  /** relative, "/"-separated, without a leading "/" or "./" and without a trailing "/" */
  path: string;
  type: TarEntryType;
  /** permission bits, setuid, setgid and sticky included (mode & 0o7777) */
  mode: number;
  uid: number;
  gid: number;
  /** files: the size in bytes (of `data`, or of `source` when it is read) */
  size?: number;
  /** files: the content, or */
  data?: Uint8Array;
  /** files: a file read when the archive is written (its size must still be `size`) */
  source?: string;
  /** symlinks: the target; hard links: the path (in this archive) of the file linked to */
  linkname?: string;
}

const BLOCK = 512;
const ZERO_BLOCK = new Uint8Array(BLOCK);
const TYPEFLAG: Record<TarEntryType | "pax", string> = { file: "0", hardlink: "1", symlink: "2", dir: "5", pax: "x" };
/** largest value of an octal field of n bytes (n - 1 digits and a NUL) */
const maxOctal = (n: number) => 8 ** (n - 1) - 1;

function checkPath(path: string): void {
  if (
    path === "" ||
    path.startsWith("/") ||
    path.startsWith("./") ||
    path.endsWith("/") ||
    path.split("/").some((p) => p === "" || p === "." || p === "..")
  )
    throw new Error(`tar: not a clean relative path: ${JSON.stringify(path)}`);
}

/** Bytewise order of the paths' UTF-8 (locale-independent); a directory sorts before its contents. */
export function comparePaths(a: string, b: string): number {
  return Buffer.compare(Buffer.from(a), Buffer.from(b));
}

/** The entries in archive order; throws on an unclean or repeated path, or a hard link before its file. */
export function sortEntries(entries: readonly TarEntry[]): TarEntry[] {
  const sorted = [...entries].sort((a, b) => comparePaths(a.path, b.path));
  const seen = new Set<string>();
  for (const e of sorted) {
    checkPath(e.path);
    if (seen.has(e.path)) throw new Error(`tar: ${e.path} appears twice`);
    if (e.type === "hardlink" && !seen.has(e.linkname ?? ""))
      throw new Error(`tar: hard link ${e.path} to ${String(e.linkname)}, which is not before it`);
    seen.add(e.path);
  }
  return sorted;
}

/** Entries for the directories above each entry's path that no entry declares (root-owned, 0755). */
export function parentDirs(entries: readonly TarEntry[], owner: { uid: number; gid: number } = { uid: 0, gid: 0 }): TarEntry[] {
  const declared = new Set(entries.map((e) => e.path));
  const missing = new Set<string>();
  for (const e of entries) {
    const parts = e.path.split("/");
    for (let i = 1; i < parts.length; i++) {
      const dir = parts.slice(0, i).join("/");
      if (!declared.has(dir)) missing.add(dir);
    }
  }
  return [...missing].map((path) => ({ path, type: "dir", mode: 0o755, ...owner }));
}

function writeString(buf: Buffer, offset: number, length: number, value: string): void {
  buf.write(value, offset, length, "utf8");
}

function writeOctal(buf: Buffer, offset: number, length: number, value: number): void {
  buf.write(value.toString(8).padStart(length - 1, "0") + "\0", offset, length, "ascii");
}

/** A pax extended header record: "<length> <key>=<value>\n", the length counting itself. */
export function paxRecord(key: string, value: string): string {
  const body = ` ${key}=${value}\n`;
  const bodyLength = Buffer.byteLength(body);
  let length = bodyLength + 1;
  while (length !== bodyLength + String(length).length) length = bodyLength + String(length).length;
  return `${length}${body}`;
}

const fitsUstar = (s: string, max: number) => Buffer.byteLength(s) <= max && /^[\x20-\x7e]*$/.test(s);

/** One ustar header block. */
function ustarHeader(
  name: string,
  h: { type: TarEntryType | "pax"; mode: number; uid: number; gid: number; size: number; linkname: string },
): Buffer {
  const buf = Buffer.alloc(BLOCK);
  writeString(buf, 0, 100, name);
  writeOctal(buf, 100, 8, h.mode);
  writeOctal(buf, 108, 8, Math.min(h.uid, maxOctal(8)));
  writeOctal(buf, 116, 8, Math.min(h.gid, maxOctal(8)));
  writeOctal(buf, 124, 12, Math.min(h.size, maxOctal(12)));
  writeOctal(buf, 136, 12, LAYER_MTIME);
  buf.fill(" ", 148, 156); // the checksum counts its own field as spaces
  buf.write(TYPEFLAG[h.type], 156, 1, "ascii");
  writeString(buf, 157, 100, h.linkname);
  buf.write("ustar\u000000", 257, 8, "ascii");
  // uname and gname stay empty: owners are numeric; devmajor/devminor are zero
  writeOctal(buf, 329, 8, 0);
  writeOctal(buf, 337, 8, 0);
  let sum = 0;
  for (const byte of buf) sum += byte;
  buf.write(sum.toString(8).padStart(6, "0") + "\0 ", 148, 8, "ascii");
  return buf;
}

function padding(size: number): Uint8Array {
  const rest = size % BLOCK;
  return rest === 0 ? new Uint8Array(0) : new Uint8Array(BLOCK - rest);
}

/** The header blocks of an entry: a pax header first when a name, link, size or id does not fit ustar. */
export function entryHeader(e: TarEntry): Buffer {
  const name = e.type === "dir" ? `${e.path}/` : e.path;
  const linkname = e.linkname ?? "";
  const size = e.type === "file" ? entrySize(e) : 0;
  const pax: string[] = [];
  if (!fitsUstar(name, 100)) pax.push(paxRecord("path", name));
  if (!fitsUstar(linkname, 100)) pax.push(paxRecord("linkpath", linkname));
  if (size > maxOctal(12)) pax.push(paxRecord("size", String(size)));
  if (e.uid > maxOctal(8)) pax.push(paxRecord("uid", String(e.uid)));
  if (e.gid > maxOctal(8)) pax.push(paxRecord("gid", String(e.gid)));
  const header = ustarHeader(asciiPrefix(name, 100), {
    type: e.type,
    mode: e.mode & 0o7777,
    uid: e.uid,
    gid: e.gid,
    size,
    linkname: asciiPrefix(linkname, 100),
  });
  if (pax.length === 0) return header;
  const records = Buffer.from(pax.join(""));
  const base = e.path.split("/").at(-1) ?? "";
  const paxName = asciiPrefix(`PaxHeaders.0/${base}`, 100);
  return Buffer.concat([
    ustarHeader(paxName, { type: "pax", mode: 0o644, uid: 0, gid: 0, size: records.length, linkname: "" }),
    records,
    padding(records.length),
    header,
  ]);
}

/** The longest prefix of `s` that is printable ASCII and at most `max` bytes (pax carries the full value). */
function asciiPrefix(s: string, max: number): string {
  let out = "";
  for (const ch of s) {
    if (!/^[\x20-\x7e]$/.test(ch) || out.length + 1 > max) break;
    out += ch;
  }
  return out;
}

function entrySize(e: TarEntry): number {
  if (e.data !== undefined) {
    if (e.size !== undefined && e.size !== e.data.length)
      throw new Error(`tar: ${e.path}: size ${e.size} but ${e.data.length} bytes of data`);
    return e.data.length;
  }
  if (e.size === undefined) throw new Error(`tar: ${e.path}: a file needs data or a source with its size`);
  return e.size;
}

/** The archive's bytes, in order: each entry's header and content, then the two zero blocks. Entries must be sorted (sortEntries). */
export async function* tarChunks(entries: Iterable<TarEntry>): AsyncGenerator<Uint8Array> {
  for (const e of entries) {
    yield entryHeader(e);
    if (e.type !== "file") continue;
    const size = entrySize(e);
    if (e.data !== undefined) {
      yield e.data;
    } else if (size > 0) {
      let read = 0;
      for await (const chunk of createReadStream(e.source ?? "")) {
        read += (chunk as Buffer).length;
        if (read > size) break;
        yield chunk as Buffer;
      }
      if (read !== size) throw new Error(`tar: ${e.source ?? e.path} changed while being archived (${read} bytes, expected ${size})`);
    }
    yield padding(size);
  }
  yield ZERO_BLOCK;
  yield ZERO_BLOCK;
}

// ---------------------------------------------------------------------------------------------
// layers

export interface LayerBlob {
  /** of the gzip blob */
  digest: Digest;
  /** of the uncompressed tar (the config's rootfs.diff_ids) */
  diffId: Digest;
  /** of the gzip blob, in bytes */
  size: number;
}

/** Writes the layer of these entries (sorted here) as a gzip tar to `out`. */
export async function writeLayer(entries: readonly TarEntry[], out: Writable): Promise<LayerBlob> {
  const sorted = sortEntries(entries);
  const diff = createHash("sha256");
  const blob = createHash("sha256");
  let size = 0;
  await pipeline(
    tarChunks(sorted),
    async function* (source: AsyncIterable<Uint8Array>) {
      for await (const chunk of source) {
        diff.update(chunk);
        yield chunk;
      }
    },
    createGzip({ level: GZIP_LEVEL }),
    async function* (source: AsyncIterable<Buffer>) {
      for await (const chunk of source) {
        blob.update(chunk);
        size += chunk.length;
        yield chunk;
      }
    },
    out,
  );
  return { digest: `sha256:${blob.digest("hex")}`, diffId: `sha256:${diff.digest("hex")}`, size };
}

/** The layer in memory (small layers and tests). */
export async function layerBytes(entries: readonly TarEntry[]): Promise<LayerBlob & { bytes: Buffer }> {
  const chunks: Buffer[] = [];
  const sink = new Writable({
    write(chunk: Buffer, _enc, done) {
      chunks.push(chunk);
      done();
    },
  });
  const info = await writeLayer(entries, sink);
  return { ...info, bytes: Buffer.concat(chunks) };
}

// ---------------------------------------------------------------------------------------------
// image config and manifest

/** The runtime part of an image config (OCI image spec, config.md "config"). */
export interface RuntimeConfig {
  User?: string;
  Env?: string[];
  Entrypoint?: string[];
  Cmd?: string[];
  WorkingDir?: string;
  ExposedPorts?: Record<string, Record<string, never>>;
  Labels?: Record<string, string>;
  StopSignal?: string;
}

export interface Layer extends LayerBlob {
  /** the history entry of the layer: what made it */
  createdBy: string;
}

/** An image before it is written: its layers (bottom first), its runtime config and manifest annotations. */
export interface ImageSpec {
  layers: Layer[];
  config: RuntimeConfig;
  annotations?: Record<string, string>;
}

export interface Descriptor {
  mediaType: string;
  digest: Digest;
  size: number;
}

/** An image as pushed: the config and manifest bytes with their digests. */
export interface ImageBlobs {
  spec: ImageSpec;
  config: Buffer;
  configDescriptor: Descriptor;
  manifest: Buffer;
  manifestDigest: Digest;
}

export const DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

/** `base` with each NAME=value of `extra` replacing the variable of that name in place, or appended. */
export function mergeEnv(base: readonly string[] = [], extra: readonly string[] = []): string[] {
  const out = [...base];
  for (const kv of extra) {
    const name = kv.split("=", 1)[0];
    const i = out.findIndex((b) => b.split("=", 1)[0] === name);
    if (i >= 0) out[i] = kv;
    else out.push(kv);
  }
  return out;
}

/** An image on top of `base`: its layers plus these, its runtime config overridden field by field (Env merged). */
export function extendImage(
  base: ImageSpec,
  add: { layers: Layer[]; config?: RuntimeConfig; annotations?: Record<string, string> },
): ImageSpec {
  const config: RuntimeConfig = { ...base.config, ...add.config };
  if (base.config.Env || add.config?.Env) config.Env = mergeEnv(base.config.Env, add.config?.Env);
  // a new Entrypoint resets the base's Cmd, as a Dockerfile's ENTRYPOINT does
  if (add.config?.Entrypoint && !add.config.Cmd) delete config.Cmd;
  return { layers: [...base.layers, ...add.layers], config, ...(add.annotations ? { annotations: add.annotations } : {}) };
}

/** The image config JSON (OCI image spec, config.md) of linux/amd64. */
export function imageConfig(spec: ImageSpec): Buffer {
  return Buffer.from(
    canonicalJson({
      architecture: "amd64",
      os: "linux",
      config: spec.config,
      rootfs: { type: "layers", diff_ids: spec.layers.map((l) => l.diffId) },
      history: spec.layers.map((l) => ({ created: new Date(LAYER_MTIME * 1000).toISOString(), created_by: l.createdBy })),
    }),
  );
}

/** The image manifest JSON (OCI image spec, manifest.md) of a config and the spec's layers. */
export function imageManifest(spec: ImageSpec, config: Descriptor): Buffer {
  return Buffer.from(
    canonicalJson({
      schemaVersion: 2,
      mediaType: MEDIA_TYPE.manifest,
      config,
      layers: spec.layers.map((l): Descriptor => ({ mediaType: MEDIA_TYPE.layer, digest: l.digest, size: l.size })),
      ...(spec.annotations && Object.keys(spec.annotations).length > 0 ? { annotations: spec.annotations } : {}),
    }),
  );
}

export function imageBlobs(spec: ImageSpec): ImageBlobs {
  const config = imageConfig(spec);
  const configDescriptor: Descriptor = { mediaType: MEDIA_TYPE.config, digest: sha256(config), size: config.length };
  const manifest = imageManifest(spec, configDescriptor);
  return { spec, config, configDescriptor, manifest, manifestDigest: sha256(manifest) };
}

/** Compressed size of the image: its layers, config and manifest. */
export function imageSize(image: ImageBlobs): number {
  return image.spec.layers.reduce((n, l) => n + l.size, 0) + image.config.length + image.manifest.length;
}
