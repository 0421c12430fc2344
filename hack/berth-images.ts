// Berth's own images, berth/berth-api, berth/berth-operator and berth/berth-builder (the build Jobs'
// program, docs/builds.md), and the base images berth/python and berth/go that detected Python and
// Go apps are built on, all built by BuildKit from the repository's Dockerfile (one target each) into the local
// registry (docs/images.md).
//
// Usage: node hack/berth-images.ts build --registry 127.0.0.1:PORT [--addr unix:///...sock] [--json] [--progress]
//   build   builds what the registry lacks and prints the references, one a line: berth-api's,
//           berth-operator's, berth-builder's, berth/python's, berth/go's (--json: with digests and
//           whether each was built; the base images are also tagged v1). --addr
//           defaults to $BERTH_BUILDKIT_ADDR (hack/cluster env); the base berth/node:v1 is built
//           and pushed first when the registry lacks it.
//   tags    prints each image's content tag without building (no buildkitd needed)
//
// An image's tag is a content hash of everything it is built from: the Dockerfile and
// .dockerignore, every path its target's stages COPY from the build context (read from the
// Dockerfile itself: package.json and the lock, kube/, crds/, the toolkit, and api/ or operator/),
// npm's version and the base image's digest (and what named contexts bring: buildctl's version, the
// guard classifier's digest, Go's version). A tag the registry
// already has is not built again (a HEAD per image), so a second run takes well under a second;
// a changed file rebuilds only from its COPY on (BuildKit's cache under the cluster's directory
// keeps `npm ci` as long as package.json and the lock are the same).
import { execFile, execFileSync } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import { chmod, copyFile, lstat, mkdtemp, readdir, readFile, readlink, rename, rm } from "node:fs/promises";
import { join } from "node:path";
import { tmpdir } from "node:os";
import { parseArgs } from "node:util";
import { buildBase, defaultCacheDir, IMAGES, ImageCache, npmPackageDir, pushImages, root } from "./images.ts";
import type { Digest } from "./lib/oci.ts";
import { canonicalJson, sha256 } from "./lib/oci.ts";
import { binPath, pinned } from "./lib/pinned.ts";
import { guardModelDir } from "./guard-model.ts";
import { buildConsole } from "./console.ts";
import { Registry } from "./lib/registry.ts";

/** Bump when the way the images are built changes without a change to the files hashed. */
export const BERTH_RECIPE = 1;
/** npm for `npm ci` in the build stage (berth/node has none): the npm registry's `npm` package. */
export const NPM_VERSION = "11.19.1";

export const BERTH_IMAGES = {
  api: { name: "berth/berth-api", target: "berth-api", code: "api", alias: undefined },
  operator: { name: "berth/berth-operator", target: "berth-operator", code: "operator", alias: undefined },
  builder: { name: "berth/berth-builder", target: "berth-builder", code: "operator/builder", alias: undefined },
  /** a base image, not a process of Berth's: also tagged `v1`, the tag the builder's configuration names */
  python: { name: "berth/python", target: "berth-python", code: undefined, alias: "v1" },
  go: { name: "berth/go", target: "berth-go", code: undefined, alias: "v1" },
} as const;
export type Component = keyof typeof BERTH_IMAGES;
export const COMPONENTS = Object.keys(BERTH_IMAGES) as Component[];

/** The instructions of a Dockerfile: continuation lines joined, comments and blank lines dropped. */
function instructions(text: string): { keyword: string; args: string }[] {
  const out: { keyword: string; args: string }[] = [];
  let current = "";
  for (const line of text.split("\n")) {
    if (/^\s*#/.test(line)) continue;
    const continued = /\\\s*$/.test(line);
    current += `${continued ? line.replace(/\\\s*$/, "") : line} `;
    if (continued) continue;
    const m = /^\s*(\w+)\s+(.*?)\s*$/.exec(current);
    if (m) out.push({ keyword: m[1]!.toUpperCase(), args: m[2]! });
    current = "";
  }
  return out;
}

/** An instruction's words, its --flags apart (exec form: a JSON array). */
function words(args: string): { flags: Map<string, string>; rest: string[] } {
  const flags = new Map<string, string>();
  let rest = args;
  for (let m = /^--([\w-]+)(?:=(\S*))?\s*/.exec(rest); m; m = /^--([\w-]+)(?:=(\S*))?\s*/.exec(rest)) {
    flags.set(m[1]!, m[2] ?? "");
    rest = rest.slice(m[0].length);
  }
  return { flags, rest: rest.startsWith("[") ? (JSON.parse(rest) as string[]) : rest.split(/\s+/).filter(Boolean) };
}

/** "./toolkit/src/" -> "toolkit/src"; "./" -> "." */
const contextPath = (p: string): string => p.replace(/^(\.\/)+/, "").replace(/\/+$/, "") || ".";

/**
 * The build-context paths a Dockerfile's target is built from: the sources of every COPY and ADD
 * without --from (and every RUN --mount of type bind without from=) in the target's stage and in
 * the stages it is built on (FROM <stage>, COPY --from=<stage>, RUN --mount=...,from=<stage>).
 * Named contexts and images are not the build context, so not paths. Sorted, without a path under
 * another one. Throws on what a path cannot name here: a glob, a variable, an unknown target.
 */
export function dockerfileInputs(text: string, target: string): string[] {
  const stages: { name: string; from: string; paths: string[]; uses: string[] }[] = [];
  for (const { keyword, args } of instructions(text)) {
    if (keyword === "FROM") {
      const { rest } = words(args);
      stages.push({ name: (rest[2] ?? String(stages.length)).toLowerCase(), from: rest[0]!.toLowerCase(), paths: [], uses: [] });
      continue;
    }
    const stage = stages.at(-1);
    if (!stage) continue;
    if (keyword === "COPY" || keyword === "ADD") {
      const { flags, rest } = words(args);
      if (flags.has("from")) {
        stage.uses.push(flags.get("from")!.toLowerCase());
        continue;
      }
      stage.paths.push(...rest.slice(0, -1).filter((p) => !/^(https?|git):\/\/|^git@/.test(p)));
    } else if (keyword === "RUN") {
      for (const m of args.matchAll(/--mount=(\S+)/g)) {
        const opts = new Map(m[1]!.split(",").map((kv) => [kv.split("=")[0]!, kv.slice(kv.indexOf("=") + 1)] as const));
        if (opts.has("from")) stage.uses.push(opts.get("from")!.toLowerCase());
        else if ((opts.get("type") ?? "bind") === "bind") stage.paths.push(opts.get("source") ?? opts.get("src") ?? ".");
      }
    }
  }
  const byName = new Map(stages.map((s) => [s.name, s]));
  if (!byName.has(target.toLowerCase())) throw new Error(`the Dockerfile has no stage ${target}`);
  const paths = new Set<string>();
  const seen = new Set<string>();
  const visit = (name: string): void => {
    const stage = byName.get(name);
    if (!stage || seen.has(name)) return; // an image or a named context
    seen.add(name);
    for (const p of stage.paths) {
      if (/[*?[$]/.test(p)) throw new Error(`COPY ${p}: a glob or a variable names no path the content tag can hash`);
      paths.add(contextPath(p));
    }
    for (const used of [stage.from, ...stage.uses]) visit(used);
  };
  visit(target.toLowerCase());
  const sorted = [...paths].sort();
  return sorted.filter((p) => !sorted.some((q) => q !== p && (q === "." || p.startsWith(`${q}/`))));
}

/** What an image is built from: the Dockerfile, .dockerignore and its target's build-context paths. */
export function imageInputs(dockerfile: string, target: string): string[] {
  return ["Dockerfile", ".dockerignore", ...dockerfileInputs(dockerfile, target)];
}

/** Left out of the build context by .dockerignore, so left out of the hash too. */
export const skipped = (name: string): boolean => name === "node_modules" || name.endsWith(".test.ts") || name.endsWith(".tmp.ts");

/** Every file under the given paths (relative to `dir`), sorted, with its mode's executable bit and content hash. */
export async function fileDigests(dir: string, paths: readonly string[]): Promise<[string, string][]> {
  const out: [string, string][] = [];
  const walk = async (rel: string): Promise<void> => {
    const abs = join(dir, rel);
    const st = await lstat(abs);
    if (st.isDirectory()) {
      for (const name of (await readdir(abs)).sort()) if (!skipped(name)) await walk(rel === "." ? name : `${rel}/${name}`);
    } else if (st.isFile()) {
      out.push([rel, `${st.mode & 0o111 ? "x" : "-"}${sha256(await readFile(abs))}`]);
    } else if (st.isSymbolicLink()) {
      out.push([rel, `l${await readlink(abs)}`]);
    }
  };
  for (const p of paths) await walk(p);
  return out.sort((a, b) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0));
}

/**
 * The content tag of a component's image: 12 hex digits of a hash of all its inputs. `buildctl`:
 * the version of the buildctl binary the builder image carries (a named context, not a file of
 * the repository); absent for the other images, whose tags are as before it existed.
 */
export function inputsTag(inputs: { files: readonly [string, string][]; baseDigest: string; npmVersion?: string } & NamedInputs): string {
  return sha256(
    canonicalJson({
      recipe: BERTH_RECIPE,
      npm: inputs.npmVersion ?? NPM_VERSION,
      base: inputs.baseDigest,
      files: inputs.files,
      ...(inputs.buildctl ? { buildctl: inputs.buildctl } : {}),
      ...(inputs.guardModel ? { guardModel: inputs.guardModel } : {}),
      ...(inputs.console ? { console: inputs.console } : {}),
      ...(inputs.go ? { go: inputs.go } : {}),
    }),
  ).slice(7, 19);
}

/** What a target's named contexts bring, as tag inputs. */
export interface NamedInputs {
  buildctl?: string;
  guardModel?: string;
  /** The console's built files (hack/console.ts), as a digest of their names and bytes. */
  console?: string;
  go?: string;
}

/** Where the API image's console is built (the named context `console`): apart from ./hack/up's .local/console. */
export const IMAGE_CONSOLE_DIR = join(root, ".local/console-image");

/** A digest of a built console: every file's path and SHA-256, from its build.json and bytes. */
function consoleDigest(dir: string): string {
  if (!existsSync(join(dir, "index.html"))) throw new Error(`${dir} holds no built console: buildBerthImages builds it first`);
  const report = JSON.parse(readFileSync(join(dir, "build.json"), "utf8")) as { files: { path: string }[] };
  return sha256(canonicalJson(report.files.map((f) => [f.path, sha256(readFileSync(join(dir, f.path)))])));
}

let toolchain: { root: string; version: string } | undefined;

/** This machine's Go toolchain, the named context `go` of berth/go: its GOROOT and version (go1.x.y); `go env` runs once. */
export function goToolchain(): { root: string; version: string } {
  if (toolchain) return toolchain;
  let out: string;
  try {
    out = execFileSync("go", ["env", "GOROOT", "GOVERSION"], { encoding: "utf8", env: { ...process.env, GOTOOLCHAIN: "local" } });
  } catch (err) {
    throw new Error("berth/go is built from this machine's Go toolchain, and `go env` failed: install Go (the hack scripts need it too)", {
      cause: err,
    });
  }
  const [goroot, version] = out.trim().split("\n");
  if (!goroot || !version || !existsSync(join(goroot, "bin/go"))) throw new Error(`go env gave no usable GOROOT (${JSON.stringify(out)})`);
  toolchain = { root: goroot, version };
  return toolchain;
}

/**
 * The named contexts a component's target copies from that are not files of the repository, as tag
 * inputs: buildctl's version for the builder, the guard classifier's graph digest (model.json's
 * sha256, built first when missing) for the API, the Go toolchain's version for berth/go.
 */
export function namedInputs(component: Component): NamedInputs {
  if (component === "builder") return { buildctl: pinned("BUILDKIT_VERSION") };
  if (component === "go") return { go: goToolchain().version };
  if (component === "api")
    return {
      guardModel: (JSON.parse(readFileSync(join(guardModelDir(), "model.json"), "utf8")) as { sha256: string }).sha256,
      console: consoleDigest(IMAGE_CONSOLE_DIR),
    };
  return {};
}

/** Whether `file` (relative to the context) is `input` or under it. */
const within = (file: string, input: string): boolean => input === "." || file === input || file.startsWith(`${input}/`);

/** The content tags of the components' images; the files they share are read and hashed once. */
export async function componentTags(
  baseDigest: string,
  components: readonly Component[] = COMPONENTS,
  dir = root,
): Promise<Record<Component, string>> {
  // The API's image carries the console, built here (a fraction of a second) so its digest is in the tag.
  if (components.includes("api")) await buildConsole(IMAGE_CONSOLE_DIR);
  const dockerfile = await readFile(join(dir, "Dockerfile"), "utf8");
  const inputs = components.map((c) => [c, imageInputs(dockerfile, BERTH_IMAGES[c].target)] as const);
  const all = [...new Set(inputs.flatMap(([, paths]) => paths))].sort();
  const files = await fileDigests(
    dir,
    all.filter((p) => !all.some((q) => q !== p && within(p, q))),
  );
  return Object.fromEntries(
    inputs.map(([c, paths]) => [
      c,
      inputsTag({ files: files.filter(([f]) => paths.some((p) => within(f, p))), baseDigest, ...namedInputs(c) }),
    ]),
  ) as Record<Component, string>;
}

export async function componentTag(component: Component, baseDigest: string, dir = root): Promise<string> {
  return (await componentTags(baseDigest, [component], dir))[component];
}

export interface BerthImage {
  component: Component;
  /** registry/name:tag */
  reference: string;
  repository: string;
  tag: string;
  digest: Digest;
  /** false: the registry had this tag already */
  built: boolean;
  seconds: number;
}

export interface BuildOptions {
  registry: string;
  /** buildkitd's address (unix:///...); default $BERTH_BUILDKIT_ADDR */
  addr?: string;
  components?: readonly Component[];
  /** BuildKit's progress on stderr */
  progress?: boolean;
  /** the image cache of hack/images.ts (npm's package, the base's layers) */
  cacheDir?: string;
  log?: (line: string) => void;
}

/** The base image's digest in the registry, pushing berth/node (and what it is built on) when missing. */
async function baseDigest(registry: Registry, o: BuildOptions, log: (l: string) => void): Promise<Digest> {
  const have = await registry.manifestDigest(IMAGES.node.name, IMAGES.node.tag);
  if (have) return have;
  log(`${registry.host} has no ${IMAGES.node.name}:${IMAGES.node.tag}: building the base images`);
  const b = await buildBase(o.cacheDir ? { cacheDir: o.cacheDir } : {});
  await pushImages(registry.host, [b.pause, b.debian, b.node], o.cacheDir ? { cacheDir: o.cacheDir } : {});
  const d = await registry.manifestDigest(IMAGES.node.name, IMAGES.node.tag);
  if (!d) throw new Error(`${IMAGES.node.name}:${IMAGES.node.tag} is still missing from ${registry.host} after the push`);
  return d;
}

/**
 * buildctl for the builder image, alone in a directory of the cache (`buildctl-<version>/buildctl`):
 * the named build context `buildctl` (a copy of `bin_path buildctl`, made once), never the whole bin/.
 */
export async function buildctlContext(cacheDir: string): Promise<string> {
  const dir = join(cacheDir, `buildctl-${pinned("BUILDKIT_VERSION")}`);
  if (existsSync(join(dir, "buildctl"))) return dir;
  const from = binPath("buildctl");
  if (!existsSync(from)) throw new Error(`${from} is missing: hack/binaries builds it`);
  const tmp = await mkdtemp(join(cacheDir, "buildctl-tmp-"));
  await copyFile(from, join(tmp, "buildctl"));
  await chmod(join(tmp, "buildctl"), 0o755);
  await rename(tmp, dir).catch(async () => {
    await rm(tmp, { recursive: true, force: true });
  }); // a concurrent build put it there first
  return dir;
}

/** BuildKit's `name=` of an image output: the content tag, and the alias tag when the image has one (quoted: a list). */
export function outputNames(registry: string, component: Component, tag: string): string {
  const { name, alias } = BERTH_IMAGES[component];
  return alias ? `"name=${registry}/${name}:${tag},${registry}/${name}:${alias}"` : `name=${registry}/${name}:${tag}`;
}

/** One `buildctl build` of a target, pushed as registry/name:tag; resolves with the manifest's digest. */
async function buildctl(
  o: BuildOptions & { addr: string },
  component: Component,
  tag: string,
  base: string,
  debian: string,
  npmDir: string,
  buildctlDir: string,
): Promise<Digest> {
  const img = BERTH_IMAGES[component];
  const tmp = await mkdtemp(join(tmpdir(), "berth-buildctl-"));
  try {
    const metadata = join(tmp, "metadata.json");
    const ca = process.env.NODE_EXTRA_CA_CERTS;
    const args = [
      "--addr",
      o.addr,
      "build",
      "--frontend",
      "dockerfile.v0",
      "--progress",
      "plain",
      "--local",
      `context=${root}`,
      "--local",
      `dockerfile=${root}`,
      "--local",
      `npm=${npmDir}`,
      "--local",
      `buildctl=${buildctlDir}`,
      "--opt",
      `target=${img.target}`,
      "--opt",
      `build-arg:BASE=${base}`,
      "--opt",
      `build-arg:DEBIAN=${debian}`,
      "--opt",
      "context:npm=local:npm",
      "--opt",
      "context:buildctl=local:buildctl",
      // the classifier's files, which only the API's target copies (and whose digest is in its tag)
      ...(component === "api" ? ["--local", `guard-model=${guardModelDir()}`, "--opt", "context:guard-model=local:guard-model"] : []),
      // the console's built files, which only the API's target copies (their digest is in its tag)
      ...(component === "api" ? ["--local", `console=${IMAGE_CONSOLE_DIR}`, "--opt", "context:console=local:console"] : []),
      // the Go toolchain, which only berth/go copies (its version is in the tag)
      ...(component === "go" ? ["--local", `go=${goToolchain().root}`, "--opt", "context:go=local:go"] : []),
      ...(ca && existsSync(ca) ? ["--secret", `id=npm-ca,src=${ca}`] : []),
      "--output",
      `type=image,${outputNames(o.registry, component, tag)},push=true,registry.insecure=true,oci-mediatypes=true`,
      "--metadata-file",
      metadata,
    ];
    await new Promise<void>((resolve, reject) => {
      const child = execFile(binPath("buildctl"), args, { maxBuffer: 256 * 1024 * 1024, cwd: root }, (err, _stdout, stderr) => {
        if (err)
          reject(
            new Error(`buildctl build --opt target=${img.target} failed:\n${stderr.trim().split("\n").slice(-25).join("\n")}`, {
              cause: err,
            }),
          );
        else resolve();
      });
      if (o.progress) child.stderr?.pipe(process.stderr);
    });
    const meta = JSON.parse(readFileSync(metadata, "utf8")) as Record<string, unknown>;
    const digest = meta["containerimage.digest"];
    if (typeof digest !== "string" || !digest.startsWith("sha256:")) throw new Error(`buildctl wrote no image digest for ${img.target}`);
    return digest as Digest;
  } finally {
    await rm(tmp, { recursive: true, force: true });
  }
}

/** Builds and pushes the images the registry lacks (both targets at once: BuildKit shares their stages). */
export async function buildBerthImages(o: BuildOptions): Promise<BerthImage[]> {
  const log = o.log ?? ((line: string) => process.stderr.write(`[berth-images] ${line}\n`));
  const registry = new Registry(o.registry);
  await registry.ping();
  const base = await baseDigest(registry, o, log);
  const components = o.components ?? COMPONENTS;
  const tags = await componentTags(base, components);
  const wanted = components.map((c) => ({ c, tag: tags[c] }));
  let npm: Promise<string> | undefined; // fetched once, and only when something is built
  let buildctlDir: Promise<string> | undefined;
  const debian = await registry.manifestDigest(IMAGES.debian.name, IMAGES.debian.tag);
  if (!debian)
    throw new Error(
      `${registry.host} has no ${IMAGES.debian.name}:${IMAGES.debian.tag} (node hack/images.ts build-base --registry ${registry.host})`,
    );
  return Promise.all(
    wanted.map(async ({ c, tag }) => {
      const t0 = performance.now();
      const name = BERTH_IMAGES[c].name;
      const have = await registry.manifestDigest(name, tag);
      let digest = have;
      if (!digest) {
        const addr = o.addr ?? process.env.BERTH_BUILDKIT_ADDR;
        if (!addr)
          throw new Error(
            'no buildkitd address: pass --addr or set BERTH_BUILDKIT_ADDR (eval "$(./hack/cluster env)" with BERTH_REAL_NODE=1)',
          );
        npm ??= npmPackageDir(new ImageCache(o.cacheDir ?? defaultCacheDir()), "npm", NPM_VERSION, "bin/npm-cli.js", log);
        buildctlDir ??= buildctlContext(o.cacheDir ?? defaultCacheDir());
        digest = await buildctl(
          { ...o, addr },
          c,
          tag,
          `${o.registry}/${IMAGES.node.name}:${IMAGES.node.tag}@${base}`,
          `${o.registry}/${IMAGES.debian.name}:${IMAGES.debian.tag}@${debian}`,
          await npm,
          await buildctlDir,
        );
      }
      const seconds = (performance.now() - t0) / 1000;
      log(`${o.registry}/${name}:${tag}@${digest}: ${have ? "up to date in the registry" : `built and pushed in ${seconds.toFixed(1)} s`}`);
      return {
        component: c,
        reference: `${o.registry}/${name}:${tag}`,
        repository: `${o.registry}/${name}`,
        tag,
        digest,
        built: !have,
        seconds,
      };
    }),
  );
}

async function main(argv: string[]): Promise<number> {
  const { values, positionals } = parseArgs({
    args: argv,
    allowPositionals: true,
    options: {
      registry: { type: "string" },
      addr: { type: "string" },
      json: { type: "boolean" },
      progress: { type: "boolean" },
      cache: { type: "string" },
      help: { type: "boolean", short: "h" },
    },
  });
  const usage = () =>
    process.stderr.write(
      readFileSync(import.meta.filename, "utf8")
        .split("\n")
        .filter((l) => l.startsWith("//"))
        .slice(0, 12)
        .map((l) => l.slice(3))
        .join("\n") + "\n",
    );
  const command = positionals[0];
  if (command === "tags") {
    if (!values.registry) {
      usage();
      return 2;
    }
    const registry = new Registry(values.registry);
    const base = await registry.manifestDigest(IMAGES.node.name, IMAGES.node.tag);
    if (!base)
      throw new Error(
        `${values.registry} has no ${IMAGES.node.name}:${IMAGES.node.tag} (node hack/images.ts build-base --registry ${values.registry})`,
      );
    const tags = await componentTags(base);
    for (const c of COMPONENTS) process.stdout.write(`${values.registry}/${BERTH_IMAGES[c].name}:${tags[c]}\n`);
    return 0;
  }
  if (command !== "build" || !values.registry) {
    usage();
    return command === undefined || values.help ? 0 : 2;
  }
  const t0 = performance.now();
  const images = await buildBerthImages({
    registry: values.registry,
    ...(values.addr ? { addr: values.addr } : {}),
    ...(values.cache ? { cacheDir: values.cache } : {}),
    progress: values.progress ?? false,
  });
  process.stderr.write(`[berth-images] done in ${((performance.now() - t0) / 1000).toFixed(1)} s\n`);
  process.stdout.write(values.json ? JSON.stringify(images, null, 2) + "\n" : images.map((i) => i.reference).join("\n") + "\n");
  return 0;
}

if (import.meta.main) {
  main(process.argv.slice(2)).then(
    (code) => {
      process.exitCode = code;
    },
    (err: unknown) => {
      process.stderr.write(`[berth-images] error: ${err instanceof Error ? err.message : String(err)}\n`);
      process.exitCode = 1;
    },
  );
}
