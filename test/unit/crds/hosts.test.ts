// crds/app.ts "Hosts": which App holds <slug>.<baseDomain> (the first created, whatever its
// namespace or type), and which slugs are the platform's.
import test from "ava";
import { DEFAULT_RESERVED_SLUGS, foreignBuildImage, hostHolder, reservedHostReason, ReservedSlugsVariable } from "../../../crds/app.ts";

const app = (
  name: string,
  slug: string | undefined,
  created: string,
  o: { uid?: string; deleting?: boolean; namespace?: string } = {},
) => ({
  metadata: {
    name,
    namespace: o.namespace ?? "ws-a",
    uid: o.uid ?? name,
    creationTimestamp: created,
    ...(o.deleting ? { deletionTimestamp: "2026-11-26T10:00:00Z" } : {}),
  },
  spec: { slug, type: "worker" },
});

test("the first App created holds the host, in any namespace, whatever its type; ties go to the smaller uid", (t) => {
  const a = app("shop", "shop", "2026-11-26T08:00:00Z", { namespace: "ws-a" });
  const b = app("shop", "shop", "2026-11-26T09:00:00Z", { namespace: "ws-b" });
  const other = app("cart", "cart", "2026-11-26T07:00:00Z");
  t.is(hostHolder([b, other, a], "shop"), a);
  t.is(hostHolder([b, other], "shop"), b, "with the first gone, the next holds it");
  t.is(
    hostHolder([app("x", "shop", "2026-11-26T08:00:00Z", { uid: "u2" }), app("y", "shop", "2026-11-26T08:00:00Z", { uid: "u1" })], "shop")
      ?.metadata.uid,
    "u1",
  );
  t.is(
    hostHolder([{ ...a, metadata: { ...a.metadata, deletionTimestamp: "2026-11-26T10:00:00Z" } }, b], "shop"),
    b,
    "an App being deleted holds nothing",
  );
  t.is(hostHolder([app("n", undefined, "2026-11-26T06:00:00Z"), b], "shop"), b, "an App without a slug holds nothing");
  t.is(hostHolder([], "shop"), undefined);
});

test("reserved: the configured slugs and the platform's own hosts under the base domain", (t) => {
  const o = {
    baseDomain: "apps.example.com",
    reservedSlugs: DEFAULT_RESERVED_SLUGS,
    platformHosts: ["ingress.example.com", "console.apps.example.com", undefined],
  };
  for (const s of ["api", "www", "admin", "auth"]) t.regex(reservedHostReason(s, o)!, /reserved by the platform/);
  t.regex(reservedHostReason("console", o)!, /console\.apps\.example\.com is one of the platform's own hosts/);
  t.is(reservedHostReason("shop", o), undefined);
  t.is(reservedHostReason("ingress", o), undefined, "a platform host outside the base domain takes no slug");
  t.deepEqual(ReservedSlugsVariable.parse(undefined), ["api", "www", "admin", "auth"]);
  t.deepEqual(ReservedSlugsVariable.parse(" status, dashboard ,"), ["status", "dashboard"]);
  t.deepEqual(ReservedSlugsVariable.parse(""), []);
  t.false(ReservedSlugsVariable.safeParse("Not_A_Label").success);
});

test("built images: another namespace's build is refused as an image; the platform's other images are open", (t) => {
  const area = { registry: "registry.example.com:5000", prefix: "apps" };
  t.regex(
    foreignBuildImage("registry.example.com:5000/apps/berth-wsaaaa/shop:0123456789ab", "berth-wsbbbb", area)!,
    /another workspace's build/,
  );
  t.regex(
    foreignBuildImage("Registry.Example.com:5000/apps/berth-wsaaaa/shop@sha256:00", "berth-wsbbbb", area)!,
    /another workspace's build/,
    "case does not hide it",
  );
  t.is(foreignBuildImage("registry.example.com:5000/apps/berth-wsbbbb/web:1", "berth-wsbbbb", area), undefined, "its own build");
  t.is(foreignBuildImage("registry.example.com:5000/berth/node:v1", "berth-wsbbbb", area), undefined, "a base image of the platform");
  t.is(foreignBuildImage("ghcr.io/acme/shop:1", "berth-wsbbbb", area), undefined);
  t.is(
    foreignBuildImage("registry.example.com:5000/apps/berth-wsaaaa/shop:1", "berth-wsbbbb", { prefix: "apps" }),
    undefined,
    "no builds configured",
  );
  t.regex(
    foreignBuildImage("r:1/team/builds/berth-wsaaaa/x:1", "berth-wsbbbb", { registry: "r:1", prefix: "team/builds" })!,
    /r:1\/team\/builds\//,
  );
  t.regex(foreignBuildImage("r:1/berth-wsaaaa/x:1", "berth-wsbbbb", { registry: "r:1", prefix: "" })!, /another/, "an empty prefix");
});
