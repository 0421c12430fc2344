// The rule against taking a host another Ingress serves (crds/domain.ts): how an Ingress host
// matches a domain (exact, or a wildcard of one label, as the Ingress spec says), which Ingress is
// a Domain's own, and the decision for a Domain about to be routed.
import test from "ava";
import {
  hostMatches,
  hostServedElsewhere,
  ingressServes,
  isDomainIngress,
  type DomainObject,
  type IngressView,
} from "../../../crds/domain.ts";
import { AppSpec } from "../../../crds/schemas.ts";
import { buildDomainChildren } from "../../../operator/domain/builders.ts";

test("an exact host matches itself, whatever the case or a trailing dot", (t) => {
  t.true(hostMatches("shop.example.com", "shop.example.com"));
  t.true(hostMatches("Shop.Example.COM", "shop.example.com"));
  t.true(hostMatches("shop.example.com.", "SHOP.example.com"));
  t.false(hostMatches("shop.example.com", "www.shop.example.com"));
  t.false(hostMatches("shop.example.com", "example.com"));
  t.false(hostMatches("hop.example.com", "shop.example.com"), "a suffix of a label is another name");
  t.false(hostMatches("", "shop.example.com"));
});

test("a wildcard host stands for exactly one label", (t) => {
  t.true(hostMatches("*.example.com", "a.example.com"));
  t.true(hostMatches("*.Example.com", "SHOP.example.com"));
  t.false(hostMatches("*.example.com", "example.com"), "not the name itself");
  t.false(hostMatches("*.example.com", "a.b.example.com"), "not two labels");
  t.false(hostMatches("*.example.com", "aexample.com"));
  t.false(hostMatches("*.example.com", ".example.com"), "not an empty label");
  t.false(hostMatches("*.b.example.com", "a.example.com"));
  t.false(hostMatches("shop.*.com", "shop.example.com"), "a star is a wildcard only as the first label");
});

const ing = (o: {
  hosts?: (string | undefined)[];
  tls?: string[];
  namespace?: string;
  owners?: { kind: string; uid: string }[];
  name?: string;
}): IngressView => ({
  metadata: { namespace: o.namespace ?? "platform", name: o.name ?? "hand-made", ownerReferences: o.owners ?? [] },
  spec: {
    rules: (o.hosts ?? []).map((host) => (host === undefined ? {} : { host })),
    ...(o.tls ? { tls: [{ hosts: o.tls }] } : {}),
  },
});

test("an Ingress serves the hosts of its rules and of its TLS sections; a rule without a host does not count", (t) => {
  t.true(ingressServes(ing({ hosts: ["other.example.com", "shop.example.com"] }), "shop.example.com"));
  t.true(ingressServes(ing({ hosts: ["*.example.com"] }), "shop.example.com"));
  t.false(ingressServes(ing({ hosts: ["*.example.com"] }), "example.com"));
  t.true(ingressServes(ing({ hosts: ["other.example.com"], tls: ["shop.example.com"] }), "shop.example.com"), "a certificate for it");
  t.false(ingressServes(ing({ hosts: [undefined] }), "shop.example.com"), "a catch-all rule is outranked by any host's");
  t.false(ingressServes({ metadata: {} }, "shop.example.com"), "an Ingress with only a default backend");
});

const domain: DomainObject = {
  metadata: { name: "shop.example.com", namespace: "ws-1", uid: "u-claim" },
  spec: { appRef: { name: "web" }, domain: "shop.example.com" },
};
const spec = AppSpec.parse({ name: "Web", slug: "web", image: "img", port: 8080, visibility: "public" });

test("a Domain's own Ingress is the one the builders make: in its namespace, owned by its uid", (t) => {
  const [, own] = buildDomainChildren(domain, { name: "web", spec }, { issuer: "ca" });
  t.true(isDomainIngress(own as IngressView, domain));
  t.false(isDomainIngress(ing({ namespace: "ws-1", hosts: ["shop.example.com"] }), domain), "no owner");
  t.false(
    isDomainIngress(ing({ namespace: "ws-2", owners: [{ kind: "Domain", uid: "u-claim" }] }), domain),
    "an owner reference only counts in the Domain's namespace",
  );
  t.false(isDomainIngress(ing({ namespace: "ws-1", owners: [{ kind: "Domain", uid: "u-other" }] }), domain), "another claim's");
  t.false(isDomainIngress(ing({ namespace: "ws-1", owners: [{ kind: "App", uid: "u-claim" }] }), domain));
  t.false(isDomainIngress(own as IngressView, { ...domain, metadata: { ...domain.metadata, uid: undefined } }));
});

test("a Domain about to be routed is refused a host another Ingress serves, unless its own Ingress was there first", (t) => {
  const foreign = ing({ namespace: "platform", name: "shop", hosts: ["shop.example.com"] });
  const wildcard = ing({ namespace: "platform", name: "wild", hosts: ["*.example.com"] });
  const unrelated = ing({ namespace: "ws-2", hosts: ["www.example.org"] });
  const [, own] = buildDomainChildren(domain, { name: "web", spec }, {}) as [unknown, IngressView];

  t.is(hostServedElsewhere(domain, []), undefined, "control: nothing else serves it");
  t.is(hostServedElsewhere(domain, [unrelated]), undefined);
  t.is(hostServedElsewhere(domain, [unrelated, foreign]), foreign);
  t.is(hostServedElsewhere(domain, [wildcard]), wildcard, "a wildcard covering the name serves it");
  t.is(hostServedElsewhere(domain, [own]), undefined, "its own Ingress is not another's");
  t.is(hostServedElsewhere(domain, [foreign, own]), undefined, "routed first: the later Ingress is the intruder");
  const otherClaim: DomainObject = { ...domain, metadata: { ...domain.metadata, namespace: "ws-2", uid: "u-2" } };
  t.is(hostServedElsewhere(otherClaim, [own]), own, "another claim's Ingress serves the host for that claim");
  const apex: DomainObject = { ...domain, spec: { ...domain.spec, domain: "example.com" } };
  t.is(hostServedElsewhere(apex, [wildcard]), undefined, "a wildcard does not cover its apex");
});
