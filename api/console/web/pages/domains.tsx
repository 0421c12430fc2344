// A service's custom domains (GET .../domains): verification and TLS status, the two DNS records
// to create (a CNAME at the platform, a TXT challenge of this claim), "Verify now" (POST
// .../verify: the operator checks at once; the answer is the current state), add and remove.
import { api, call, type Schemas } from "../api.ts";
import { useWorkspace } from "../session.ts";
import { ActionButton, Empty, Field, Form, Show, Status, TableWrap, Time, invalid, num, text, useLoad } from "../ui.tsx";
import { ServiceFrame, type Service } from "./frame.tsx";

type Domain = Schemas["CustomDomain"];

function DomainCard({ d, appId, reload }: { d: Domain; appId: string; reload: () => Promise<void> }) {
  const wsId = useWorkspace();
  const path = { wsId, appId, domainId: d.id };
  const headingId = `domain-${d.id.replace(/[^a-z0-9-]/g, "-")}`;
  return (
    <li class="card">
      <section aria-labelledby={headingId}>
        <h2 id={headingId}>{d.domain}</h2>
        <dl class="facts">
          <div>
            <dt>Verification</dt>
            <dd>
              <Status value={d.verification.status} /> {d.verification.message}
            </dd>
          </div>
          <div>
            <dt>TLS</dt>
            <dd>
              <Status value={d.tlsStatus} /> {d.tls.message}
              {d.tls.expiresAt && (
                <>
                  {" "}
                  (expires <Time iso={d.tls.expiresAt} />)
                </>
              )}
            </dd>
          </div>
          <div>
            <dt>Last checked</dt>
            <dd>
              <Time iso={d.verification.lastCheckedAt} />
              {d.verification.nextCheckAt && (
                <>
                  , next check <Time iso={d.verification.nextCheckAt} />
                </>
              )}
            </dd>
          </div>
          <div>
            <dt>Routes to port</dt>
            <dd>{d.targetPort}</dd>
          </div>
        </dl>
        {!d.verified && (
          <TableWrap label={`DNS records to create for ${d.domain}`}>
            <thead>
              <tr>
                <th scope="col">Type</th>
                <th scope="col">Name</th>
                <th scope="col">Value</th>
              </tr>
            </thead>
            <tbody>
              <tr>
                <th scope="row">CNAME</th>
                <td class="break">
                  <code>{d.domain}</code>
                </td>
                <td class="break">
                  <code>{d.dnsTarget}</code>
                </td>
              </tr>
              <tr>
                <th scope="row">TXT</th>
                <td class="break">
                  <code>{d.challenge.name}</code>
                </td>
                <td class="break">
                  <code>{d.challenge.value}</code>
                </td>
              </tr>
            </tbody>
          </TableWrap>
        )}
        <div class="actions">
          <ActionButton
            kind="primary"
            label={`Verify now ${d.domain}`}
            onClick={async () => {
              await call(api.POST("/workspaces/{wsId}/apps/{appId}/domains/{domainId}/verify", { params: { path } }));
              await reload();
            }}
          >
            Verify now
          </ActionButton>
          <ActionButton
            kind="danger"
            label={`Remove ${d.domain}`}
            onClick={async () => {
              await call(api.DELETE("/workspaces/{wsId}/apps/{appId}/domains/{domainId}", { params: { path } }));
              await reload();
            }}
          >
            Remove
          </ActionButton>
        </div>
      </section>
    </li>
  );
}

function Domains({ service }: { service: Service }) {
  const wsId = useWorkspace();
  const path = { wsId, appId: service.id };
  const [list, reload] = useLoad(() => call(api.GET("/workspaces/{wsId}/apps/{appId}/domains", { params: { path } })), [wsId, service.id]);
  return (
    <>
      <Show value={list} what="domains">
        {(l) =>
          l.length === 0 ? (
            <Empty>No custom domain yet.</Empty>
          ) : (
            <ul class="cards" aria-label="Custom domains">
              {l.map((d) => (
                <DomainCard key={d.id} d={d} appId={service.id} reload={reload} />
              ))}
            </ul>
          )
        }
      </Show>
      <h2>Add a domain</h2>
      <Form
        id="add-domain"
        label="Add a domain"
        submit="Add domain"
        onSubmit={async (d, form) => {
          const domain = text(d, "domain") ?? invalid("domain", "Enter a domain name.");
          const targetPort = num(d, "targetPort");
          await call(
            api.POST("/workspaces/{wsId}/apps/{appId}/domains", {
              params: { path },
              body: targetPort === undefined ? { domain } : { domain, targetPort },
            }),
          );
          form.reset();
          await reload();
        }}
      >
        <Field
          name="domain"
          label="Domain"
          required
          placeholder="www.example.com"
          spellcheck={false}
          hint="A fully qualified name, no wildcard"
        />
        <Field
          name="targetPort"
          label="Target port (optional)"
          type="number"
          min={1}
          max={65535}
          hint={`Default: the service's port, ${service.port}`}
        />
      </Form>
    </>
  );
}

export function DomainsPage({ appId }: { appId: string }) {
  return (
    <ServiceFrame appId={appId} section="Domains">
      {(service) => <Domains service={service} />}
    </ServiceFrame>
  );
}
