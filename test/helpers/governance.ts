// Governance set-up shared by the integration tests: an App in the test API's workspace with its
// store provisioned through the operator's internal endpoint, exactly as the operator does it.
import { API_VERSION } from "../../crds/schemas.ts";
import type { KubeObject } from "../../kube/client.ts";
import type { TestApi } from "./api.ts";

export interface ProvisionedApp {
  /** the gov_sk_ key of GOVDB_CONNECTION */
  key: string;
  /** govdb://<key>@<host>/<database> */
  connectionString: string;
  /** the store's schema (the connection string's database) */
  schema: string;
  /** the App's metadata.uid */
  uid: string;
}

/** The key of a GOVDB_CONNECTION string. */
export function keyOf(connectionString: string): string {
  const m = /^govdb:\/\/([^@]+)@/.exec(connectionString);
  if (!m) throw new Error(`not a GOVDB_CONNECTION: ${connectionString}`);
  return m[1]!;
}

/**
 * Creates the App `name` (type web, no image) and provisions its store with the operator's token,
 * in the test API's first workspace or in `workspace` (one of api.createWorkspace()).
 */
export async function provisionApp(
  api: TestApi,
  operatorToken: string,
  name: string,
  workspace: { namespace: string } = api,
): Promise<ProvisionedApp> {
  const { namespace } = workspace;
  const app = await api.services.kube.create<KubeObject>(
    { apiVersion: API_VERSION, kind: "App", metadata: { name, namespace }, spec: { name, slug: name } },
    "test",
  );
  const r = await api.fetchJson("POST", "/internal/governance/provision", {
    key: operatorToken,
    body: { namespace, appName: name, appUid: app.metadata.uid, generation: 1 },
  });
  if (r.status !== 200) throw new Error(`provisioning ${name} failed: ${r.text}`);
  const connectionString = r.body.connectionString as string;
  return { key: keyOf(connectionString), connectionString, schema: r.body.database as string, uid: app.metadata.uid! };
}
