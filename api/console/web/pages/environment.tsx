// A service's environment variables (GET .../env): names and plain values; a secret's value is
// never returned by the API, so it is never shown. Set one (PUT .../env/{name}) or remove one
// (DELETE .../env/{name}); either rolls the service.
import { api, call } from "../api.ts";
import { useWorkspace } from "../session.ts";
import { ActionButton, Checkbox, Empty, Field, Form, Show, TableWrap, TextArea, checked, invalid, text, useLoad } from "../ui.tsx";
import { ServiceFrame, type Service } from "./frame.tsx";

function Environment({ service }: { service: Service }) {
  const wsId = useWorkspace();
  const path = { wsId, appId: service.id };
  const [vars, reload] = useLoad(() => call(api.GET("/workspaces/{wsId}/apps/{appId}/env", { params: { path } })), [wsId, service.id]);
  return (
    <>
      <p class="hint">A change of any value rolls the service. A secret variable's value is never shown again once set.</p>
      <Show value={vars} what="variables">
        {(l) =>
          l.data.length === 0 ? (
            <Empty>No variable is set.</Empty>
          ) : (
            <TableWrap label="Environment variables">
              <thead>
                <tr>
                  <th scope="col">Name</th>
                  <th scope="col">Value</th>
                  <th scope="col">
                    <span class="visually-hidden">Actions</span>
                  </th>
                </tr>
              </thead>
              <tbody>
                {l.data.map((v) => (
                  <tr key={v.name}>
                    <th scope="row">
                      <code>{v.name}</code>
                    </th>
                    <td class="break">{v.secret ? <span class="muted">Secret (hidden)</span> : <code>{v.value}</code>}</td>
                    <td>
                      <ActionButton
                        label={`Remove ${v.name}`}
                        onClick={async () => {
                          await call(
                            api.DELETE("/workspaces/{wsId}/apps/{appId}/env/{name}", { params: { path: { ...path, name: v.name } } }),
                          );
                          await reload();
                        }}
                      >
                        Remove
                      </ActionButton>
                    </td>
                  </tr>
                ))}
              </tbody>
            </TableWrap>
          )
        }
      </Show>
      <h2>Set a variable</h2>
      <Form
        id="set-env"
        label="Set a variable"
        submit="Set variable"
        onSubmit={async (d, form) => {
          const name = text(d, "name") ?? invalid("name", "Enter the variable's name.");
          const value = (d.get("value") as string | null) ?? "";
          await call(
            api.PUT("/workspaces/{wsId}/apps/{appId}/env/{name}", {
              params: { path: { ...path, name } },
              body: { value, secret: checked(d, "secret") },
            }),
          );
          form.reset();
          await reload();
        }}
      >
        <Field
          name="name"
          label="Variable name"
          required
          spellcheck={false}
          autocomplete="off"
          hint="Letters, digits and underscores, e.g. DATABASE_URL"
        />
        <TextArea name="value" label="Value" rows={2} spellcheck={false} autocomplete="off" />
        <Checkbox name="secret" label="Secret (the value is never shown again)" defaultChecked />
      </Form>
    </>
  );
}

export function EnvironmentPage({ appId }: { appId: string }) {
  return (
    <ServiceFrame appId={appId} section="Environment">
      {(service) => <Environment service={service} />}
    </ServiceFrame>
  );
}
