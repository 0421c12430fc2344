// The frame of every page of one service: the service loaded once (GET .../apps/{appId}), a
// breadcrumb, the page's single h1, and the service's sections as a navigation.
import type { ComponentChildren } from "preact";
import { api, call, type Schemas } from "../api.ts";
import { href, Link, NavLink, seg } from "../router.tsx";
import { useWorkspace } from "../session.ts";
import { Loading, Page, ProblemAlert, useLoad } from "../ui.tsx";

export type Service = Schemas["Service"];

export function servicePath(appId: string, rest = ""): string {
  return href(`/services/${seg(appId)}${rest}`);
}

export function ServiceFrame(props: {
  appId: string;
  /** The page's heading; the service's name when absent (the overview). */
  section?: string;
  sub?: "governance";
  children: (service: Service, reload: () => Promise<void>) => ComponentChildren;
}) {
  const wsId = useWorkspace();
  const [loaded, reload] = useLoad(
    () => call(api.GET("/workspaces/{wsId}/apps/{appId}", { params: { path: { wsId, appId: props.appId } } })),
    [wsId, props.appId],
  );
  const name = loaded.state === "ok" ? loaded.data.name : props.appId;
  const title = props.section ? `${props.section} · ${name}` : name;
  const lead = (
    <nav aria-label="Breadcrumb" class="breadcrumb">
      <ol>
        <li>
          <Link href={href("/services")}>Services</Link>
        </li>
        {props.section && (
          <li>
            <Link href={servicePath(props.appId)}>{name}</Link>
          </li>
        )}
      </ol>
    </nav>
  );
  return (
    <Page title={title} heading={props.section ?? name} lead={lead}>
      <nav aria-label="Service sections" class="tabs">
        <ul>
          <li>
            <NavLink href={servicePath(props.appId)}>Overview</NavLink>
          </li>
          <li>
            <NavLink href={servicePath(props.appId, "/deployments")} prefix>
              Deployments
            </NavLink>
          </li>
          <li>
            <NavLink href={servicePath(props.appId, "/environment")}>Environment</NavLink>
          </li>
          <li>
            <NavLink href={servicePath(props.appId, "/domains")}>Domains</NavLink>
          </li>
          <li>
            <NavLink href={servicePath(props.appId, "/shares")}>Shares</NavLink>
          </li>
          <li>
            <NavLink href={servicePath(props.appId, "/governance")} prefix>
              Governance
            </NavLink>
          </li>
        </ul>
      </nav>
      {props.sub === "governance" && (
        <nav aria-label="Governance sections" class="tabs sub">
          <ul>
            <li>
              <NavLink href={servicePath(props.appId, "/governance")}>Analytics</NavLink>
            </li>
            <li>
              <NavLink href={servicePath(props.appId, "/governance/traces")} prefix>
                Traces
              </NavLink>
            </li>
            <li>
              <NavLink href={servicePath(props.appId, "/governance/guard-blocks")}>Guard blocks</NavLink>
            </li>
            <li>
              <NavLink href={servicePath(props.appId, "/governance/configuration")}>Configuration</NavLink>
            </li>
            <li>
              <NavLink href={servicePath(props.appId, "/governance/audit")}>Audit</NavLink>
            </li>
          </ul>
        </nav>
      )}
      {loaded.state === "loading" && <Loading what="the service" />}
      {loaded.state === "error" && <ProblemAlert problem={loaded.problem} />}
      {loaded.state === "ok" && props.children(loaded.data, reload)}
    </Page>
  );
}
