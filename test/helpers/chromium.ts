// A real browser for the console's tests: Debian's Chromium (hack/lib/system-packages.txt),
// driven by playwright-core over its own executable (no browser download). Hosts of Apps resolve
// to the ingress with Chromium's host resolver rules, so the browser opens a service's URL as a
// user would, and nothing leaves the machine.
import { execFileSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { chromium, type Browser, type Page } from "playwright-core";

/** The Chromium the scripts installed. */
export function chromiumPath(): string {
  try {
    return execFileSync("sh", ["-c", "command -v chromium"], { encoding: "utf8" }).trim();
  } catch {
    throw new Error("chromium is missing: it comes from the Debian package chromium, which ./hack/test installs for the real node");
  }
}

/**
 * Launches headless Chromium. `hosts`: virtual hosts (a leading `*.` for every subdomain) sent to
 * host:port instead of being resolved, e.g. `{ "*.apps.e2e.local": "127.0.0.1:26480" }`.
 */
export async function launchChromium(o: { hosts?: Record<string, string> } = {}): Promise<Browser> {
  const rules = Object.entries(o.hosts ?? {}).map(([host, to]) => `MAP ${host} ${to}`);
  return chromium.launch({
    executablePath: chromiumPath(),
    headless: true,
    args: [
      // Chromium's sandbox needs an unprivileged user; the tests run as whoever runs ./hack/test (often root).
      ...(process.getuid?.() === 0 ? ["--no-sandbox"] : []),
      ...(rules.length ? [`--host-resolver-rules=${rules.join(",")}`] : []),
      "--disable-gpu",
      "--no-first-run",
      "--disable-background-networking",
      "--disable-component-update",
      "--disable-sync",
      "--disable-default-apps",
      "--metrics-recording-only",
      "--no-default-browser-check",
    ],
  });
}

const axeSource = readFileSync(createRequire(import.meta.url).resolve("axe-core/axe.min.js"), "utf8");

export interface AxeViolation {
  id: string;
  impact: string | null;
  help: string;
  nodes: { target: string[]; html: string }[];
}

/**
 * axe-core's serious and critical violations on the page as it is now. axe runs through the
 * DevTools protocol (page.evaluate), which the page's CSP does not govern, so the CSP under test
 * stays as strict as users get it.
 */
export async function axeViolations(page: Page): Promise<AxeViolation[]> {
  await page.evaluate(axeSource);
  // A string, evaluated in the page (this file is type-checked without the DOM's types).
  const result = await page.evaluate<AxeViolation[]>(`axe.run(document, { resultTypes: ["violations"] }).then((r) =>
    r.violations.map((v) => ({ id: v.id, impact: v.impact, help: v.help, nodes: v.nodes.map((n) => ({ target: n.target, html: n.html })) })))`);
  return result.filter((v) => v.impact === "serious" || v.impact === "critical");
}

/**
 * Collects what the page reports that a user would call broken: CSP refusals, uncaught errors,
 * console errors, and answers of 500 and above. The browser's own line for a 4xx answer ("Failed
 * to load resource") is not one: the console asks for its session and gets 401 before sign-in,
 * and shows the API's refusals as it should.
 */
export function pageProblems(page: Page): string[] {
  const problems: string[] = [];
  page.on("pageerror", (err) => problems.push(`uncaught: ${err.message}`));
  page.on("console", (m) => {
    if (m.type() === "error" && !/^Failed to load resource: the server responded with a status of 4\d\d/.test(m.text()))
      problems.push(`console: ${m.text()}`);
  });
  page.on("response", (r) => {
    if (r.status() >= 500) problems.push(`${r.status()} from ${r.request().method()} ${r.url()}`);
  });
  return problems;
}
