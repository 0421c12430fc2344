// berth_kube_requests_total labels: the API server's verb and resource of a request path.
import test from "ava";
import { describeKubeRequest } from "../../../operator/runtime/metrics.ts";

const cases: [string, string, string | undefined, string, string][] = [
  ["GET", "/apis/apps/v1/namespaces/ns/deployments?labelSelector=a%3Db", undefined, "list", "deployments"],
  ["GET", "/apis/apps/v1/namespaces/ns/deployments?watch=true&resourceVersion=5", undefined, "watch", "deployments"],
  ["GET", "/api/v1/namespaces/ns/services/web", undefined, "get", "services"],
  ["GET", "/api/v1/namespaces", undefined, "list", "namespaces"],
  ["GET", "/apis/apps/v1", undefined, "get", "discovery"],
  [
    "PATCH",
    "/apis/berth.dev/v1alpha1/namespaces/ns/apps/shop/status?fieldManager=x&force=true",
    "application/apply-patch+yaml",
    "apply",
    "apps/status",
  ],
  ["PATCH", "/apis/berth.dev/v1alpha1/namespaces/ns/apps/shop", "application/merge-patch+json", "patch", "apps"],
  ["POST", "/api/v1/namespaces/ns/configmaps", "application/json", "create", "configmaps"],
  ["PUT", "/apis/coordination.k8s.io/v1/namespaces/berth-system/leases/berth-operator", "application/json", "update", "leases"],
  ["DELETE", "/apis/networking.k8s.io/v1/namespaces/ns/ingresses/web", undefined, "delete", "ingresses"],
];
for (const [method, path, contentType, verb, resource] of cases) {
  test(`${method} ${path} is ${verb} ${resource}`, (t) => {
    t.deepEqual(describeKubeRequest(method, path, contentType), { verb, resource });
  });
}
