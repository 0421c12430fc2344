// samples/hello run on the host as its image runs it (hack/images.ts): its files in a temporary
// directory with node_modules beside them, the image's own (sampleDeps: @berth/toolkit installed
// from the tarball of `npm pack`, and the lock's packages; installed once per key into Berth's
// cache, by ./hack/test's setup before the tests). The repository's samples/hello has no
// node_modules: it imports the toolkit by its package's names, which resolve only where the
// package is installed, as in a user's service. A copy rather than a link in the working tree: no
// test writes into the repository, and no node_modules installed there by hand is used or replaced.
import { cp, mkdtemp, rm, symlink } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { SAMPLE_DIR, sampleDeps } from "../../hack/images.ts";

export interface SampleApp {
  /** the directory: the sample's files and node_modules */
  dir: string;
  /** its entry point, for `node` */
  server: string;
  remove(): Promise<void>;
}

export async function sampleApp(): Promise<SampleApp> {
  const deps = await sampleDeps({ log: () => {} });
  const dir = await mkdtemp(join(tmpdir(), "berth-sample-hello-"));
  await cp(SAMPLE_DIR, dir, { recursive: true, filter: (src) => !/(^|\/)node_modules$/.test(src) && !src.endsWith(".tmp.ts") });
  await symlink(deps.dir, join(dir, "node_modules"));
  return { dir, server: join(dir, "server.ts"), remove: () => rm(dir, { recursive: true, force: true }) };
}
