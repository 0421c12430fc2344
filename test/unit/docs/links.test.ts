// The repository stands alone: a clone holds everything its documents point at. Every relative
// link of the READMEs, CONTRIBUTING.md and docs/ must reach a file or directory inside the
// repository (and, into a Markdown file, one of its headings), and no tracked file may point at the
// design and interface documents that once lived beside the repository instead of in docs/. The
// checks are pure functions over text, shown below to catch a made-up broken link and a link that
// leaves the repository, so that they cannot pass by accident.
import test from "ava";
import { execFileSync } from "node:child_process";
import { existsSync, readdirSync, readFileSync, statSync } from "node:fs";
import { dirname, isAbsolute, join, relative, resolve } from "node:path";

const root = resolve(import.meta.dirname, "../../..");

/** The Markdown files whose links are checked, relative to the root. */
function documents(): string[] {
  const docs: string[] = [];
  const walk = (dir: string) => {
    for (const name of readdirSync(join(root, dir)).sort()) {
      const path = join(dir, name);
      if (statSync(join(root, path)).isDirectory()) walk(path);
      else if (name.endsWith(".md")) docs.push(path);
    }
  };
  walk("docs");
  return ["README.md", "CONTRIBUTING.md", "charts/berth/README.md", "toolkit/README.md", ...docs].filter((f) => existsSync(join(root, f)));
}

/** The text without fenced code blocks and inline code spans: what they hold is not a link. */
function prose(markdown: string): string {
  return markdown.replace(/^(```|~~~)[^\n]*\n[\s\S]*?^\1[^\n]*$/gm, "").replace(/(`+)[\s\S]*?\1/g, "");
}

/** The targets of the inline links and images (`[text](target "title")`) and reference definitions (`[id]: target`). */
export function linkTargets(markdown: string): string[] {
  const text = prose(markdown);
  const out: string[] = [];
  for (const m of text.matchAll(/\]\(\s*(?:<([^>\n]*)>|([^\s)]+))(?:\s+(?:"[^"\n]*"|'[^'\n]*'))?\s*\)/g)) out.push(m[1] ?? m[2]!);
  for (const m of text.matchAll(/^ {0,3}\[[^\]\n]+\]:\s*(?:<([^>\n]*)>|(\S+))/gm)) out.push(m[1] ?? m[2]!);
  return out;
}

/** GitHub's anchors of a Markdown text's headings: lower case, punctuation dropped, spaces as hyphens, repeats numbered. */
export function anchors(markdown: string): Set<string> {
  const seen = new Map<string, number>();
  const out = new Set<string>();
  const text = markdown.replace(/^(```|~~~)[^\n]*\n[\s\S]*?^\1[^\n]*$/gm, "");
  for (const m of text.matchAll(/^ {0,3}#{1,6}[ \t]+(.+?)[ \t]*#*[ \t]*$/gm)) {
    const heading = m[1]!
      .replace(/!?\[([^\]]*)\]\([^)]*\)/g, "$1") // a link: its text
      .replace(/`/g, "")
      .replace(/\*+/g, "");
    const base = heading
      .toLowerCase()
      .replace(/[^\p{L}\p{N}\p{M}\s_-]/gu, "")
      .replace(/\s/g, "-");
    const n = seen.get(base) ?? 0;
    seen.set(base, n + 1);
    out.add(n === 0 ? base : `${base}-${n}`);
  }
  return out;
}

/**
 * What is wrong with the relative links of `file` (a path relative to `repoRoot`): each target that
 * leaves the repository, reaches nothing, or names a heading its Markdown file does not have.
 * Links with a scheme (http:, https:, mailto:) are not the repository's to check.
 */
export function brokenLinks(
  file: string,
  markdown: string,
  repoRoot: string,
  read: (path: string) => string = (p) => readFileSync(p, "utf8"),
): string[] {
  const problems: string[] = [];
  for (const target of linkTargets(markdown)) {
    if (/^(https?|mailto):/i.test(target)) continue;
    if (/^[a-z][a-z0-9+.-]*:/i.test(target)) {
      problems.push(`${file}: ${target}: a scheme other than http(s) and mailto`);
      continue;
    }
    const hash = target.indexOf("#");
    const pathPart = decodeURIComponent(hash < 0 ? target : target.slice(0, hash));
    const anchor = hash < 0 ? "" : decodeURIComponent(target.slice(hash + 1));
    const abs =
      pathPart === ""
        ? join(repoRoot, file)
        : pathPart.startsWith("/")
          ? join(repoRoot, pathPart)
          : resolve(repoRoot, dirname(file), pathPart);
    const rel = relative(repoRoot, abs);
    if (rel.startsWith("..") || isAbsolute(rel)) {
      problems.push(`${file}: ${target}: leaves the repository`);
      continue;
    }
    if (!existsSync(abs)) {
      problems.push(`${file}: ${target}: no such file or directory`);
      continue;
    }
    if (anchor && abs.endsWith(".md") && statSync(abs).isFile() && !anchors(read(abs)).has(anchor)) {
      problems.push(`${file}: ${target}: ${rel} has no heading #${anchor}`);
    }
  }
  return problems;
}

/**
 * Pointers at the documents that lived outside the repository, assembled here so that this file
 * does not contain them itself: the folder beside the checkout, and the two files by their old names.
 */
const OLD = ["DESIGN", "SPEC"];
const OLD_NAMES = OLD.map((n) => `${n}.md`);
const OUTSIDE = [["..", "shared"].join("/"), ...OLD_NAMES.map((n) => ["shared", n].join("/"))];

/** The outside pointers a text holds (the old names are case-sensitive: docs/design.md and docs/spec.md are fine). */
export function outsidePointers(text: string): string[] {
  return [...OUTSIDE, ...OLD_NAMES].filter((needle) => text.includes(needle));
}

test("every relative link of the documentation reaches a file inside the repository", (t) => {
  const files = documents();
  t.true(files.includes("README.md") && files.includes("docs/design.md") && files.includes("docs/spec.md"), files.join(", "));
  const problems = files.flatMap((f) => brokenLinks(f, readFileSync(join(root, f), "utf8"), root));
  t.deepEqual(problems, []);
});

test("no tracked file points at the design or interface documents outside the repository", (t) => {
  const tracked = execFileSync("git", ["ls-files", "-z"], { cwd: root, encoding: "utf8" }).split("\0").filter(Boolean);
  t.true(tracked.length > 100, `git ls-files listed ${tracked.length} files`);
  const self = relative(root, import.meta.filename);
  const found: string[] = [];
  // this file too (tracked or not yet): it assembles its needles and holds none of them
  for (const f of new Set([...tracked, self])) {
    const path = join(root, f);
    if (!existsSync(path) || !statSync(path).isFile()) continue; // deleted in the work tree, or a submodule
    const hits = outsidePointers(readFileSync(path, "latin1"));
    if (hits.length) found.push(`${f}: ${hits.join(", ")}`);
  }
  t.deepEqual(found, []);
});

test("the link check flags a made-up broken link, a link out of the repository and a missing heading", (t) => {
  const fake = [
    "See [the guide](docs/no-such-guide.md) and [the notes](../notes/x.md).",
    "[up](../) exists on this machine but is not the repository's.",
    "[a heading](docs/design.md#no-such-heading), [absolute](/nowhere.txt), [ftp](ftp://example.com/x)",
    "[ref]: docs/also-missing.md",
    // not flagged: inside the repository, a heading that exists, the web, code
    "[ok](docs/design.md#5-house-style) [dir](docs/) [self](#berth) [web](https://example.com/a.md) [mail](mailto:a@example.com)",
    "`[code](nowhere.md)`",
    "```\n[fenced](nowhere.md)\n```",
  ].join("\n");
  t.deepEqual(brokenLinks("README.md", fake, root), [
    "README.md: docs/no-such-guide.md: no such file or directory",
    "README.md: ../notes/x.md: leaves the repository",
    "README.md: ../: leaves the repository",
    "README.md: docs/design.md#no-such-heading: docs/design.md has no heading #no-such-heading",
    "README.md: /nowhere.txt: no such file or directory",
    "README.md: ftp://example.com/x: a scheme other than http(s) and mailto",
    "README.md: docs/also-missing.md: no such file or directory",
  ]);
  // a link from a nested file is resolved from its folder: one level up from docs/ is still inside
  t.deepEqual(brokenLinks("docs/api.md", "[readme](../README.md) [out](../../x)", root), ["docs/api.md: ../../x: leaves the repository"]);
});

test("the pointer check flags each outside document and the old names", (t) => {
  for (const needle of [...OUTSIDE, ...OLD_NAMES]) t.true(outsidePointers(`see [it](${needle}) for more`).includes(needle), needle);
  t.deepEqual(outsidePointers("see docs/design.md and docs/spec.md, and the shared informer"), []);
});

test("anchors follow GitHub's headings", (t) => {
  const md =
    "# Title\n## 1. Shape\n## The record: a Domain resource\n### `pii_detection` (key `sensitive_data`)\n## Shape\n## Shape\n```\n# not a heading\n```\n";
  t.deepEqual(
    [...anchors(md)],
    ["title", "1-shape", "the-record-a-domain-resource", "pii_detection-key-sensitive_data", "shape", "shape-1"],
  );
});
