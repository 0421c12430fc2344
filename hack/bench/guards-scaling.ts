// Scaling benchmark of the guards on long adversarial texts, run by hand (no cluster, no database):
//   node hack/bench/guards-scaling.ts [--sizes 64,256,1024] [--only <case>] [--runs 3] [--give-up 20]
//                                     [--baseline <dir>]
// The guards run in the API's shared scoring threads on texts up to 1 MiB (the ingestion body
// limit), so their time must grow linearly with the text: a crafted text must not hold a thread
// for seconds. Each case repeats a short adversarial unit (with seeded variations) to 64 KB, 256 KB
// and 1 MiB, and times each guard type's detector on it alone (pii_detection, prompt_injection,
// toxicity, off_topic, custom) and the whole chain (GuardEngine.evaluate with every guard type on,
// allowlists and a redacting template included: allowlisting, block descriptions and redaction run
// on every hit). Prints the best CPU time of --runs runs per size (the process's CPU time, which
// leaves out the time other processes hold the core) and the ratio time(1 MiB) / time(256 KB):
// about 4 when the work is linear, 16 when it is quadratic. A size is skipped once the size before
// it took more than --give-up seconds (a quadratic version would take 16 times that at the next).
// --baseline <dir> also loads <dir>/toolkit/src/index.ts, another version of the guards (for
// example `git archive <rev> toolkit/src | tar -x -C .local/bench-baseline`), and prints its
// figures next to these, on the same texts.
import { availableParallelism, loadavg } from "node:os";
import { join, resolve } from "node:path";
import { pathToFileURL } from "node:url";
import { parseArgs } from "node:util";
import * as current from "../../toolkit/src/index.ts";
import type { EngineConfigInput } from "../../toolkit/src/index.ts";
import { CASES, caseText } from "./adversarial-texts.ts";

const { values } = parseArgs({
  options: {
    sizes: { type: "string", default: "64,256,1024" },
    only: { type: "string" },
    runs: { type: "string", default: "3" },
    "give-up": { type: "string", default: "20" },
    baseline: { type: "string" },
  },
});
const SIZES = values.sizes.split(",").map((s) => Number(s) * 1024);
const RUNS = Number(values.runs);
const GIVE_UP_MS = Number(values["give-up"]) * 1000;

type Toolkit = Pick<typeof current, "GuardEngine" | "detectPii" | "detectInjection" | "detectToxicity" | "detectOffTopic" | "detectCustom">;

const topics = [
  { name: "orders", keywords: ["order", "delivery", "parcel", "shipping", "tracking number"] },
  { name: "billing", keywords: ["invoice", "refund", "payment", "charge", "subscription"] },
];
const custom = {
  patterns: [
    { pattern: "\\bPRJ-\\d{4}\\b", name: "project code" },
    { pattern: "\\binternal[-_ ]only\\b", flags: "i", name: "marking" },
  ],
  keywords: ["project falcon", "codename"],
};

/** Every guard type on, allowlists (a literal and a pattern) and a redacting template included. */
const config: EngineConfigInput = {
  guards: {
    prompt_injection: { enabled: true, threshold: 0.7 },
    sensitive_data: { enabled: true, threshold: 0.5 },
    custom_templates: [
      { template_id: "pii", template_name: "Redact PII", enabled: true, threshold: 0.5 },
      { template_id: "tox", template_name: "Toxicity", enabled: true, threshold: 0.6 },
      { template_id: "inj", template_name: "Injection", enabled: true, threshold: 0.6 },
      { template_id: "topic", template_name: "Support topics", enabled: true, threshold: 0.6 },
      { template_id: "codes", template_name: "Internal codes", enabled: true, threshold: 0.6 },
    ],
  },
  templates: {
    pii: {
      name: "Redact PII",
      guardType: "pii_detection",
      config: { action: "redact", allowlist: ["support@example.com", "/10\\.0\\.\\d+\\.\\d+/"] },
    },
    tox: { name: "Toxicity", guardType: "toxicity", config: { sensitivity: "high", allowlist: ["shiitake"] } },
    inj: { name: "Injection", guardType: "prompt_injection", config: { allowlist: ["what does it mean"] } },
    topic: { name: "Support topics", guardType: "off_topic", config: { action: "flag", phases: ["input", "output"] } },
    codes: { name: "Internal codes", guardType: "custom", config: { ...custom, action: "redact" } },
  },
  allowedTopics: topics,
};

function cpuMs(fn: () => unknown): number {
  const c0 = process.cpuUsage();
  fn();
  const c = process.cpuUsage(c0);
  return (c.user + c.system) / 1000;
}

type Row = Array<number | null>;

/** Best CPU time of RUNS runs per size; null once a smaller size took longer than GIVE_UP_MS. */
function times(fn: (text: string) => unknown, name: string): Row {
  const row: Row = [];
  let givenUp = false;
  for (const size of SIZES) {
    if (givenUp) {
      row.push(null);
      continue;
    }
    const text = caseText(name, size);
    let best = Infinity;
    for (let run = 0; run < RUNS && (run === 0 || best < GIVE_UP_MS / 4); run++)
      best = Math.min(
        best,
        cpuMs(() => fn(text)),
      );
    row.push(best);
    givenUp = best > GIVE_UP_MS;
  }
  return row;
}

function guards(tk: Toolkit): Array<[string, (text: string) => unknown]> {
  const engine = new tk.GuardEngine(config);
  return [
    ["pii_detection", (t) => tk.detectPii(t)],
    ["prompt_injection", (t) => tk.detectInjection(t)],
    ["toxicity", (t) => tk.detectToxicity(t)],
    ["off_topic", (t) => tk.detectOffTopic(t, { topics })],
    ["custom", (t) => tk.detectCustom(t, custom)],
    ["chain (input)", (t) => engine.evaluate(t, "input")],
  ];
}

const fmt = (x: number | null) => (x === null ? "skipped" : x >= 1000 ? `${(x / 1000).toFixed(2)} s` : `${x.toFixed(1)} ms`).padStart(9);
const ratio = (row: Row) => {
  const [a, b] = [row.at(-2), row.at(-1)];
  return a && b ? (b / a).toFixed(1).padStart(5) : "    -";
};

const versions: Array<[string, Toolkit]> = [["this", current]];
if (values.baseline) {
  const base = (await import(pathToFileURL(join(resolve(values.baseline), "toolkit/src/index.ts")).href)) as Toolkit;
  versions.unshift(["baseline", base]);
}
const names = Object.keys(CASES).filter((n) => !values.only || n.includes(values.only));
const WIDTH = Math.max(...names.map((n) => n.length));

console.log(
  `guards scaling: ${names.length} cases at ${SIZES.map((s) => `${s / 1024} KB`).join(", ")}, best CPU time of ${RUNS} runs, node ${process.version}, ` +
    `load average ${loadavg()
      .map((l) => l.toFixed(2))
      .join(" ")} on ${availableParallelism()} cores`,
);
// warm-up: the first run of each regular expression compiles it
for (const [, tk] of versions) for (const [, fn] of guards(tk)) for (const n of names) fn(caseText(n, 2048));

const suites = versions.map(([version, tk]) => [version, guards(tk)] as const);
const header = `${"case".padEnd(WIDTH)} ${"guard".padEnd(16)} ${values.baseline ? "version  " : ""}${SIZES.map((s) => `${s / 1024} KB`.padStart(9)).join(" ")} ratio`;
console.log(header);
// the worst ratio of the last two sizes per version and guard (rows under 1 ms at the smaller size are noise)
const worst = new Map<string, Map<string, number>>(versions.map(([version]) => [version, new Map()]));
for (const n of names) {
  for (const [i, [guard]] of suites[0]![1].entries()) {
    for (const [version, fns] of suites) {
      const row = times(fns[i]![1], n);
      console.log(
        `${n.padEnd(WIDTH)} ${guard.padEnd(16)} ${values.baseline ? version.padEnd(9) : ""}${row.map(fmt).join(" ")} ${ratio(row)}`,
      );
      const [a, b] = [row.at(-2), row.at(-1)];
      const w = worst.get(version)!;
      if (a && b && a >= 1) w.set(guard, Math.max(w.get(guard) ?? 0, b / a));
    }
  }
}
for (const [version, w] of worst)
  console.log(
    `\nworst ratio of the last two sizes per guard (${version}; ~${(SIZES.at(-1)! / SIZES.at(-2)!).toFixed(0)} when linear): ` +
      [...w].map(([g, r]) => `${g} ${r.toFixed(1)}`).join(", "),
  );
