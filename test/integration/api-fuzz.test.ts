// A bounded, seeded run of the API fuzzer (hack/fuzz: schemathesis over the served OpenAPI
// document) against the real API server this test starts: no 5xx on any generated input, every
// answer's status, Content-Type and body as documented, invalid input refused. A longer run by hand:
// docs/api.md "Fuzzing".
import { spawn } from "node:child_process";
import { mkdtempSync, readFileSync, readdirSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import test from "ava";
import { startApi } from "../helpers/api.ts";
import { provisionApp } from "../helpers/governance.ts";
import { identity } from "../helpers/identities.ts";

const root = join(import.meta.dirname, "../..");

test("the fuzzer finds no server error and no answer that contradicts the OpenAPI document", async (t) => {
  t.timeout(12 * 60_000); // a run over every operation (schemathesis is made by ./hack/test's setup)
  const api = await startApi({
    env: {
      // The fuzzer sends thousands of requests with one key: its budget would answer most of them
      // with the (documented) 429 and the handlers behind it would go untested.
      BERTH_RATE_LIMIT_API_PER_SECOND: "0",
      BERTH_RATE_LIMIT_INGEST_PER_SECOND: "0",
      BERTH_RATE_LIMIT_GUARD_PER_SECOND: "0",
      BERTH_LOG_LEVEL: "warn",
    },
  });
  t.teardown(() => api.stop());
  const app = await provisionApp(api, (await identity("operator")).token, "fuzzed");
  const reports = mkdtempSync(join(tmpdir(), "berth-fuzz-"));

  const child = spawn(join(root, "hack/fuzz"), [], {
    cwd: root,
    env: {
      ...process.env,
      BERTH_FUZZ_URL: api.url,
      BERTH_FUZZ_WORKSPACE_ID: api.workspaceId,
      BERTH_FUZZ_WORKSPACE_KEY: api.apiKey,
      BERTH_FUZZ_ADMIN_KEY: api.adminKey,
      BERTH_FUZZ_APP_ID: "fuzzed",
      BERTH_FUZZ_APP_KEY: app.key,
      BERTH_FUZZ_MAX_EXAMPLES: "8",
      BERTH_FUZZ_SEED: "17",
      BERTH_FUZZ_REPORT_DIR: reports,
    },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let output = "";
  child.stdout.on("data", (d: Buffer) => {
    output += d.toString();
  });
  child.stderr.on("data", (d: Buffer) => {
    output += d.toString();
  });
  const code = await new Promise<number | null>((resolve) => child.on("close", resolve));

  if (code !== 0) {
    t.log(output.slice(-20_000));
    const junit = readdirSync(reports).find((f) => f.endsWith(".xml"));
    if (junit) t.log(`JUnit report (${join(reports, junit)}):\n${readFileSync(join(reports, junit), "utf8").slice(0, 20_000)}`);
  }
  // 500s the fuzzer may not see as such (schemathesis checks what it is sent; this is what the server logged)
  const errors = api.logs.filter(
    (l) => l.msg === "request failed with an unexpected error" || l.msg === "response does not match its documented schema",
  );
  if (errors.length > 0)
    t.log(
      `API errors:\n${errors
        .slice(0, 20)
        .map((l) => JSON.stringify(l))
        .join("\n")}`,
    );
  t.is(code, 0, "schemathesis reported failures (its report is above)");
  t.regex(output, /\d+ generated, \d+ passed/, "the run tested something");
  t.is(errors.length, 0, "no request failed with an unexpected error");
});
