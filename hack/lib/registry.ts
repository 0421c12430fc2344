// A client of the OCI distribution API (distribution-spec v1.1) for the local registry: plain
// HTTP, loopback only (the registry hack/ runs; docs/images.md). Pushing an image sends only what
// the registry lacks: nothing when the tag already names the same manifest, otherwise each missing
// blob (mounted from another repository of the registry when one has it, else uploaded by a POST
// and a PUT with its digest), then the manifest.
import { readFile } from "node:fs/promises";
import { isIP } from "node:net";
import type { Digest, ImageBlobs } from "./oci.ts";
import { MEDIA_TYPE, sha256 } from "./oci.ts";

export interface PushResult {
  /** host:port/name:tag */
  reference: string;
  digest: Digest;
  /** the registry already had this manifest under this tag: nothing was sent */
  upToDate: boolean;
  blobsUploaded: number;
  bytesUploaded: number;
  blobsMounted: number;
  blobsPresent: number;
}

/** host:port of a loopback address (127.0.0.0/8, ::1, localhost); throws for anything else. */
export function loopbackRegistry(host: string): string {
  const m = /^(\[[0-9a-f:]+\]|[^:/]+):(\d{1,5})$/i.exec(host);
  if (!m) throw new Error(`registry: expected host:port, got ${JSON.stringify(host)}`);
  const name = m[1]!.replace(/^\[|\]$/g, "");
  const loopback = name === "localhost" || (isIP(name) === 4 && name.startsWith("127.")) || name === "::1";
  if (!loopback) throw new Error(`registry: ${host} is not a loopback address (the local registry is plain HTTP on loopback only)`);
  return host;
}

/** The URL of a Location header, which may be relative to the registry, with one more query parameter. */
export function uploadUrl(base: string, location: string, params: Record<string, string>): string {
  const url = new URL(location, base);
  for (const [k, v] of Object.entries(params)) url.searchParams.set(k, v);
  return url.toString();
}

export class RegistryError extends Error {
  readonly status: number;
  constructor(message: string, status: number) {
    super(message);
    this.name = "RegistryError";
    this.status = status;
  }
}

export class Registry {
  readonly host: string;
  readonly #base: string;

  constructor(host: string) {
    this.host = loopbackRegistry(host);
    this.#base = `http://${host}`;
  }

  async #request(method: string, path: string, init: { headers?: Record<string, string>; body?: Uint8Array } = {}): Promise<Response> {
    const url = path.startsWith("http://") ? path : `${this.#base}${path}`;
    return fetch(url, { method, headers: init.headers ?? {}, ...(init.body ? { body: init.body } : {}), redirect: "follow" });
  }

  async #fail(res: Response, what: string): Promise<never> {
    const text = await res.text().catch(() => "");
    throw new RegistryError(`registry ${this.host}: ${what}: ${res.status} ${text.slice(0, 500)}`, res.status);
  }

  /** Resolves when the registry answers the API's base endpoint. */
  async ping(): Promise<void> {
    const res = await this.#request("GET", "/v2/");
    if (res.status !== 200) await this.#fail(res, "GET /v2/");
    await res.body?.cancel();
  }

  /** The digest of the manifest `reference` (a tag or digest) of `name`, undefined when there is none. */
  async manifestDigest(name: string, reference: string): Promise<Digest | undefined> {
    const res = await this.#request("HEAD", `/v2/${name}/manifests/${reference}`, {
      headers: { Accept: `${MEDIA_TYPE.manifest}, ${MEDIA_TYPE.index}` },
    });
    if (res.status === 404) return undefined;
    if (res.status !== 200) await this.#fail(res, `HEAD manifest ${name}:${reference}`);
    return (res.headers.get("docker-content-digest") ?? undefined) as Digest | undefined;
  }

  /** The manifest's bytes as stored, with their digest (checked against the registry's). */
  async getManifest(name: string, reference: string): Promise<{ bytes: Buffer; digest: Digest; mediaType: string }> {
    const res = await this.#request("GET", `/v2/${name}/manifests/${reference}`, {
      headers: { Accept: `${MEDIA_TYPE.manifest}, ${MEDIA_TYPE.index}` },
    });
    if (res.status !== 200) await this.#fail(res, `GET manifest ${name}:${reference}`);
    const bytes = Buffer.from(await res.arrayBuffer());
    const digest = sha256(bytes);
    const claimed = res.headers.get("docker-content-digest");
    if (claimed && claimed !== digest)
      throw new Error(`registry ${this.host}: manifest ${name}:${reference} is ${digest}, the registry says ${claimed}`);
    return { bytes, digest, mediaType: res.headers.get("content-type") ?? "" };
  }

  async getBlob(name: string, digest: Digest): Promise<Buffer> {
    const res = await this.#request("GET", `/v2/${name}/blobs/${digest}`);
    if (res.status !== 200) await this.#fail(res, `GET blob ${name}@${digest}`);
    const bytes = Buffer.from(await res.arrayBuffer());
    if (sha256(bytes) !== digest) throw new Error(`registry ${this.host}: blob ${digest} of ${name} has other content`);
    return bytes;
  }

  async hasBlob(name: string, digest: Digest): Promise<boolean> {
    const res = await this.#request("HEAD", `/v2/${name}/blobs/${digest}`);
    if (res.status === 404) return false;
    if (res.status !== 200) await this.#fail(res, `HEAD blob ${name}@${digest}`);
    return true;
  }

  /**
   * Puts a blob into `name`: mounted from the repository `mountFrom` when given and the registry
   * has it there, else uploaded (POST, then PUT with the digest).
   */
  async putBlob(name: string, digest: Digest, content: () => Promise<Uint8Array>, mountFrom?: string): Promise<"mounted" | "uploaded"> {
    const start =
      mountFrom && mountFrom !== name
        ? `/v2/${name}/blobs/uploads/?mount=${encodeURIComponent(digest)}&from=${encodeURIComponent(mountFrom)}`
        : `/v2/${name}/blobs/uploads/`;
    const res = await this.#request("POST", start);
    if (res.status === 201) {
      await res.body?.cancel();
      return "mounted";
    }
    if (res.status !== 202) await this.#fail(res, `POST upload ${name}`);
    await res.body?.cancel();
    const location = res.headers.get("location");
    if (!location) throw new Error(`registry ${this.host}: upload of ${name} without a Location`);
    const body = await content();
    if (sha256(body) !== digest) throw new Error(`blob ${digest} has other content than its digest says`);
    const put = await this.#request("PUT", uploadUrl(this.#base, location, { digest }), {
      headers: { "Content-Type": "application/octet-stream", "Content-Length": String(body.length) },
      body,
    });
    if (put.status !== 201) await this.#fail(put, `PUT blob ${name}@${digest}`);
    await put.body?.cancel();
    return "uploaded";
  }

  /** Puts the manifest under `tag`; returns the digest the registry computed (checked against the bytes'). */
  async putManifest(name: string, tag: string, bytes: Buffer, mediaType: string = MEDIA_TYPE.manifest): Promise<Digest> {
    const res = await this.#request("PUT", `/v2/${name}/manifests/${tag}`, { headers: { "Content-Type": mediaType }, body: bytes });
    if (res.status !== 201) await this.#fail(res, `PUT manifest ${name}:${tag}`);
    await res.body?.cancel();
    const digest = sha256(bytes);
    const claimed = res.headers.get("docker-content-digest");
    if (claimed && claimed !== digest)
      throw new Error(`registry ${this.host}: manifest ${name}:${tag} stored as ${claimed}, expected ${digest}`);
    return digest;
  }

  /**
   * Pushes an image as name:tag. `blob(digest)` gives a layer's bytes (read from the cache only when
   * it is uploaded); `mountFrom` is a repository of this registry that may hold the base layers.
   */
  async pushImage(
    name: string,
    tag: string,
    image: ImageBlobs,
    blob: (digest: Digest) => Promise<Uint8Array>,
    mountFrom?: string,
  ): Promise<PushResult> {
    const result: PushResult = {
      reference: `${this.host}/${name}:${tag}`,
      digest: image.manifestDigest,
      upToDate: false,
      blobsUploaded: 0,
      bytesUploaded: 0,
      blobsMounted: 0,
      blobsPresent: 0,
    };
    if ((await this.manifestDigest(name, tag)) === image.manifestDigest) return { ...result, upToDate: true };
    const blobs: { digest: Digest; size: number; content: () => Promise<Uint8Array> }[] = [
      ...image.spec.layers.map((l) => ({ digest: l.digest, size: l.size, content: () => blob(l.digest) })),
      { digest: image.configDescriptor.digest, size: image.config.length, content: () => Promise.resolve(image.config) },
    ];
    for (const b of blobs) {
      if (await this.hasBlob(name, b.digest)) {
        result.blobsPresent++;
        continue;
      }
      const how = await this.putBlob(name, b.digest, b.content, mountFrom);
      if (how === "mounted") result.blobsMounted++;
      else {
        result.blobsUploaded++;
        result.bytesUploaded += b.size;
      }
    }
    await this.putManifest(name, tag, image.manifest);
    return result;
  }
}

/** Reads a blob file of the cache (helper for pushImage). */
export function fileBlob(path: (digest: Digest) => string): (digest: Digest) => Promise<Uint8Array> {
  return (digest) => readFile(path(digest));
}
