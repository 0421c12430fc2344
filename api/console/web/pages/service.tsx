// One service: its overview (facts, the pipeline's stages from GET .../pipeline-state, the
// runtime's replicas, CPU and memory) with its actions (edit, soft delete, resume, permanent
// delete after a confirmation), and the edit form (PATCH with the fields that changed).
import type { ComponentChildren } from "preact";
import { useState } from "preact/hooks";
import { api, call, type Schemas } from "../api.ts";
import { href, Link, navigate } from "../router.tsx";
import { useWorkspace } from "../session.ts";
import { ActionButton, Form, Show, Status, Time, count, num, shortSha, text, checked, useLoad, usePoll } from "../ui.tsx";
import { ServiceFrame, servicePath, type Service } from "./frame.tsx";
import { ServiceFields } from "./services.tsx";

type Pipeline = Schemas["PipelineState"];

function Stage(props: { name: string; status: string; children: ComponentChildren }) {
  return (
    <li class="stage">
      <h3>{props.name}</h3>
      <p>
        <Status value={props.status} />
      </p>
      <dl class="facts small">{props.children}</dl>
    </li>
  );
}

function Fact({ term, children }: { term: string; children: ComponentChildren }) {
  return (
    <div>
      <dt>{term}</dt>
      <dd>{children}</dd>
    </div>
  );
}

function PipelineView({ p }: { p: Pipeline }) {
  return (
    <ol class="pipeline" aria-label="Pipeline stages">
      <Stage name="Source" status={p.source.status}>
        <Fact term="Repository">{p.source.gitRepo ?? "An image"}</Fact>
        <Fact term="Branch">{p.source.branch}</Fact>
        <Fact term="Commit">
          {shortSha(p.source.lastCommitSha)} {p.source.lastCommitMessage ?? ""}
        </Fact>
      </Stage>
      <Stage name="Build" status={p.build.status}>
        <Fact term="Stack">{p.build.buildpack ?? "—"}</Fact>
        <Fact term="Image">
          <span class="break">{p.build.imageTag ?? "—"}</span>
        </Fact>
        <Fact term="Duration">{p.build.durationSeconds === null ? "—" : `${p.build.durationSeconds} s`}</Fact>
      </Stage>
      <Stage name="Deploy" status={p.deploy.status}>
        <Fact term="Deployed">
          <Time iso={p.deploy.deployedAt} />
        </Fact>
        <Fact term="Revision">{p.deploy.revisionName ?? "—"}</Fact>
      </Stage>
      <Stage name="Governance" status={p.harbor.status}>
        <Fact term="Guards">{p.harbor.guardsEnabled ? "On" : "Off"}</Fact>
        <Fact term="Last eval">
          <Time iso={p.harbor.lastEvalAt} />
        </Fact>
      </Stage>
      <Stage name="Runtime" status={p.runtime.status}>
        <Fact term="Replicas">
          {p.runtime.readyReplicas} of {p.runtime.totalReplicas} ready
        </Fact>
        <Fact term="CPU">
          {p.runtime.cpuUsageMillicores === null ? "Not measured" : `${count(p.runtime.cpuUsageMillicores)} millicores`}
        </Fact>
        <Fact term="Memory">{p.runtime.memoryUsageMi === null ? "Not measured" : `${count(p.runtime.memoryUsageMi)} MiB`}</Fact>
      </Stage>
    </ol>
  );
}

function Overview({ service, reload }: { service: Service; reload: () => Promise<void> }) {
  const wsId = useWorkspace();
  const path = { wsId, appId: service.id };
  const [pipeline, reloadPipeline] = useLoad(
    () => call(api.GET("/workspaces/{wsId}/apps/{appId}/pipeline-state", { params: { path } })),
    [wsId, service.id],
  );
  const deploying = pipeline.state === "ok" && pipeline.data.overallStatus === "deploying";
  usePoll(reloadPipeline, 5000, deploying);
  const [confirming, setConfirming] = useState(false);
  const [confirmText, setConfirmText] = useState("");
  const refresh = async () => {
    await reload();
    await reloadPipeline();
  };

  return (
    <>
      <section aria-labelledby="facts-h">
        <h2 id="facts-h">Summary</h2>
        <dl class="facts">
          <Fact term="Status">
            <Status value={service.status} />
          </Fact>
          <Fact term="Type">{service.type}</Fact>
          <Fact term="URL">
            {service.url ? (
              <a href={service.url} target="_blank" rel="noopener noreferrer">
                {service.url}
              </a>
            ) : (
              "Not routed"
            )}
          </Fact>
          <Fact term="Source">
            <span class="break">
              {service.gitRepoUrl ? `${service.gitRepoUrl} (${service.gitBranch})` : (service.image ?? "No image yet")}
            </span>
          </Fact>
          <Fact term="Latest deployment">
            {service.latestDeployment ? (
              <Link href={servicePath(service.id, `/deployments/${encodeURIComponent(service.latestDeployment.id)}`)}>
                {service.latestDeployment.id} ({service.latestDeployment.status.replace(/_/g, " ")})
              </Link>
            ) : (
              "None"
            )}
          </Fact>
          <Fact term="Visibility">{service.visibility}</Fact>
          <Fact term="Resources">
            {service.cpuLimitMillicores} millicores, {service.memoryLimitMi} MiB, {service.minReplicas}–{service.maxReplicas} replicas
          </Fact>
        </dl>
      </section>
      <section aria-labelledby="pipeline-h">
        <h2 id="pipeline-h">Pipeline</h2>
        <Show value={pipeline} what="the pipeline">
          {(p) => (
            <>
              <p>
                Overall: <Status value={p.overallStatus} /> {deploying && <span class="muted">(refreshed every 5 seconds)</span>}
              </p>
              <PipelineView p={p} />
            </>
          )}
        </Show>
        <ActionButton onClick={refresh}>Refresh</ActionButton>
      </section>
      <section aria-labelledby="actions-h">
        <h2 id="actions-h">Actions</h2>
        <div class="actions">
          <Link href={servicePath(service.id, "/edit")} class="button">
            Edit service
          </Link>
          {service.status === "disabled" ? (
            <ActionButton
              kind="primary"
              onClick={async () => {
                await call(api.POST("/workspaces/{wsId}/apps/{appId}/resume", { params: { path } }));
                await refresh();
              }}
            >
              Resume
            </ActionButton>
          ) : (
            <ActionButton
              onClick={async () => {
                await call(api.DELETE("/workspaces/{wsId}/apps/{appId}", { params: { path } }));
                await refresh();
              }}
            >
              Soft delete
            </ActionButton>
          )}
          {!confirming && (
            <button type="button" class="danger" onClick={() => setConfirming(true)}>
              Permanently delete…
            </button>
          )}
        </div>
        <p class="hint">
          Soft delete stops the service and removes it from routing; its configuration and data are kept until you resume it.
        </p>
        {confirming && (
          <div class="confirm" role="group" aria-labelledby="confirm-h">
            <h3 id="confirm-h">Delete {service.name} permanently?</h3>
            <p>
              This removes the service, its workloads, its routing and its governance store (traces, evals, guard blocks). It cannot be
              undone.
            </p>
            <div class="field">
              <label for="confirm-slug">Type {service.slug} to confirm</label>
              <input id="confirm-slug" value={confirmText} onInput={(e) => setConfirmText(e.currentTarget.value)} autocomplete="off" />
            </div>
            <div class="actions">
              <ActionButton
                kind="danger"
                disabled={confirmText !== service.slug}
                onClick={async () => {
                  await call(api.DELETE("/workspaces/{wsId}/apps/{appId}/permanent", { params: { path } }));
                  navigate(href("/services"));
                }}
              >
                Delete permanently
              </ActionButton>
              <button type="button" onClick={() => setConfirming(false)}>
                Cancel
              </button>
            </div>
          </div>
        )}
      </section>
    </>
  );
}

export function ServicePage({ appId }: { appId: string }) {
  return <ServiceFrame appId={appId}>{(service, reload) => <Overview service={service} reload={reload} />}</ServiceFrame>;
}

/** The PATCH body: every field of the form whose value differs from the service's (an emptied optional field is null). */
function changes(d: FormData, s: Service): Schemas["UpdateServiceRequest"] {
  const b: Record<string, unknown> = {};
  const str = (k: keyof Service & keyof Schemas["UpdateServiceRequest"], nullable: boolean) => {
    if (!d.has(k)) return;
    const v = text(d, k);
    const now = s[k] as unknown;
    if (v === undefined) {
      if (nullable && now !== null && now !== "") b[k] = null;
    } else if (v !== now) b[k] = v;
  };
  const int = (k: keyof Service & keyof Schemas["UpdateServiceRequest"], nullable: boolean) => {
    if (!d.has(k)) return;
    const v = num(d, k);
    if (v === undefined) {
      if (nullable) b[k] = null;
    } else if (v !== s[k]) b[k] = v;
  };
  str("name", false);
  str("slug", false);
  str("description", true);
  str("type", false);
  str("schedule", true);
  str("image", true);
  str("gitRepoUrl", true);
  str("gitBranch", false);
  str("dockerfilePath", true);
  str("gitInstallationId", true);
  str("releaseCommand", true);
  str("visibility", false);
  int("port", false);
  int("cpuLimitMillicores", false);
  int("memoryLimitMi", false);
  int("minReplicas", false);
  int("maxReplicas", true);
  int("cpuTargetUtilization", true);
  if (s.gitRepoUrl !== null && checked(d, "autoDeploy") !== s.autoDeploy) b.autoDeploy = checked(d, "autoDeploy");
  return b;
}

export function EditServicePage({ appId }: { appId: string }) {
  const wsId = useWorkspace();
  return (
    <ServiceFrame appId={appId} section="Edit service">
      {(service) => (
        <Form
          id="edit-service"
          label="Edit service"
          submit="Save changes"
          onSubmit={async (d) => {
            const updated = await call(
              api.PATCH("/workspaces/{wsId}/apps/{appId}", { params: { path: { wsId, appId } }, body: changes(d, service) }),
            );
            navigate(servicePath(updated.id));
          }}
          extra={<Link href={servicePath(appId)}>Cancel</Link>}
        >
          <ServiceFields service={service} source={service.gitRepoUrl ? "git" : "image"} />
        </Form>
      )}
    </ServiceFrame>
  );
}
