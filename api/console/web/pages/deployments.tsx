// A service's deployments: the history (GET .../deployments), "Deploy now" (POST, the branch's
// latest commit or a given one), "Roll back" (POST .../{id}/redeploy), and one deployment with its
// build and release-command logs (GET .../logs, plain text), polled every 2 seconds while it runs.
import { useEffect, useRef } from "preact/hooks";
import { api, call, type Schemas } from "../api.ts";
import { Link, navigate } from "../router.tsx";
import { useWorkspace } from "../session.ts";
import { ActionButton, Empty, Field, Form, Show, Status, TableWrap, Time, duration, shortSha, text, useLoad, usePoll } from "../ui.tsx";
import { ServiceFrame, servicePath, type Service } from "./frame.tsx";

type Deployment = Schemas["Deployment"];

const RUNNING = new Set<Deployment["status"]>(["queued", "building", "releasing", "deploying"]);
/** A deployment with an image that no longer serves can be deployed again. */
const ROLLBACK_FROM = new Set<Deployment["status"]>(["succeeded", "superseded", "failed"]);

function deploymentPath(appId: string, id: string): string {
  return servicePath(appId, `/deployments/${encodeURIComponent(id)}`);
}

function RollBack({ appId, d, label }: { appId: string; d: Deployment; label?: string }) {
  const wsId = useWorkspace();
  return (
    <ActionButton
      label={label ?? `Roll back to deployment ${d.number}`}
      onClick={async () => {
        const created = await call(
          api.POST("/workspaces/{wsId}/apps/{appId}/deployments/{deploymentId}/redeploy", {
            params: { path: { wsId, appId, deploymentId: d.id } },
          }),
        );
        navigate(deploymentPath(appId, created.id));
      }}
    >
      Roll back
    </ActionButton>
  );
}

function DeployNow({ service }: { service: Service }) {
  const wsId = useWorkspace();
  if (!service.gitRepoUrl)
    return (
      <p class="hint">
        This service deploys an image: <Link href={servicePath(service.id, "/edit")}>change its image</Link> to deploy another one.
      </p>
    );
  return (
    <Form
      id="deploy"
      label="Deploy now"
      submit="Deploy now"
      class="form inline"
      onSubmit={async (d) => {
        const sha = text(d, "commitSha");
        const created = await call(
          api.POST("/workspaces/{wsId}/apps/{appId}/deployments", {
            params: { path: { wsId, appId: service.id } },
            body: sha ? { commitSha: sha } : {},
          }),
        );
        navigate(deploymentPath(service.id, created.id));
      }}
    >
      <Field name="commitSha" label="Commit (optional)" hint={`Empty: the latest commit of ${service.gitBranch}`} spellcheck={false} />
    </Form>
  );
}

function DeploymentList({ service }: { service: Service }) {
  const wsId = useWorkspace();
  const [list, reload] = useLoad(
    () => call(api.GET("/workspaces/{wsId}/apps/{appId}/deployments", { params: { path: { wsId, appId: service.id } } })),
    [wsId, service.id],
  );
  const running = list.state === "ok" && list.data.data.some((d) => RUNNING.has(d.status));
  usePoll(reload, 5000, running);
  return (
    <>
      <DeployNow service={service} />
      <h2>History</h2>
      <Show value={list} what="deployments">
        {(l) =>
          l.data.length === 0 ? (
            <Empty>No deployment yet.</Empty>
          ) : (
            <TableWrap label="Deployments">
              <thead>
                <tr>
                  <th scope="col">Deployment</th>
                  <th scope="col">Commit</th>
                  <th scope="col">Trigger</th>
                  <th scope="col">Status</th>
                  <th scope="col">Started</th>
                  <th scope="col">Duration</th>
                  <th scope="col">
                    <span class="visually-hidden">Actions</span>
                  </th>
                </tr>
              </thead>
              <tbody>
                {l.data.map((d) => (
                  <tr key={d.id}>
                    <th scope="row">
                      <Link href={deploymentPath(service.id, d.id)}>#{d.number}</Link>
                    </th>
                    <td>
                      <code>{shortSha(d.gitCommitSha)}</code> <span class="clip">{d.gitCommitMessage ?? (d.image ? "Image" : "")}</span>
                    </td>
                    <td>{d.trigger}</td>
                    <td>
                      <Status value={d.status} />
                    </td>
                    <td>
                      <Time iso={d.createdAt} />
                    </td>
                    <td>{duration(d.createdAt, d.finishedAt)}</td>
                    <td>{d.image && ROLLBACK_FROM.has(d.status) && <RollBack appId={service.id} d={d} />}</td>
                  </tr>
                ))}
              </tbody>
            </TableWrap>
          )
        }
      </Show>
    </>
  );
}

export function DeploymentsPage({ appId }: { appId: string }) {
  return (
    <ServiceFrame appId={appId} section="Deployments">
      {(service) => <DeploymentList service={service} />}
    </ServiceFrame>
  );
}

function Logs({ appId, deploymentId, running }: { appId: string; deploymentId: string; running: boolean }) {
  const wsId = useWorkspace();
  const [logs, reload] = useLoad(
    () =>
      call(
        api.GET("/workspaces/{wsId}/apps/{appId}/deployments/{deploymentId}/logs", {
          params: { path: { wsId, appId, deploymentId } },
          parseAs: "text",
        }),
      ),
    [wsId, appId, deploymentId],
  );
  usePoll(reload, 2000, running);
  const pre = useRef<HTMLPreElement>(null);
  const text = logs.state === "ok" ? logs.data : "";
  useEffect(() => {
    // Following: keep the newest lines in view while the deployment runs
    if (running && pre.current) pre.current.scrollTop = pre.current.scrollHeight;
  }, [text, running]);
  return (
    <section aria-labelledby="logs-h">
      <h2 id="logs-h">Logs</h2>
      {running && (
        <p class="muted" role="status">
          Following the logs while the deployment runs…
        </p>
      )}
      <Show value={logs} what="the logs">
        {(t) =>
          t ? (
            <pre ref={pre} class="logs" role="log" aria-label="Build and release logs" tabIndex={0}>
              {t}
            </pre>
          ) : (
            <Empty>No log lines yet.</Empty>
          )
        }
      </Show>
    </section>
  );
}

function DeploymentView({ service, deploymentId }: { service: Service; deploymentId: string }) {
  const wsId = useWorkspace();
  const [loaded, reload] = useLoad(
    () =>
      call(
        api.GET("/workspaces/{wsId}/apps/{appId}/deployments/{deploymentId}", {
          params: { path: { wsId, appId: service.id, deploymentId } },
        }),
      ),
    [wsId, service.id, deploymentId],
  );
  const running = loaded.state === "ok" && RUNNING.has(loaded.data.status);
  usePoll(reload, 2000, running);
  return (
    <Show value={loaded} what="the deployment">
      {(d) => (
        <>
          <dl class="facts">
            <div>
              <dt>Deployment</dt>
              <dd>
                #{d.number} ({d.id})
              </dd>
            </div>
            <div>
              <dt>Status</dt>
              <dd>
                <Status value={d.status} />
              </dd>
            </div>
            <div>
              <dt>Trigger</dt>
              <dd>{d.trigger + (d.rollbackOf ? ` of ${d.rollbackOf}` : "")}</dd>
            </div>
            <div>
              <dt>Commit</dt>
              <dd>
                <code>{shortSha(d.gitCommitSha)}</code> {d.gitCommitMessage ?? ""}
              </dd>
            </div>
            <div>
              <dt>Image</dt>
              <dd class="break">{d.image ?? "Not built yet"}</dd>
            </div>
            <div>
              <dt>Created</dt>
              <dd>
                <Time iso={d.createdAt} />
              </dd>
            </div>
            <div>
              <dt>Build</dt>
              <dd>{duration(d.buildStartedAt, d.buildFinishedAt)}</dd>
            </div>
            <div>
              <dt>Release command</dt>
              <dd>{duration(d.releaseStartedAt, d.releaseFinishedAt)}</dd>
            </div>
            <div>
              <dt>Deployed</dt>
              <dd>
                <Time iso={d.deployedAt} />
              </dd>
            </div>
            <div>
              <dt>Duration</dt>
              <dd>{duration(d.createdAt, d.finishedAt)}</dd>
            </div>
          </dl>
          {d.failure && (
            <div class="problem">
              <p class="problem-title">
                Failed at {d.failure.step}: {d.failure.reason}
              </p>
              <pre class="wrap">{d.failure.message}</pre>
            </div>
          )}
          {d.image && ROLLBACK_FROM.has(d.status) && <RollBack appId={service.id} d={d} label="Roll back to this deployment" />}
          <Logs appId={service.id} deploymentId={d.id} running={running} />
        </>
      )}
    </Show>
  );
}

export function DeploymentPage({ appId, deploymentId }: { appId: string; deploymentId: string }) {
  return (
    <ServiceFrame appId={appId} section={`Deployment ${deploymentId}`}>
      {(service) => <DeploymentView service={service} deploymentId={deploymentId} />}
    </ServiceFrame>
  );
}
