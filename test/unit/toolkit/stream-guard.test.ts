// Output guards on streams (toolkit/src/langchain/stream-guard.ts) with the real guard engine:
// which strategy a config allows, that text goes out before the end without a match ever being
// released in part, that redacted streams read as the redacted whole, that a block stops the
// stream before the offending text.
import test from "ava";
import { GuardEngine } from "../../../toolkit/src/index.ts";
import type { EngineConfigInput } from "../../../toolkit/src/index.ts";
import type { Release, StepResult } from "../../../toolkit/src/langchain/index.ts";
import { StreamGuard, streamStrategy } from "../../../toolkit/src/langchain/index.ts";

const redactPii: EngineConfigInput = {
  guards: { sensitive_data: { enabled: false }, custom_templates: [{ template_id: "pii", enabled: true }] },
  templates: { pii: { name: "Redact PII", guardType: "pii_detection", config: { action: "redact" } } },
};
const blockPii: EngineConfigInput = {};

test("strategy: passthrough without enforcing output guards, buffer for whole-text judgements, else window", (t) => {
  t.is(
    streamStrategy(new GuardEngine({ guards: { sensitive_data: { enabled: false } } })),
    "passthrough",
    "prompt_injection looks at prompts only",
  );
  t.is(streamStrategy(new GuardEngine({})), "window", "the built-in sensitive_data guard blocks on output");
  t.is(streamStrategy(new GuardEngine(redactPii)), "window");
  t.is(streamStrategy(new GuardEngine(redactPii), "buffer"), "buffer");
  t.is(
    streamStrategy(
      new GuardEngine({
        guards: { sensitive_data: { enabled: false }, custom_templates: [{ template_id: "f", enabled: true }] },
        templates: { f: { name: "flag", guardType: "toxicity", config: { action: "flag" } } },
      }),
    ),
    "passthrough",
    "a flag is recorded, never enforced",
  );
  t.is(
    streamStrategy(
      new GuardEngine({
        guards: { sensitive_data: { enabled: false }, custom_templates: [{ template_id: "t", enabled: true }] },
        templates: {
          t: {
            name: "topics",
            guardType: "off_topic",
            config: { phases: ["output"], topics: [{ name: "billing", keywords: ["invoice"] }] },
          },
        },
      }),
    ),
    "buffer",
  );
});

/** Streams `text` in pieces of `size` characters; returns what went out, in order, and when. */
function run(
  engine: GuardEngine,
  text: string,
  size: number,
  opts = {},
  check?: (out: string) => void,
): { out: string; firstOutAt: number | undefined; releases: number; block?: StepResult; pieces: string[] } {
  const guard = new StreamGuard(engine, opts);
  const pieces: string[] = [];
  for (let i = 0; i < text.length; i += size) pieces.push(text.slice(i, i + size));
  const held: string[] = [];
  let out = "";
  let firstOutAt: number | undefined;
  let releases = 0;
  const take = (r: Release | undefined, at: number) => {
    if (!r) return;
    const chunks = held.splice(0, r.count);
    out += r.text ?? chunks.join("");
    releases++;
    firstOutAt ??= at;
  };
  for (let i = 0; i < pieces.length; i++) {
    held.push(pieces[i]!);
    const step = guard.push(pieces[i]!);
    if (step.kind === "block") return { out, firstOutAt, releases, block: step, pieces };
    take(step.release, i);
    check?.(out);
  }
  const end = guard.finish(engine.evaluate(guard.text, "output"));
  if (end.kind === "block") return { out, firstOutAt, releases, block: end, pieces };
  take(end.release, pieces.length);
  return { out, firstOutAt, releases, pieces };
}

const benign = "Our support team answers every request within one business day. ".repeat(20);

test("window: a long benign answer goes out as it streams, unchanged", (t) => {
  const engine = new GuardEngine(redactPii);
  const r = run(engine, benign, 3);
  t.is(r.out, benign);
  t.true(r.firstOutAt! < r.pieces.length / 4, `first text out after ${r.firstOutAt} of ${r.pieces.length} chunks`);
  t.true(r.releases > 10);
});

test("passthrough: every chunk goes out at once", (t) => {
  const engine = new GuardEngine({ guards: { sensitive_data: { enabled: false } } });
  const r = run(engine, benign, 5);
  t.is(r.firstOutAt, 0);
  t.is(r.releases, r.pieces.length);
  t.is(r.out, benign);
});

test("buffer: nothing goes out before the end", (t) => {
  const r = run(new GuardEngine(redactPii), benign, 3, { mode: "buffer" });
  t.is(r.firstOutAt, r.pieces.length);
  t.is(r.out, benign);
});

const findings = [
  "jane.doe@example.com",
  "4242 4242 4242 4242",
  "DE89 3704 0044 0532 0130 00",
  "+1 (415) 555-0100",
  "sk-proj-" + "Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4zAb7dEf0hIj3kLm6nOp9qRs2tUv5wXy8zAb1dEf4hIj7kLm0nOp3qRs6tUv9wXy2zAb5dEf8hIj1k",
];

for (const finding of findings) {
  for (const size of [1, 4, 17]) {
    test(`window, redact: ${finding.slice(0, 12)}… in chunks of ${size} never goes out unredacted`, (t) => {
      const engine = new GuardEngine(redactPii);
      const text = benign.slice(0, 300) + `Please use ${finding} for this. ` + benign.slice(0, 400);
      const whole = engine.evaluate(text, "output");
      t.is(whole.decision, "redact", "the finding is redacted in the whole text");
      const r = run(engine, text, size);
      t.false(r.out.includes(finding), "never released as is");
      t.is(r.out, whole.redactedText ?? "(not redacted)", "the stream reads as the redacted whole");
      // no prefix of the finding long enough to matter went out either
      t.false(r.out.includes(finding.slice(0, 8)), "no part of it");
      t.true(r.firstOutAt! < r.pieces.length / 2, "and the stream was not buffered");
    });
  }
}

test("window, block: the stream stops before the card number goes out", (t) => {
  const engine = new GuardEngine(blockPii);
  const before = benign.slice(0, 400);
  const text = before + "Your card 4242 4242 4242 4242 is on file. " + benign;
  const r = run(engine, text, 2);
  t.truthy(r.block);
  t.is(r.block!.kind, "block");
  t.true(text.startsWith(r.out));
  t.false(r.out.includes("4242"), "no digit group of the card went out");
  t.true(r.out.length > 200, "text before it did go out");
  if (r.block?.kind === "block") t.regex(r.block.decision.blocks[0]!.blockedContent, /Visa card number ending 4242/);
});

test("a token still growing is held back until it is complete, whatever the holdback", (t) => {
  const engine = new GuardEngine(redactPii);
  const jwt =
    "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIiwibmFtZSI6IkpvaG4gRG9lIiwiaWF0IjoxNTE2MjM5MDIyfQ.SflKxwRJSMeKKF2QT4fwpMeJf36POk6yQV_adQssw5c";
  const text = benign.slice(0, 200) + "Here is the token: " + jwt + " and that is all. " + benign.slice(0, 200);
  let checks = 0;
  const r = run(engine, text, 1, { holdback: 8, step: 8 }, (out) => {
    checks++;
    if (out.includes(jwt.slice(0, 12))) t.fail(`part of the token went out: ${out.slice(-60)}`);
  });
  t.true(checks > 100);
  t.true(r.releases > 10);
  t.is(r.out, engine.evaluate(text, "output").redactedText ?? "(not redacted)");
});

test("a held chunk (tool-call arguments) holds everything after it until the end", (t) => {
  const engine = new GuardEngine(redactPii);
  const guard = new StreamGuard(engine, { holdback: 8, step: 8 });
  t.deepEqual(guard.push("x".repeat(10) + " "), { kind: "release", release: undefined });
  t.deepEqual(guard.push("", true), { kind: "release", release: undefined });
  const s = guard.push(" more text ".repeat(10));
  t.is(s.kind === "release" ? (s.release?.count ?? 0) : -1, 1, "only the chunk before the held one");
  const end = guard.finish(engine.evaluate(guard.text, "output"));
  t.deepEqual(end, { kind: "release", release: { count: 2 } });
});

test("text without spaces (CJK) still streams: only runs of secret characters are held", (t) => {
  const engine = new GuardEngine(redactPii);
  const text = "您好，感谢您的耐心等待。您的包裹今天早上已从我们的仓库发出，预计两个工作日内送达。".repeat(12);
  const r = run(engine, text, 2);
  t.is(r.out, text);
  t.true(r.firstOutAt! * 2 <= 128, `first text out after ${r.firstOutAt! * 2} characters (holdback + step)`);
  t.true(r.releases > 5);
});
