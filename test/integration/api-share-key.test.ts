// The share cookie key in production shape: with BERTH_NAMESPACE set (as the chart sets
// it) and no BERTH_SHARE_COOKIE_KEY, API replicas keep one key in the Secret berth-share-cookie-key
// of Berth's namespace, under the API's chart identity (a Role in that namespace only). A cookie
// given by one replica passes the edge check of another, and of a replica started after both
// stopped; a Secret that holds no usable key is refused at start and never overwritten.
import test from "ava";
import { FORWARD_AUTH } from "../../crds/app.ts";
import { KubeClient, type KubeObject } from "../../kube/client.ts";
import { SHARE_KEY_SECRET, shareKeySecret } from "../../api/shares/cookie-key.ts";
import { startApi, type TestApi } from "../helpers/api.ts";
import { RELEASE_NAMESPACE } from "../helpers/identities.ts";
import { eventually, kube } from "../helpers/kube.ts";

const DOMAIN = "apps.share-key.test";
const admin = new KubeClient(kube().kc);
const ref = { apiVersion: "v1", kind: "Secret", namespace: RELEASE_NAMESPACE, name: SHARE_KEY_SECRET };
type Secret = KubeObject & { data?: Record<string, string> };
const env = { BERTH_NAMESPACE: RELEASE_NAMESPACE, BERTH_BASE_DOMAIN: DOMAIN };

async function dropSecret(): Promise<void> {
  await admin.delete(ref).catch(() => undefined);
  await eventually("the key Secret is gone", async () => (await admin.get(ref)) === undefined, 30_000, 200);
}

/** The edge check as Traefik calls it; the answer's status and Set-Cookie. */
async function edge(
  api: TestApi,
  namespace: string,
  app: string,
  opts: { uri?: string; cookie?: string },
): Promise<{ status: number; cookie?: string }> {
  const r = await fetch(`${api.url}/api/v1/forward-auth/${namespace}/${app}`, {
    redirect: "manual",
    headers: {
      "X-Forwarded-Method": "GET",
      "X-Forwarded-Proto": "http",
      "X-Forwarded-Host": `${app}.${DOMAIN}`,
      "X-Forwarded-Uri": opts.uri ?? "/",
      ...(opts.cookie ? { Cookie: opts.cookie } : {}),
    },
  });
  await r.arrayBuffer();
  const set = r.headers.getSetCookie()[0];
  return { status: r.status, ...(set ? { cookie: set.split(";")[0] } : {}) };
}

test.serial(
  "replicas started together create one key in Berth's namespace; a cookie of one passes another, and a replica started later",
  async (t) => {
    t.timeout(150_000);
    await dropSecret();
    const [a, b] = await Promise.all([startApi({ env }), startApi({ env })]);
    t.teardown(() => a.stop());
    let bStopped = false;
    t.teardown(() => (bStopped ? undefined : b.stop()));

    const secret = await admin.get<Secret>(ref);
    t.truthy(secret, "the first replica created the Secret");
    t.is(Buffer.from(secret!.data!.key!, "base64").length, 32, "a 32-byte random key");

    // A private App of replica a's workspace and a share link of it.
    t.is(
      (
        await a.fetchJson("POST", `/workspaces/${a.workspaceId}/apps`, {
          body: { name: "shop", slug: "shop", type: "web", image: "registry.invalid/x:1" },
        })
      ).status,
      201,
    );
    const share = await a.fetchJson("POST", `/workspaces/${a.workspaceId}/apps/shop/public-shares`, { body: {} });
    t.is(share.status, 201, share.text);
    const first = await edge(a, a.namespace, "shop", { uri: `/?${FORWARD_AUTH.shareParam}=${share.body.token as string}` });
    t.is(first.status, 302, "the token is exchanged for a cookie");
    const cookie = first.cookie!;
    t.truthy(cookie);

    // Replica b never saw the token: its key and its watch of the Share decide.
    await eventually(
      "replica b honours replica a's cookie",
      async () => (await edge(b, a.namespace, "shop", { cookie })).status === 200,
      30_000,
      200,
    );
    t.is((await edge(b, a.namespace, "shop", { cookie: `${cookie}x` })).status, 403, "a tampered cookie is still refused");

    // Both gone; a new replica reads the same key.
    await b.stop();
    bStopped = true;
    const c = await startApi({ env });
    t.teardown(() => c.stop());
    await eventually(
      "a replica started later honours the cookie",
      async () => (await edge(c, a.namespace, "shop", { cookie })).status === 200,
      30_000,
      200,
    );
    t.is((await admin.get<Secret>(ref))!.metadata.resourceVersion, secret!.metadata.resourceVersion, "the Secret was never rewritten");
  },
);

test.serial("a Secret that holds no usable key stops the API at start, and is left as it was", async (t) => {
  t.timeout(90_000);
  await dropSecret();
  const short = shareKeySecret(RELEASE_NAMESPACE, Buffer.alloc(8, 1));
  await admin.create(short, "berth-test");
  t.teardown(dropSecret);
  const err = await t.throwsAsync(startApi({ env }));
  t.regex(err.message, /holds no share cookie key: data\.key must be at least 32 bytes/);
  t.is((await admin.get<Secret>(ref))!.data!.key, short.data!.key, "never overwritten");
});

test.serial("BERTH_SHARE_COOKIE_KEY wins over the Secret: the API then neither reads nor creates it", async (t) => {
  t.timeout(90_000);
  await dropSecret();
  const api = await startApi({ env: { ...env, BERTH_SHARE_COOKIE_KEY: "a-test-share-cookie-key-of-32-chars-or-more" } });
  t.teardown(() => api.stop());
  t.is(await admin.get(ref), undefined);
});
