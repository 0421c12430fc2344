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

/** A trace as POST /governance/traces takes it (the fields every test sends). */
export interface TraceBody {
  traceId: string;
  input: string;
  output: string;
  model: string;
  latency: number;
  tokens: { prompt: number; completion: number; total: number };
  timestamp: string;
}

/**
 * One trace: `input`, a fresh traceId, a timestamp a second ago and plausible output, model,
 * latency and tokens, any of them overridden (or more fields added) by `over`.
 */
export function traceBody<O extends Record<string, unknown> = Record<never, never>>(input: string, over?: O): TraceBody & O {
  const defaults: TraceBody = {
    traceId: crypto.randomUUID(),
    input,
    output: "Thanks, noted.",
    model: "gpt-4o-mini",
    latency: 640,
    tokens: { prompt: 10, completion: 3, total: 13 },
    timestamp: new Date(Date.now() - 1000).toISOString(),
  };
  return { ...defaults, ...(over as O) };
}
