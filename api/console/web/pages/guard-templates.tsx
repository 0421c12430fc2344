// Guard templates (GET /governance/guard-templates): the platform's (read-only here) and the
// workspace's own, which can be created (POST), replaced as a whole (PUT) and deleted (DELETE).
import { useState } from "preact/hooks";
import { api, call, type Schemas } from "../api.ts";
import { href, Link, navigate, seg } from "../router.tsx";
import {
  ActionButton,
  Checkbox,
  CheckboxGroup,
  Empty,
  Field,
  Form,
  Page,
  Select,
  Show,
  TableWrap,
  TextArea,
  Time,
  checked,
  invalid,
  lines,
  text,
  useLoad,
} from "../ui.tsx";
import { PII_KINDS, TOXICITY_CATEGORIES, toxicityHeadOn } from "../../../../toolkit/src/guards/kinds.ts";

type Template = Schemas["GuardTemplate"];
type Body = Schemas["ReplaceGuardTemplateRequest"];
type Config = Body["config"];

const GUARD_TYPES: readonly (readonly [Template["guardType"], string])[] = [
  ["pii_detection", "Sensitive data (PII)"],
  ["prompt_injection", "Prompt injection"],
  ["toxicity", "Toxicity"],
  ["off_topic", "Off topic"],
  ["custom", "Custom patterns and keywords"],
];
// The guards' own lists (a module of constants, bundled without the guards' code)
const ENTITIES = PII_KINDS;
const CATEGORIES = TOXICITY_CATEGORIES;

export function GuardTemplatesPage() {
  const [list, reload] = useLoad(() => call(api.GET("/governance/guard-templates")), []);
  return (
    <Page title="Guard templates">
      <p class="hint">A template is a reusable guard. Apply it to a service in its governance configuration.</p>
      <p>
        <Link href={href("/guard-templates/new")} class="button primary">
          New template
        </Link>
      </p>
      <Show value={list} what="guard templates">
        {(l) =>
          l.length === 0 ? (
            <Empty>There is no guard template yet.</Empty>
          ) : (
            <TableWrap label="Guard templates">
              <thead>
                <tr>
                  <th scope="col">Name</th>
                  <th scope="col">Guard</th>
                  <th scope="col">Sensitivity</th>
                  <th scope="col">Action</th>
                  <th scope="col">Owner</th>
                  <th scope="col">Updated</th>
                  <th scope="col">
                    <span class="visually-hidden">Actions</span>
                  </th>
                </tr>
              </thead>
              <tbody>
                {l.map((t) => (
                  <tr key={t.id}>
                    <th scope="row">{t.workspaceId ? <Link href={href(`/guard-templates/${seg(t.id)}`)}>{t.name}</Link> : t.name}</th>
                    <td>{GUARD_TYPES.find((g) => g[0] === t.guardType)?.[1] ?? t.guardType}</td>
                    <td>{t.config.sensitivity}</td>
                    <td>{t.config.action}</td>
                    <td>{t.workspaceId ? "This workspace" : "Platform (read-only)"}</td>
                    <td>
                      <Time iso={t.updatedAt} />
                    </td>
                    <td>
                      {t.workspaceId && (
                        <ActionButton
                          kind="danger"
                          label={`Delete ${t.name}`}
                          onClick={async () => {
                            await call(api.DELETE("/governance/guard-templates/{id}", { params: { path: { id: t.id } } }));
                            await reload();
                          }}
                        >
                          Delete
                        </ActionButton>
                      )}
                    </td>
                  </tr>
                ))}
              </tbody>
            </TableWrap>
          )
        }
      </Show>
    </Page>
  );
}

function topicLines(topics: Config["topics"]): string {
  return (topics ?? []).map((t) => `${t.name}: ${t.keywords.join(", ")}`).join("\n");
}

function templateBody(d: FormData, guardType: Template["guardType"]): Body {
  const config: Config = {
    sensitivity: (text(d, "config.sensitivity") ?? "medium") as Config["sensitivity"],
    action: (text(d, "config.action") ?? "block") as Config["action"],
    allowlist: lines(d, "config.allowlist"),
  };
  const phases = d.getAll("config.phases") as ("input" | "output")[];
  if (phases.length > 0) config.phases = phases;
  if (guardType === "pii_detection") {
    const entities = d.getAll("config.entities") as Config["entities"] & string[];
    if (entities.length > 0) config.entities = entities;
  }
  if (guardType === "toxicity") {
    const categories = d.getAll("config.categories") as Config["categories"] & string[];
    if (categories.length > 0) config.categories = categories;
    // sent either way: a template without the key has the head unless it redacts
    config.classifier = checked(d, "config.classifier");
  }
  if (guardType === "off_topic") {
    const topics = lines(d, "config.topics").map((l) => {
      const [name = "", kws = ""] = l.split(/:(.*)/s);
      return {
        name: name.trim(),
        keywords: kws
          .split(",")
          .map((k) => k.trim())
          .filter(Boolean),
      };
    });
    if (topics.length > 0) config.topics = topics;
  }
  if (guardType === "custom") {
    config.patterns = lines(d, "config.patterns");
    config.keywords = lines(d, "config.keywords");
  }
  if (guardType === "prompt_injection") config.decodeBase64 = checked(d, "config.decodeBase64");
  return {
    name: text(d, "name") ?? invalid("name", "Enter a name."),
    description: text(d, "description") ?? null,
    guardType,
    config,
  };
}

function TemplateForm({ template }: { template?: Template }) {
  const [guardType, setGuardType] = useState<Template["guardType"]>(template?.guardType ?? "custom");
  const c = template?.config;
  return (
    <Form
      id="guard-template"
      label={template ? "Edit guard template" : "New guard template"}
      submit={template ? "Save template" : "Create template"}
      onSubmit={async (d) => {
        const body = templateBody(d, guardType);
        if (template) await call(api.PUT("/governance/guard-templates/{id}", { params: { path: { id: template.id } }, body }));
        else await call(api.POST("/governance/guard-templates", { body: { ...body, description: body.description ?? undefined } }));
        navigate(href("/guard-templates"));
      }}
      extra={<Link href={href("/guard-templates")}>Cancel</Link>}
    >
      <Field name="name" label="Name" required defaultValue={template?.name} />
      <TextArea name="description" label="Description" rows={2} defaultValue={template?.description ?? ""} />
      <Select
        name="guardType"
        label="Guard"
        options={GUARD_TYPES}
        value={guardType}
        onChange={(e) => setGuardType(e.currentTarget.value as Template["guardType"])}
      />
      <Select
        name="config.sensitivity"
        label="Sensitivity"
        options={[
          ["low", "low (acts at confidence 0.8)"],
          ["medium", "medium (0.6)"],
          ["high", "high (0.4)"],
        ]}
        defaultValue={c?.sensitivity ?? "medium"}
      />
      <Select
        name="config.action"
        label="Action"
        options={[
          ["block", "block: refuse the call"],
          ["redact", "redact: replace what matched"],
          ["flag", "flag: record only"],
        ]}
        defaultValue={c?.action ?? "block"}
      />
      <CheckboxGroup
        name="config.phases"
        legend="Phases"
        options={["input", "output"]}
        checked={c?.phases ?? []}
        hint="None checked: the guard's default"
      />
      <TextArea
        name="config.allowlist"
        label="Allowlist"
        rows={3}
        defaultValue={(c?.allowlist ?? []).join("\n")}
        hint="One text per line that never triggers the guard"
      />
      {guardType === "pii_detection" && (
        <CheckboxGroup
          name="config.entities"
          legend="Kinds of data"
          options={ENTITIES}
          checked={c?.entities ?? []}
          hint="None checked: all kinds"
        />
      )}
      {guardType === "toxicity" && (
        <>
          <CheckboxGroup
            name="config.categories"
            legend="Categories"
            options={CATEGORIES}
            checked={c?.categories ?? []}
            hint="None checked: all categories"
          />
          <Checkbox
            name="config.classifier"
            label="Also score prompts with the classifier's toxicity head (action block or flag)"
            defaultChecked={toxicityHeadOn(c)}
          />
        </>
      )}
      {guardType === "off_topic" && (
        <TextArea
          name="config.topics"
          label="Allowed topics"
          rows={4}
          defaultValue={topicLines(c?.topics)}
          hint="One topic per line: name: keyword, keyword. Empty: the service's allowed topics"
        />
      )}
      {guardType === "custom" && (
        <>
          <TextArea
            name="config.patterns"
            label="Patterns"
            rows={4}
            spellcheck={false}
            defaultValue={(c?.patterns ?? []).map((p) => (typeof p === "string" ? p : p.pattern)).join("\n")}
            hint="One JavaScript regular expression per line"
          />
          <TextArea
            name="config.keywords"
            label="Keywords"
            rows={3}
            defaultValue={(c?.keywords ?? []).join("\n")}
            hint="One keyword or phrase per line (whole words, any case)"
          />
        </>
      )}
      {guardType === "prompt_injection" && (
        <Checkbox name="config.decodeBase64" label="Look inside base64 blobs" defaultChecked={c?.decodeBase64 ?? true} />
      )}
    </Form>
  );
}

export function GuardTemplatePage({ id }: { id?: string }) {
  const [loaded] = useLoad(
    () => (id ? call(api.GET("/governance/guard-templates/{id}", { params: { path: { id } } })) : Promise.resolve(undefined)),
    [id],
  );
  const title = id ? "Edit guard template" : "New guard template";
  return (
    <Page title={title} lead={<Link href={href("/guard-templates")}>← Guard templates</Link>}>
      <Show value={loaded} what="the template">
        {(t) => (t && !t.workspaceId ? <p>This is a platform template: it is read-only to a workspace.</p> : <TemplateForm template={t} />)}
      </Show>
    </Page>
  );
}
