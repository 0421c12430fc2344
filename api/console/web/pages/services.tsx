// The services list (GET /workspaces/{wsId}/apps with the list's own query parameters, kept in the
// page's URL), the workspace's figures (GET .../apps/stats) and the form that creates a service.
import { useState } from "preact/hooks";
import { api, call, type Operations, type Schemas } from "../api.ts";
import { href, Link, navigate, seg, useLocation } from "../router.tsx";
import { useWorkspace } from "../session.ts";
import {
  Checkbox,
  Empty,
  Field,
  Form,
  Page,
  Select,
  Show,
  Status,
  TableWrap,
  TextArea,
  Time,
  checked,
  num,
  text,
  useLoad,
} from "../ui.tsx";

type ListQuery = NonNullable<Operations["listServices"]["parameters"]["query"]>;

export const SERVICE_STATUSES = ["active", "deploying", "failed", "build_failed", "disabled", "stopped"] as const;
export const SERVICE_TYPES = ["web", "api", "worker", "cron"] as const;

function Stats() {
  const wsId = useWorkspace();
  const [stats] = useLoad(() => call(api.GET("/workspaces/{wsId}/apps/stats", { params: { path: { wsId } } })), [wsId]);
  return (
    <section aria-labelledby="stats-h">
      <h2 id="stats-h" class="visually-hidden">
        Figures
      </h2>
      <Show value={stats} what="figures">
        {(s) => (
          <dl class="figures">
            {(
              [
                ["Total", s.total],
                ["Active", s.active],
                ["Deploying", s.deploying],
                ["Failed", s.failed],
                ["Stopped", s.stopped],
              ] as const
            ).map(([label, n]) => (
              <div key={label} class="figure">
                <dt>{label}</dt>
                <dd>{n}</dd>
              </div>
            ))}
          </dl>
        )}
      </Show>
    </section>
  );
}

export function ServicesPage() {
  const wsId = useWorkspace();
  const { query } = useLocation();
  const q: ListQuery = {
    search: query.get("search") || undefined,
    status: (SERVICE_STATUSES as readonly string[]).includes(query.get("status") ?? "")
      ? (query.get("status") as (typeof SERVICE_STATUSES)[number])
      : undefined,
    type: (SERVICE_TYPES as readonly string[]).includes(query.get("type") ?? "")
      ? (query.get("type") as (typeof SERVICE_TYPES)[number])
      : undefined,
    page: Number(query.get("page")) > 1 ? Number(query.get("page")) : undefined,
    limit: 20,
  };
  const key = JSON.stringify(q);
  const [list] = useLoad(() => call(api.GET("/workspaces/{wsId}/apps", { params: { path: { wsId }, query: q } })), [wsId, key]);
  const pageHref = (page: number) =>
    href("/services", { search: q.search, status: q.status, type: q.type, page: page > 1 ? page : undefined });

  return (
    <Page title="Services">
      <p>
        <Link href={href("/services/new")} class="button primary">
          New service
        </Link>
      </p>
      <Stats />
      <form
        role="search"
        aria-label="Filter services"
        class="filters"
        onSubmit={(e) => {
          e.preventDefault();
          const d = new FormData(e.currentTarget);
          navigate(href("/services", { search: text(d, "search"), status: text(d, "status"), type: text(d, "type") }));
        }}
      >
        <div class="field">
          <label for="filter-search">Search</label>
          <input id="filter-search" name="search" type="search" defaultValue={q.search ?? ""} />
        </div>
        <div class="field">
          <label for="filter-status">Status</label>
          <select id="filter-status" name="status">
            <option value="">Any status</option>
            {SERVICE_STATUSES.map((s) => (
              <option key={s} value={s} selected={s === q.status}>
                {s.replace("_", " ")}
              </option>
            ))}
          </select>
        </div>
        <div class="field">
          <label for="filter-type">Type</label>
          <select id="filter-type" name="type">
            <option value="">Any type</option>
            {SERVICE_TYPES.map((t) => (
              <option key={t} value={t} selected={t === q.type}>
                {t}
              </option>
            ))}
          </select>
        </div>
        <div class="actions">
          <button type="submit">Apply filters</button>
        </div>
      </form>
      <Show value={list} what="services">
        {(l) =>
          l.data.length === 0 ? (
            <Empty>
              {q.search || q.status || q.type
                ? "No service matches these filters."
                : "There is no service yet: create one with New service."}
            </Empty>
          ) : (
            <>
              <TableWrap label="Services">
                <thead>
                  <tr>
                    <th scope="col">Name</th>
                    <th scope="col">Status</th>
                    <th scope="col">Type</th>
                    <th scope="col">URL</th>
                    <th scope="col">Source</th>
                    <th scope="col">Created</th>
                  </tr>
                </thead>
                <tbody>
                  {l.data.map((s) => (
                    <tr key={s.id}>
                      <th scope="row">
                        <Link href={href(`/services/${seg(s.id)}`)}>{s.name}</Link>
                      </th>
                      <td>
                        <Status value={s.status} />
                      </td>
                      <td>{s.type}</td>
                      <td>
                        {s.url ? (
                          <a href={s.url} rel="noopener noreferrer" target="_blank">
                            {s.url.replace(/^https?:\/\//, "")}
                          </a>
                        ) : (
                          "—"
                        )}
                      </td>
                      <td class="break">{s.gitRepoUrl ? `${s.gitRepoUrl} (${s.gitBranch})` : "Image"}</td>
                      <td>
                        <Time iso={s.createdAt} />
                      </td>
                    </tr>
                  ))}
                </tbody>
              </TableWrap>
              <nav aria-label="Pages of services" class="pager">
                <span>
                  Page {l.meta.page} of {Math.max(1, l.meta.totalPages)} ({l.meta.total} services)
                </span>
                {l.meta.page > 1 && <Link href={pageHref(l.meta.page - 1)}>Previous page</Link>}
                {l.meta.page < l.meta.totalPages && <Link href={pageHref(l.meta.page + 1)}>Next page</Link>}
              </nav>
            </>
          )
        }
      </Show>
    </Page>
  );
}

type Service = Schemas["Service"];

/** The fields of a service, shared by the create and edit forms (names as the API's body fields). */
export function ServiceFields({ service, source }: { service?: Service; source: "image" | "git" }) {
  const [type, setType] = useState<string>(service?.type ?? "web");
  return (
    <>
      <Field name="name" label="Name" required defaultValue={service?.name} maxLength={100} />
      <Field
        name="slug"
        label="Slug"
        required
        defaultValue={service?.slug}
        hint="Lower-case letters, digits and hyphens: the service is served at <slug>.<base domain>."
      />
      <TextArea name="description" label="Description" rows={2} defaultValue={service?.description ?? ""} />
      <Select
        name="type"
        label="Type"
        options={[
          ["web", "web: a website, served over HTTP"],
          ["api", "api: an HTTP API"],
          ["worker", "worker: no route"],
          ["cron", "cron: runs on a schedule"],
        ]}
        value={type}
        onChange={(e) => setType(e.currentTarget.value)}
      />
      {type === "cron" && (
        <Field name="schedule" label="Schedule" defaultValue={service?.schedule ?? ""} hint="A cron expression, e.g. 0 3 * * *" />
      )}
      {source === "image" ? (
        <Field
          name="image"
          label="Image to deploy"
          required
          defaultValue={service?.image ?? ""}
          hint="A prebuilt image, e.g. ghcr.io/acme/web:1.2.0"
        />
      ) : (
        <fieldset class="group">
          <legend>Git repository</legend>
          <Field name="gitRepoUrl" label="Repository URL" type="url" required defaultValue={service?.gitRepoUrl ?? ""} />
          <Field name="gitBranch" label="Branch" defaultValue={service?.gitBranch ?? "main"} />
          <Field
            name="dockerfilePath"
            label="Dockerfile path"
            defaultValue={service?.dockerfilePath ?? ""}
            hint="Empty: the stack is detected"
          />
          <Field
            name="gitInstallationId"
            label="Credentials id"
            defaultValue={service?.gitInstallationId ?? ""}
            hint="For a private repository: names the Secret git-credentials-<id> holding username and password"
          />
          <Checkbox name="autoDeploy" label="Deploy every push to the branch" defaultChecked={service?.autoDeploy ?? true} />
        </fieldset>
      )}
      <Field
        name="releaseCommand"
        label="Release command"
        defaultValue={service?.releaseCommand ?? ""}
        hint="Runs once in the new image before each rollout; a failure stops it"
      />
      <details class="group">
        <summary>Port, visibility, resources and scaling</summary>
        <Field name="port" label="Port" type="number" min={1} max={65535} defaultValue={service?.port ?? ""} />
        <Select
          name="visibility"
          label="Visibility"
          options={[
            ["public", "public: anyone can open it"],
            ["private", "private: viewers need a share link"],
          ]}
          defaultValue={service?.visibility ?? "public"}
        />
        <Field
          name="cpuLimitMillicores"
          label="CPU limit (millicores)"
          type="number"
          min={1}
          defaultValue={service?.cpuLimitMillicores ?? ""}
        />
        <Field name="memoryLimitMi" label="Memory limit (MiB)" type="number" min={1} defaultValue={service?.memoryLimitMi ?? ""} />
        <Field name="minReplicas" label="Minimum replicas" type="number" min={0} defaultValue={service?.minReplicas ?? ""} />
        <Field name="maxReplicas" label="Maximum replicas" type="number" min={0} defaultValue={service?.maxReplicas ?? ""} />
        <Field
          name="cpuTargetUtilization"
          label="CPU target for autoscaling (%)"
          type="number"
          min={1}
          max={100}
          defaultValue={service?.cpuTargetUtilization ?? ""}
        />
      </details>
    </>
  );
}

/** The create body from the form: empty fields are left out (the API's defaults apply). */
export function serviceBody(d: FormData, source: "image" | "git"): Schemas["CreateServiceRequest"] {
  const body: Schemas["CreateServiceRequest"] = {
    name: text(d, "name") ?? "",
    slug: text(d, "slug") ?? "",
    description: text(d, "description"),
    type: text(d, "type") as Schemas["CreateServiceRequest"]["type"],
    schedule: text(d, "schedule"),
    releaseCommand: text(d, "releaseCommand"),
    port: num(d, "port"),
    visibility: text(d, "visibility") as Schemas["CreateServiceRequest"]["visibility"],
    cpuLimitMillicores: num(d, "cpuLimitMillicores"),
    memoryLimitMi: num(d, "memoryLimitMi"),
    minReplicas: num(d, "minReplicas"),
    maxReplicas: num(d, "maxReplicas"),
    cpuTargetUtilization: num(d, "cpuTargetUtilization"),
  };
  if (source === "image") body.image = text(d, "image");
  else {
    body.gitRepoUrl = text(d, "gitRepoUrl");
    body.gitBranch = text(d, "gitBranch");
    body.dockerfilePath = text(d, "dockerfilePath");
    body.gitInstallationId = text(d, "gitInstallationId");
    body.autoDeploy = checked(d, "autoDeploy");
  }
  for (const k of Object.keys(body) as (keyof typeof body)[]) if (body[k] === undefined) delete body[k];
  return body;
}

export function NewServicePage() {
  const wsId = useWorkspace();
  const [source, setSource] = useState<"image" | "git">("image");
  return (
    <Page title="New service" lead={<Link href={href("/services")}>← Services</Link>}>
      <fieldset class="group source">
        <legend>Deploy from</legend>
        <label class="choice">
          <input type="radio" name="source" value="image" checked={source === "image"} onChange={() => setSource("image")} /> An image
        </label>
        <label class="choice">
          <input type="radio" name="source" value="git" checked={source === "git"} onChange={() => setSource("git")} /> A Git repository
        </label>
      </fieldset>
      <Form
        id="new-service"
        label="New service"
        submit="Create service"
        onSubmit={async (d) => {
          const created = await call(api.POST("/workspaces/{wsId}/apps", { params: { path: { wsId } }, body: serviceBody(d, source) }));
          navigate(href(`/services/${seg(created.id)}`));
        }}
      >
        <ServiceFields source={source} />
      </Form>
    </Page>
  );
}
