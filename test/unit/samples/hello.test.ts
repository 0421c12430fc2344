// The sample service's pure parts (samples/hello): its configuration, the /burn bound, the /chat
// body, its package.json and lock against the toolkit's package, and how the repository type-checks
// its imports of @berth/toolkit. The service itself runs against the real API
// in test/integration/sample-hello.test.ts.
import test from "ava";
import { existsSync } from "node:fs";
import { readdir, readFile } from "node:fs/promises";
import { join } from "node:path";
import { createServer, request } from "node:http";
import ts from "typescript";
import {
  burn,
  burnMillis,
  chatRequest,
  DEFAULT_BURN_MS,
  helloHandler,
  MAX_BURN_MS,
  MAX_MESSAGE_CHARS,
  shownVariable,
} from "../../../samples/hello/app.ts";
import { SAMPLE_TOOLKIT_SPEC } from "../../../hack/images.ts";
import { loadConfig } from "../../../samples/hello/config.ts";

test("configuration: PORT 8080, all interfaces and version 1 by default; invalid values are refused", (t) => {
  t.deepEqual(loadConfig({}), { port: 8080, host: "0.0.0.0", version: "1", shown: {} });
  t.deepEqual(loadConfig({ PORT: "9000", HOST: "127.0.0.1", HELLO_VERSION: "2", UNRELATED: "x" }), {
    port: 9000,
    host: "127.0.0.1",
    version: "2",
    shown: {},
  });
  t.deepEqual(loadConfig({ PORT: "", HELLO_VERSION: "" }), { port: 8080, host: "0.0.0.0", version: "1", shown: {} }, "empty is unset");
  t.throws(() => loadConfig({ PORT: "eighty" }));
  t.throws(() => loadConfig({ PORT: "70000" }));
});

test("GET /env/<name> shows SAMPLE_* variables only: the configuration keeps no other, and the handler answers 404 for anything else", async (t) => {
  const { shown } = loadConfig({ SAMPLE_GREETING: "hej", SAMPLE_EMPTY: "", GOVDB_CONNECTION: "govdb://gov_sk_x@h/db", PATH: "/bin" });
  t.deepEqual(shown, { SAMPLE_GREETING: "hej", SAMPLE_EMPTY: "" });
  t.is(shownVariable(shown, "SAMPLE_GREETING"), "hej");
  t.is(shownVariable(shown, "SAMPLE_EMPTY"), "", "an empty value is a value");
  t.is(shownVariable(shown, "SAMPLE_MISSING"), undefined);
  t.is(shownVariable({ ...shown, PATH: "/bin" }, "PATH"), undefined, "never another name, even if given");
  t.is(shownVariable(shown, "constructor"), undefined);

  const server = createServer(
    helloHandler({ version: "1", chat: { unavailable: "test" }, shown: { ...shown, GOVDB_CONNECTION: "secret" } }),
  );
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  t.teardown(() => server.close());
  const port = (server.address() as { port: number }).port;
  const get = (path: string) =>
    new Promise<{ status: number; text: string }>((resolve, reject) => {
      request({ host: "127.0.0.1", port, path }, (res) => {
        let text = "";
        res
          .setEncoding("utf8")
          .on("data", (d: string) => {
            text += d;
          })
          .on("end", () => resolve({ status: res.statusCode ?? 0, text }));
      })
        .on("error", reject)
        .end();
    });
  t.deepEqual(await get("/env/SAMPLE_GREETING"), { status: 200, text: "hej" });
  t.is((await get("/env/SAMPLE_MISSING")).status, 404);
  const gov = await get("/env/GOVDB_CONNECTION");
  t.is(gov.status, 404);
  t.false(gov.text.includes("secret"));
  t.is((await get("/env/%E0%A4%A")).status, 404, "a malformed name is just not found");
  t.is((await get("/env/SAMPLE_GREETING/x")).status, 404);
});

test("/burn's ms: a default, a bound of 10 s, integers only", (t) => {
  t.is(burnMillis(null), DEFAULT_BURN_MS);
  t.is(burnMillis(""), DEFAULT_BURN_MS);
  t.is(burnMillis("0"), 0);
  t.is(burnMillis("2500"), 2500);
  t.is(burnMillis("10000"), MAX_BURN_MS);
  t.is(burnMillis("600000"), MAX_BURN_MS);
  for (const bad of ["-1", "1.5", "1e3", "abc", "0x10", "9999999999"]) t.is(burnMillis(bad), undefined, bad);
});

test("burn keeps the CPU busy for the time asked, and lets other work run between slices", async (t) => {
  // No wall-clock bounds (the machine may be shared): the loop's own utilisation tells busy from
  // sleeping whatever the scheduler does, and timers must run between slices.
  const elu0 = performance.eventLoopUtilization();
  let ticks = 0;
  const timer = setInterval(() => {
    ticks++;
  }, 5);
  const took = await burn(200);
  clearInterval(timer);
  const busy = performance.eventLoopUtilization(elu0).utilization;
  t.true(took >= 200, `took ${took} ms`);
  t.true(busy > 0.5, `the event loop was busy ${Math.round(busy * 100)}% of the burn, not waiting`);
  t.true(ticks >= 1, `timers ran during the burn (${ticks})`);
});

test("/chat's body: a non-empty message of bounded length and an optional sessionId", (t) => {
  t.deepEqual(chatRequest({ message: "hi" }), { message: "hi" });
  t.deepEqual(chatRequest({ message: "hi", sessionId: "s1" }), { message: "hi", sessionId: "s1" });
  for (const bad of [
    null,
    [],
    "hi",
    {},
    { message: "" },
    { message: "  " },
    { message: 3 },
    { message: "x".repeat(MAX_MESSAGE_CHARS + 1) },
    { message: "hi", sessionId: "" },
    { message: "hi", sessionId: 7 },
  ]) {
    t.true("problem" in chatRequest(bad), JSON.stringify(bad)?.slice(0, 40));
  }
});

const root = join(import.meta.dirname, "../../..");

test("the sample's dependencies: the toolkit's package (a copy of ../../toolkit), the root's @langchain/core and zod; its lock matches", async (t) => {
  const read = async (p: string) =>
    JSON.parse(await readFile(join(root, p), "utf8")) as {
      version?: string;
      dependencies?: Record<string, string>;
      devDependencies?: Record<string, string>;
      packages?: Record<string, { dependencies?: Record<string, string>; version?: string; resolved?: string; link?: boolean }>;
    };
  const sample = await read("samples/hello/package.json");
  const toolkit = await read("toolkit/package.json");
  const rootPkg = await read("package.json");
  const lock = await read("samples/hello/package-lock.json");
  t.deepEqual(sample.dependencies, {
    "@berth/toolkit": SAMPLE_TOOLKIT_SPEC,
    "@langchain/core": rootPkg.devDependencies!["@langchain/core"],
    zod: rootPkg.dependencies!.zod,
  });
  // installed as a package (.npmrc: install-links), not a link into the repository
  t.regex(await readFile(join(root, "samples/hello/.npmrc"), "utf8"), /^install-links=true$/m);
  const run = "run npm install --package-lock-only in samples/hello";
  t.deepEqual(lock.packages![""]!.dependencies, sample.dependencies, run);
  t.like(lock.packages!["node_modules/@berth/toolkit"], { version: toolkit.version, resolved: SAMPLE_TOOLKIT_SPEC }, run);
  t.false(lock.packages!["node_modules/@berth/toolkit"]!.link ?? false, run);
  t.deepEqual(lock.packages!["node_modules/@berth/toolkit"]!.dependencies, toolkit.dependencies, run);
  // the image runs the toolkit with the versions of its dependencies the repository tests it with
  for (const name of Object.keys(toolkit.dependencies!))
    t.is(lock.packages![`node_modules/${name}`]?.version, rootPkg.dependencies![name], `${name} (${run})`);
  t.is(lock.packages!["node_modules/@langchain/core"]?.version, rootPkg.devDependencies!["@langchain/core"]);
});

test("the type-check resolves the toolkit's package names to the sources of exactly the entry points it exports", async (t) => {
  const toolkit = JSON.parse(await readFile(join(root, "toolkit/package.json"), "utf8")) as {
    exports: Record<string, { import: { default: string } } | string>;
  };
  // tsconfig.json has comments: read with TypeScript's own parser
  const config = ts.readConfigFile(join(root, "tsconfig.json"), (p) => ts.sys.readFile(p));
  const paths = (config.config as { compilerOptions: { paths: Record<string, string[]> } }).compilerOptions.paths;
  const expected = Object.fromEntries(
    Object.entries(toolkit.exports)
      .filter(([entry]) => entry !== "./package.json")
      .map(([entry, target]) => {
        const js = typeof target === "string" ? target : target.import.default;
        return [`@berth/toolkit${entry.slice(1)}`, [js.replace(/^\.\/dist\//, "./toolkit/src/").replace(/\.js$/, ".ts")]];
      }),
  );
  t.deepEqual(paths, expected);
  for (const [, [source]] of Object.entries(paths)) t.true(existsSync(join(root, source!)), source);
});

test("the sample imports the toolkit by its package's names only, never a path into toolkit/", async (t) => {
  const dir = join(root, "samples/hello");
  for (const name of (await readdir(dir)).filter((n) => n.endsWith(".ts"))) {
    const text = await readFile(join(dir, name), "utf8");
    t.notRegex(text, /from\s+["'][^"']*toolkit\/src/, name);
  }
  t.regex(await readFile(join(dir, "chat.ts"), "utf8"), /from "@berth\/toolkit\/langchain"/);
  t.regex(await readFile(join(dir, "server.ts"), "utf8"), /from "@berth\/toolkit"/);
});
