// hack/lib/system-packages.txt for TypeScript: the Debian packages the scripts need, read from the
// one list that hack/lib/system.sh installs from, so that a hint names a package it installs.
import { readFileSync } from "node:fs";
import { join } from "node:path";

export const SYSTEM_PACKAGES_FILE = join(import.meta.dirname, "system-packages.txt");

export interface SystemPackage {
  name: string;
  /** every run, or only with the real node (BERTH_REAL_NODE=1) */
  when: "any" | "real-node";
  /** the commands (and pc:MODULE, pkg-config modules) that hack/ checks for */
  provides: string[];
  need: string;
}

/** The list's rows, checked: four columns, a known `when`, no package or command twice. */
export function systemPackages(text = readFileSync(SYSTEM_PACKAGES_FILE, "utf8")): SystemPackage[] {
  const rows: SystemPackage[] = [];
  const seen = new Set<string>();
  for (const [i, line] of text.split("\n").entries()) {
    if (/^\s*(#|$)/.test(line)) continue;
    const m = /^(\S+)\s+(\S+)\s+(\S+)\s+(\S.*)$/.exec(line);
    if (!m) throw new Error(`system-packages.txt:${i + 1}: want four columns (package when provides need): ${line}`);
    const [, name, when, provides, need] = m as unknown as [string, string, string, string, string];
    if (when !== "any" && when !== "real-node") throw new Error(`system-packages.txt:${i + 1}: when is any or real-node, not ${when}`);
    const tools = provides === "-" ? [] : provides.split(",");
    for (const key of [`package ${name}`, ...tools.map((t) => `command ${t}`)]) {
      if (seen.has(key)) throw new Error(`system-packages.txt:${i + 1}: ${key} is listed twice`);
      seen.add(key);
    }
    rows.push({ name, when, provides: tools, need: need.trim() });
  }
  return rows;
}

/** The package of the list that provides a command (or pc:MODULE); undefined when none does. */
export function systemPackageOf(tool: string): string | undefined {
  return systemPackages().find((p) => p.provides.includes(tool))?.name;
}

/** What to say when a package of the list is missing; throws for a package the list lacks. */
export function systemPackageHint(name: string): string {
  if (!systemPackages().some((p) => p.name === name)) throw new Error(`${name} is not in hack/lib/system-packages.txt: add it there`);
  return `the Debian package ${name}, which ./hack/test and ./hack/up install (or: apt-get install ${name})`;
}
