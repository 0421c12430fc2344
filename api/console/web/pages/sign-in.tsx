// Sign-in: a workspace key exchanged for the session cookie (POST /console/sessions). The key is
// sent once and kept nowhere by the browser: the form is cleared and the field is a password field.
import { api, call, type Session } from "../api.ts";
import { Field, Form, Page, text } from "../ui.tsx";

export function SignInPage({ onSignedIn }: { onSignedIn: (s: Session) => void }) {
  return (
    <Page title="Sign in" heading="Sign in to Berth">
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
    </Page>
  );
}
