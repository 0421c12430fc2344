// A service's share links (GET .../public-shares, never a token): create one with an expiry and
// requireAuth (the link is in the answer once: shown with a copy button), revoke one.
import { useState } from "preact/hooks";
import { api, call, type Schemas } from "../api.ts";
import { useWorkspace } from "../session.ts";
import { ActionButton, Checkbox, Empty, Field, Form, Show, TableWrap, Time, checked, invalid, text, useLoad } from "../ui.tsx";
import { ServiceFrame, type Service } from "./frame.tsx";

function CreatedLink({ share, onDone }: { share: Schemas["CreatedPublicShare"]; onDone: () => void }) {
  const [copied, setCopied] = useState<string>("");
  return (
    <div class="created" role="region" aria-labelledby="created-h">
      <h2 id="created-h">Share link created</h2>
      <p>Copy it now: it is shown only once (Berth keeps only a digest of its token).</p>
      <div class="field">
        <label for="share-url">New share link</label>
        <input id="share-url" readOnly value={share.url} onFocus={(e) => e.currentTarget.select()} />
      </div>
      <div class="actions">
        <button
          type="button"
          class="primary"
          onClick={() => {
            navigator.clipboard.writeText(share.url).then(
              () => setCopied("Copied to the clipboard."),
              () => setCopied("The browser refused to copy: select the link and copy it."),
            );
          }}
        >
          Copy link
        </button>
        <button type="button" onClick={onDone}>
          Done
        </button>
        <span role="status">{copied}</span>
      </div>
    </div>
  );
}

function Shares({ service }: { service: Service }) {
  const wsId = useWorkspace();
  const path = { wsId, appId: service.id };
  const [list, reload] = useLoad(
    () => call(api.GET("/workspaces/{wsId}/apps/{appId}/public-shares", { params: { path } })),
    [wsId, service.id],
  );
  const [created, setCreated] = useState<Schemas["CreatedPublicShare"]>();
  return (
    <>
      <p class="hint">
        Anyone with a share link can open the service, a private one too; with sign-in required they must also sign in with a platform
        account.
      </p>
      {created && <CreatedLink share={created} onDone={() => setCreated(undefined)} />}
      <h2>Create a share link</h2>
      <Form
        id="create-share"
        label="Create a share link"
        submit="Create share link"
        onSubmit={async (d, form) => {
          const local = text(d, "expiresAt");
          let expiresAt: string | undefined;
          if (local) {
            const t = new Date(local);
            if (Number.isNaN(t.getTime())) invalid("expiresAt", "Enter a date and time.");
            expiresAt = t.toISOString();
          }
          const body: { expiresAt?: string; requireAuth: boolean } = { requireAuth: checked(d, "requireAuth") };
          if (expiresAt) body.expiresAt = expiresAt;
          setCreated(await call(api.POST("/workspaces/{wsId}/apps/{appId}/public-shares", { params: { path }, body })));
          form.reset();
          await reload();
        }}
      >
        <Field name="expiresAt" label="Expires at (optional)" type="datetime-local" hint="Your local time; empty: the link never expires" />
        <Checkbox name="requireAuth" label="Viewers must also sign in" />
      </Form>
      <h2>Active share links</h2>
      <Show value={list} what="share links">
        {(l) =>
          l.data.length === 0 ? (
            <Empty>No active share link.</Empty>
          ) : (
            <TableWrap label="Active share links">
              <thead>
                <tr>
                  <th scope="col">Created</th>
                  <th scope="col">Expires</th>
                  <th scope="col">Sign-in required</th>
                  <th scope="col">
                    <span class="visually-hidden">Actions</span>
                  </th>
                </tr>
              </thead>
              <tbody>
                {l.data.map((s) => (
                  <tr key={s.id}>
                    <th scope="row">
                      <Time iso={s.createdAt} />
                    </th>
                    <td>{s.expiresAt ? <Time iso={s.expiresAt} /> : "Never"}</td>
                    <td>{s.requireAuth ? "Yes" : "No"}</td>
                    <td>
                      <ActionButton
                        kind="danger"
                        onClick={async () => {
                          await call(
                            api.DELETE("/workspaces/{wsId}/apps/{appId}/public-shares/{shareId}", {
                              params: { path: { ...path, shareId: s.id } },
                            }),
                          );
                          await reload();
                        }}
                      >
                        Revoke
                      </ActionButton>
                    </td>
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

export function SharesPage({ appId }: { appId: string }) {
  return (
    <ServiceFrame appId={appId} section="Shares">
      {(service) => <Shares service={service} />}
    </ServiceFrame>
  );
}
