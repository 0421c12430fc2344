// Sign-in: with the organisation's identity provider when the API has one (workspace members,
// GET /console/oidc/login, a plain navigation: the provider's pages are not the console's), and
// with a workspace key exchanged for the session cookie (POST /console/sessions). The key is sent
// once and kept nowhere by the browser: the form is cleared and the field is a password field.
import { api, call, type Session } from "../api.ts";
import { Field, Form, Page, text, useLoad } from "../ui.tsx";

/**
 * The identity provider's sign-in for this console page: back to `next` afterwards, into the
 * workspace the console's own address names (?workspace=, for a member of several).
 */
export function organisationSignIn(next: string, workspace: string | null): string {
  const q = new URLSearchParams({ next });
  if (workspace) q.set("workspace", workspace);
  return `/api/v1/console/oidc/login?${q.toString()}`;
}

export function SignInPage({
  onSignedIn,
  next,
  workspace,
}: {
  onSignedIn: (s: Session) => void;
  /** The console page to land on after signing in. */
  next: string;
  /** The workspace named in the sign-in page's address, if any. */
  workspace: string | null;
}) {
  // Without an answer the key's sign-in is still there; the organisation's shows only when offered.
  const [options] = useLoad(() => call(api.GET("/console/sign-in-options")), []);
  const oidc = options.state === "ok" && options.data.oidc;
  return (
    <Page title="Sign in" heading="Sign in to Berth">
      {oidc && (
        <section aria-labelledby="sign-in-organisation">
          <h2 id="sign-in-organisation">Workspace members</h2>
          <p class="lead">Members of a workspace sign in with their organisation's account.</p>
          <p>
            <a class="button primary" href={organisationSignIn(next, workspace)}>
              Sign in with your organisation
            </a>
          </p>
          {workspace && <p class="hint">You will sign in to workspace {workspace}.</p>}
        </section>
      )}
      <section aria-labelledby={oidc ? "sign-in-key" : undefined}>
        {oidc && <h2 id="sign-in-key">With a workspace key</h2>}
        <p class="lead">Sign in with a workspace API key. The console keeps a session cookie instead of the key.</p>
        <Form
          id="sign-in"
          label="Sign in"
          submit="Sign in"
          class="form narrow"
          onSubmit={async (data, form) => {
            const session = await call(api.POST("/console/sessions", { body: { key: text(data, "key") ?? "" } }));
            form.reset();
            onSignedIn(session);
          }}
        >
          <Field
            name="key"
            label="Workspace key"
            type="password"
            autocomplete="off"
            spellcheck={false}
            required
            hint="A workspace API key, ws_sk_…"
          />
        </Form>
      </section>
    </Page>
  );
}
