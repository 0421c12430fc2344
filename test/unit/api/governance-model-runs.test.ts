// Which configs run the guards' classifier on the request path, as the API counts them against the
// model-run budget (classifierUseOf): the prompt-injection classifier, or an enabled toxicity
// template with its head (on unless `classifier: false` or action redact), read from the engine input as stored (the scoring threads parse it).
import test from "ava";
import { classifierUseOf } from "../../../api/governance/ingest/model-runs.ts";
import type { EngineConfigInput } from "../../../toolkit/src/index.ts";

const withTemplate = (config: Record<string, unknown>, enabled = true): EngineConfigInput => ({
  guards: { prompt_injection: { classifier: false }, custom_templates: [{ template_id: "t", enabled }] },
  templates: { t: { name: "Toxicity", guardType: "toxicity", config } },
});

test("the injection classifier (on by default) or a toxicity template's head runs the model on the request path", (t) => {
  t.deepEqual(classifierUseOf({}), { requestPath: true, ingestion: false });
  t.deepEqual(classifierUseOf({ guards: { prompt_injection: { classifier_on_ingestion: true } } }), { requestPath: true, ingestion: true });
  t.deepEqual(classifierUseOf({ guards: { prompt_injection: { classifier: false } } }), { requestPath: false, ingestion: false });
  t.deepEqual(classifierUseOf(withTemplate({ classifier: true })), { requestPath: true, ingestion: false });
  t.deepEqual(classifierUseOf(withTemplate({})), { requestPath: true, ingestion: false }, "the head is on by default");
  t.deepEqual(
    classifierUseOf(withTemplate({ classifier: false })),
    { requestPath: false, ingestion: false },
    "a template without its head",
  );
  t.deepEqual(
    classifierUseOf(withTemplate({ action: "redact" })),
    { requestPath: false, ingestion: false },
    "a redacting template has no head",
  );
  t.deepEqual(classifierUseOf(withTemplate({ classifier: true }, false)), { requestPath: false, ingestion: false }, "a disabled reference");
  const pii = withTemplate({ classifier: true });
  pii.templates!.t!.guardType = "pii_detection";
  t.false(classifierUseOf(pii).requestPath, "only a toxicity template has the head");
});
