// Builds the console (api/console/web, a Preact single-page app) into static files the API serves
// under /console (api/console/static.ts, BERTH_CONSOLE_DIR): one minified ES module and one
// stylesheet under assets/, named by their content's hash (esbuild's [hash]: the server caches
// such names for a year), and index.html made from api/console/web/index.html with their paths.
// The output directory is cleared first; the same sources give the same names and bytes.
// It prints and writes build.json: each file's raw and gzip size and what the first page loads.
//
// Usage: node hack/console.ts [--out DIR]     (default DIR: .local/console)
import { mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { dirname, join, relative, resolve } from "node:path";
import { gzipSync } from "node:zlib";
import { build } from "esbuild";

const root = join(import.meta.dirname, "..");
export const CONSOLE_SOURCE = join(root, "api/console/web");
export const DEFAULT_CONSOLE_OUT = join(root, ".local/console");
/** The budget of what the first page loads, gzip (issue 36). */
export const FIRST_LOAD_BUDGET_BYTES = 150 * 1024;

export interface ConsoleFileSize {
  /** Path under the output directory, "/"-separated */
  path: string;
  bytes: number;
  gzipBytes: number;
}

export interface ConsoleBuildReport {
  outDir: string;
  files: ConsoleFileSize[];
  /** What loading any page fetches: index.html, the script and the stylesheet */
  firstLoad: { files: string[]; bytes: number; gzipBytes: number; budgetGzipBytes: number };
}

/** Builds the console into `outDir` (cleared first) and returns the sizes it wrote (also in outDir/build.json). */
export async function buildConsole(outDir: string = DEFAULT_CONSOLE_OUT): Promise<ConsoleBuildReport> {
  const out = resolve(outDir);
  const result = await build({
    absWorkingDir: root,
    entryPoints: [join(CONSOLE_SOURCE, "main.tsx")],
    bundle: true,
    minify: true,
    format: "esm",
    target: "es2022",
    platform: "browser",
    tsconfig: join(CONSOLE_SOURCE, "tsconfig.json"),
    jsx: "automatic",
    jsxImportSource: "preact",
    outdir: join(out, "assets"),
    entryNames: "[name]-[hash]",
    assetNames: "[name]-[hash]",
    publicPath: "/console/assets",
    metafile: true,
    write: false,
    legalComments: "none",
    charset: "utf8",
    define: { "process.env.NODE_ENV": '"production"' },
    logLevel: "warning",
  });

  rmSync(out, { recursive: true, force: true });
  const written = new Map<string, Uint8Array>();
  for (const f of result.outputFiles) written.set(relative(out, f.path).split("\\").join("/"), f.contents);

  const js = [...written.keys()].find((p) => /^assets\/main-[A-Z0-9]+\.js$/.test(p));
  const css = [...written.keys()].find((p) => /^assets\/main-[A-Z0-9]+\.css$/.test(p));
  if (!js || !css) throw new Error(`esbuild wrote no main script or stylesheet: ${[...written.keys()].join(", ")}`);
  const template = readFileSync(join(CONSOLE_SOURCE, "index.html"), "utf8");
  if (!template.includes("{{js}}") || !template.includes("{{css}}")) throw new Error("api/console/web/index.html lacks {{js}} or {{css}}");
  const html = template.replace("{{js}}", `/console/${js}`).replace("{{css}}", `/console/${css}`);
  written.set("index.html", Buffer.from(html, "utf8"));

  const files: ConsoleFileSize[] = [];
  for (const [path, contents] of [...written].sort(([a], [b]) => a.localeCompare(b))) {
    mkdirSync(dirname(join(out, path)), { recursive: true });
    writeFileSync(join(out, path), contents);
    files.push({ path, bytes: contents.byteLength, gzipBytes: gzipSync(contents, { level: 9 }).byteLength });
  }
  const first = files.filter((f) => f.path === "index.html" || f.path === js || f.path === css);
  const report: ConsoleBuildReport = {
    outDir: out,
    files,
    firstLoad: {
      files: first.map((f) => f.path),
      bytes: first.reduce((n, f) => n + f.bytes, 0),
      gzipBytes: first.reduce((n, f) => n + f.gzipBytes, 0),
      budgetGzipBytes: FIRST_LOAD_BUDGET_BYTES,
    },
  };
  // build.json is not part of the first load (the console never fetches it)
  writeFileSync(join(out, "build.json"), `${JSON.stringify({ ...report, outDir: undefined }, null, 2)}\n`);
  return report;
}

function kib(n: number): string {
  return `${(n / 1024).toFixed(1)} KiB`;
}

if (import.meta.main) {
  const at = process.argv.indexOf("--out");
  const outDir = at >= 0 ? process.argv[at + 1] : undefined;
  if (at >= 0 && !outDir) {
    console.error("usage: node hack/console.ts [--out DIR]");
    process.exit(2);
  }
  const t0 = performance.now();
  const report = await buildConsole(outDir ?? DEFAULT_CONSOLE_OUT);
  for (const f of report.files) console.log(`${f.path.padEnd(32)} ${kib(f.bytes).padStart(10)} ${kib(f.gzipBytes).padStart(10)} gzip`);
  const { gzipBytes, budgetGzipBytes } = report.firstLoad;
  console.log(
    `first load: ${kib(gzipBytes)} gzip (budget ${kib(budgetGzipBytes)}); built in ${Math.round(performance.now() - t0)} ms into ${report.outDir}`,
  );
  if (gzipBytes > budgetGzipBytes) {
    console.error("the first load is over its budget");
    process.exit(1);
  }
}
