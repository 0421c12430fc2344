// The Berth console: a static single-page app served under /console by the API itself
// (api/console/static.ts), built by hack/console.ts. It signs in with a workspace key exchanged
// for an HttpOnly session cookie, or as a workspace member with the organisation's identity
// provider (api/console/routes.ts), and then calls the API as that workspace.
import "uplot/dist/uPlot.min.css";
import "./styles.css";
import { render, type JSX } from "preact";
import { useEffect, useState } from "preact/hooks";
import { SessionContext } from "./session.ts";
import { api, call, useSessionToken, whenSessionEnds, type Session } from "./api.ts";
import { BASE, Link, match, navigate, NavLink, useLocation } from "./router.tsx";
import { Loading, Page, ProblemAlert, Working } from "./ui.tsx";
import { SignInPage } from "./pages/sign-in.tsx";
import { NewServicePage, ServicesPage } from "./pages/services.tsx";
import { EditServicePage, ServicePage } from "./pages/service.tsx";
import { DeploymentPage, DeploymentsPage } from "./pages/deployments.tsx";
import { EnvironmentPage } from "./pages/environment.tsx";
import { DomainsPage } from "./pages/domains.tsx";
import { SharesPage } from "./pages/shares.tsx";
import { AnalyticsPage, AuditPage, GuardBlocksPage, ObservabilityPage, TracePage, TracesPage } from "./pages/governance.tsx";
import { GuardTemplatePage, GuardTemplatesPage } from "./pages/guard-templates.tsx";
import type { Problem } from "./api.ts";

const SIGN_IN = `${BASE}/sign-in`;

/** Where to go back to after signing in: a console page only (never another site). */
function returnTo(next: string | null): string {
  return next && next.startsWith(`${BASE}/`) && !next.startsWith("//") && !next.startsWith(SIGN_IN) ? next : `${BASE}/services`;
}

type Route = [pattern: string, render: (p: Record<string, string>) => JSX.Element];

const routes: Route[] = [
  ["/services", () => <ServicesPage />],
  ["/services/new", () => <NewServicePage />],
  ["/services/:appId", (p) => <ServicePage appId={p.appId ?? ""} />],
  ["/services/:appId/edit", (p) => <EditServicePage appId={p.appId ?? ""} />],
  ["/services/:appId/deployments", (p) => <DeploymentsPage appId={p.appId ?? ""} />],
  ["/services/:appId/deployments/:deploymentId", (p) => <DeploymentPage appId={p.appId ?? ""} deploymentId={p.deploymentId ?? ""} />],
  ["/services/:appId/environment", (p) => <EnvironmentPage appId={p.appId ?? ""} />],
  ["/services/:appId/domains", (p) => <DomainsPage appId={p.appId ?? ""} />],
  ["/services/:appId/shares", (p) => <SharesPage appId={p.appId ?? ""} />],
  ["/services/:appId/governance", (p) => <AnalyticsPage appId={p.appId ?? ""} />],
  ["/services/:appId/governance/traces", (p) => <TracesPage appId={p.appId ?? ""} />],
  ["/services/:appId/governance/traces/:traceId", (p) => <TracePage appId={p.appId ?? ""} traceId={p.traceId ?? ""} />],
  ["/services/:appId/governance/guard-blocks", (p) => <GuardBlocksPage appId={p.appId ?? ""} />],
  ["/services/:appId/governance/configuration", (p) => <ObservabilityPage appId={p.appId ?? ""} />],
  ["/services/:appId/governance/audit", (p) => <AuditPage appId={p.appId ?? ""} />],
  ["/guard-templates", () => <GuardTemplatesPage />],
  ["/guard-templates/new", () => <GuardTemplatePage />],
  ["/guard-templates/:id", (p) => <GuardTemplatePage id={p.id ?? ""} />],
];

function NotFound() {
  return (
    <Page title="Page not found">
      <p>
        There is no console page at this address. <Link href={`${BASE}/services`}>Go to the services</Link>.
      </p>
    </Page>
  );
}

function Routes() {
  const { path } = useLocation();
  for (const [pattern, page] of routes) {
    const params = match(pattern, path);
    // keyed by the path: a new page (or the same page for another service) starts afresh
    if (params) return <div key={path}>{page(params)}</div>;
  }
  return <NotFound />;
}

function Header({ session, onSignOut }: { session: Session | undefined; onSignOut: () => Promise<void> }) {
  const [busy, setBusy] = useState(false);
  const [problem, setProblem] = useState<Problem>();
  const signOut = async () => {
    setBusy(true);
    try {
      await onSignOut();
    } catch (err) {
      setProblem((err as { problem?: Problem }).problem);
    } finally {
      setBusy(false);
    }
  };
  return (
    <header class="site-header">
      <div class="bar">
        <Link href={`${BASE}/services`} class="brand">
          Berth console
        </Link>
        {session && (
          <nav aria-label="Main" class="main-nav">
            <ul>
              <li>
                <NavLink href={`${BASE}/services`} prefix>
                  Services
                </NavLink>
              </li>
              <li>
                <NavLink href={`${BASE}/guard-templates`} prefix>
                  Guard templates
                </NavLink>
              </li>
            </ul>
          </nav>
        )}
        {session && (
          <div class="who">
            <span class="muted small">
              Workspace <strong>{session.workspaceId}</strong>
              {session.email && <> · {session.email}</>}
            </span>
            <button type="button" class="plain" disabled={busy} aria-busy={busy} onClick={() => void signOut()}>
              Sign out
            </button>
            {busy && <Working />}
          </div>
        )}
      </div>
      <ProblemAlert problem={problem} />
    </header>
  );
}

function App() {
  const loc = useLocation();
  // undefined: asking GET /console/session; null: signed out
  const [session, setSession] = useState<Session | null | undefined>(undefined);
  const [problem, setProblem] = useState<Problem>();

  const signedIn = (s: Session | null) => {
    useSessionToken(s ?? undefined);
    setSession(s);
  };

  useEffect(() => {
    whenSessionEnds(() => {
      signedIn(null);
      navigate(`${SIGN_IN}?next=${encodeURIComponent(location.pathname + location.search)}`, true);
    });
    void (async () => {
      const { data, response, error } = await api.GET("/console/session").catch((err: unknown) => ({
        data: undefined,
        error: err,
        response: undefined,
      }));
      if (data) signedIn(data);
      else if (response?.status === 401) signedIn(null);
      else {
        setProblem({
          type: "about:blank",
          title: "The console could not reach the API",
          status: response?.status ?? 0,
          detail: error instanceof Error ? error.message : `GET /api/v1/console/session answered ${response?.status ?? "nothing"}.`,
          instance: "",
          code: "unreachable",
          requestId: "",
        });
      }
    })();
  }, []);

  const onSignIn = match("/sign-in", loc.path) !== null;
  useEffect(() => {
    if (session === null && !onSignIn)
      navigate(`${SIGN_IN}?next=${encodeURIComponent(loc.path + (loc.query.size ? `?${loc.query}` : ""))}`, true);
    else if (session && onSignIn) navigate(returnTo(loc.query.get("next")), true);
    else if (session && (loc.path === BASE || loc.path === "/")) navigate(`${BASE}/services`, true);
  }, [session, onSignIn, loc]);

  const signOut = async () => {
    await call(api.DELETE("/console/session"));
    signedIn(null);
    navigate(SIGN_IN);
  };

  let body;
  if (problem) body = <ProblemAlert problem={problem} />;
  else if (session === undefined) body = <Loading what="your session" />;
  else if (session === null)
    body = onSignIn ? (
      <SignInPage
        next={returnTo(loc.query.get("next"))}
        workspace={loc.query.get("workspace")}
        onSignedIn={(s) => {
          signedIn(s);
          navigate(returnTo(loc.query.get("next")), true);
        }}
      />
    ) : (
      <Loading what="the sign-in page" />
    );
  else body = <Routes />;

  return (
    <SessionContext.Provider value={session ?? undefined}>
      <a class="skip" href="#main">
        Skip to content
      </a>
      <Header session={session ?? undefined} onSignOut={signOut} />
      <main id="main" tabIndex={-1}>
        {body}
      </main>
    </SessionContext.Provider>
  );
}

const root = document.getElementById("app");
if (root) render(<App />, root);
