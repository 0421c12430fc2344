# Sourced by hack/up with the real node running (`hack/cluster env` evaluated: KUBECONFIG,
# BERTH_REGISTRY, BERTH_INGRESS_URL, BERTH_NODE_IP, BERTH_NODE_PG_ADDR, BERTH_API_FORWARD,
# BERTH_API_CLUSTER_IP, BERTH_BUILDKIT_ADDR, BERTH_BUILDKIT_TLS_DIR) and PostgreSQL up ($admin_url). Installs Berth the way
# a cluster operator does, with the chart and Berth's own images:
#
#   1. the `berth` database (created when missing; the chart's migration Job migrates it)
#   2. the images, into the node's registry: berth/pause, debian, node (hack/images.ts), the sample
#      (BERTH_SAMPLE_IMAGE) and berth/berth-api and berth/berth-operator (hack/berth-images.ts,
#      BuildKit), each tagged by its content: what the registry has is not built again
#   3. in berth-system: the Secret berth-database (DATABASE_URL), the Service postgres (no
#      selector; its endpoint is the node's bridge to hack/postgres.ts, hack/lib/berth-on-node.sh)
#      and the Service berth-api-local (the fixed cluster IP the host's forward to the API targets)
#   4. `helm upgrade --install berth charts/berth -n berth-system` with hack/lib/local-values.ts's
#      values (every pod on the real node, Apps' pods too; the operator's calls to the API over the
#      API's internal TLS listener, cert-manager issuing its certificate), skipped when neither the chart nor the
#      values changed since the last successful install of the running release
#   5. a platform admin key (minted by the API's CLI inside the API pod) and a workspace with a key
#      (created through the API with that admin key), each kept in .local/ while it still works
# and writes the env file ($env_file.tmp).
RELEASE=berth
NAMESPACE=berth-system
kubectl_() { "$(bin_path kubectl)" --kubeconfig "$KUBECONFIG" "$@"; }
helm_() { "$(bin_path helm)" --kubeconfig "$KUBECONFIG" "$@"; }
json_field() { node -e 'let v;try{v=JSON.parse(process.argv[1])}catch{};for(const k of process.argv[2].split("."))v=v?.[k];console.log(v??"")' "$1" "$2"; }

# 1. The database; pods reach hack/postgres.ts through the node's bridge.
database_url=$(node hack/db.ts create "$admin_url")
pg_port=$(node -p 'new URL(process.argv[1]).port' "$database_url")
grep -q "\"listen\": \"$BERTH_NODE_IP:$pg_port\"" "$BERTH_LOCAL/cluster/node/netbridge.json" ||
  die "the node's bridge does not forward PostgreSQL's port $pg_port (it was started with another BERTH_PG_PORT): ./hack/down, then ./hack/up"

# 2. The images.
log "images: base, sample and Berth's own, into $BERTH_REGISTRY"
node hack/images.ts build-base --registry "$BERTH_REGISTRY" >/dev/null
sample_image=$(node hack/images.ts build-sample --registry "$BERTH_REGISTRY" | tail -1)
berth_images=$(node hack/berth-images.ts build --registry "$BERTH_REGISTRY")   # berth-api's reference, berth-operator's, berth-builder's, berth/python's, berth/go's
read -r -d '' api_image operator_image builder_image python_image go_image <<<"$berth_images" || true   # (read -d '' returns 1 at the end of its input)
[[ "$api_image" == */berth/berth-api:* && "$operator_image" == */berth/berth-operator:* ]] ||
  die "hack/berth-images.ts printed no berth-api and berth-operator references: $berth_images"

# 3. What the chart expects to exist.
kubectl_ apply --server-side --force-conflicts -f crds/generated >/dev/null
kubectl_ wait --for condition=Established --timeout=60s -f crds/generated >/dev/null
in_cluster_db_url=$(node -e 'const u=new URL(process.argv[1]);u.hostname=process.argv[2];u.port="5432";console.log(u.toString())' "$database_url" "postgres.$NAMESPACE.svc.cluster.local")
kubectl_ apply --server-side --force-conflicts --field-manager berth-hack-up -f - >/dev/null <<EOF
apiVersion: v1
kind: Namespace
metadata: { name: $NAMESPACE }
---
apiVersion: v1
kind: Secret
metadata: { name: berth-database, namespace: $NAMESPACE }
type: Opaque
stringData: { DATABASE_URL: "$in_cluster_db_url" }
---
apiVersion: v1
kind: Service
metadata: { name: postgres, namespace: $NAMESPACE }
spec: { ports: [{ name: postgres, port: 5432, protocol: TCP }] }
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: { name: postgres-host, namespace: $NAMESPACE, labels: { kubernetes.io/service-name: postgres, endpointslice.kubernetes.io/managed-by: berth-hack } }
addressType: IPv4
endpoints: [{ addresses: ["$BERTH_NODE_IP"], conditions: { ready: true } }]
ports: [{ name: postgres, port: $pg_port, protocol: TCP }]
---
apiVersion: v1
kind: Service
metadata: { name: berth-api-local, namespace: $NAMESPACE }
spec:
  clusterIP: $BERTH_API_CLUSTER_IP
  selector: { app.kubernetes.io/name: berth, app.kubernetes.io/instance: $RELEASE, app.kubernetes.io/component: api }
  ports: [{ name: http, port: 80, targetPort: http, protocol: TCP }]
EOF

# 4. The release.
values="$BERTH_LOCAL/berth-values.json"
# Builds from Git: the builder image, buildkitd and the registry as build Jobs reach them, the base images detection uses,
# and the client certificate buildkitd's TCP listener asks for (the values hold its key: the file is 0600).
( umask 077; rm -f "$values.tmp"
  node hack/lib/local-values.ts --api-image "$api_image" --operator-image "$operator_image" \
    --builder-image "$builder_image" --buildkit-host "$BERTH_BUILDKIT_CLUSTER_ADDR" --registry "$BERTH_REGISTRY" \
    --base-image "node=$BERTH_REGISTRY/berth/node:v1" --base-image "python=$python_image" --base-image "go=$go_image" --base-image "static=$BERTH_REGISTRY/berth/node:v1" \
    --buildkit-tls-dir "$BERTH_BUILDKIT_TLS_DIR" --registry-auth-key-file "$BERTH_REGISTRY_AUTH_KEY_FILE" \
    --git-url "$BERTH_GIT_CLUSTER_URL" --node-ip "$BERTH_NODE_IP" > "$values.tmp" ) && mv "$values.tmp" "$values"
fingerprint=$( { cat "$values"; cd "$BERTH_ROOT" && find charts/berth -type f | LC_ALL=C sort | xargs sha256sum; } | sha256sum | cut -c1-16)
state_file="$BERTH_LOCAL/helm-release.state"
status=$(helm_ status "$RELEASE" -n "$NAMESPACE" -o json 2>/dev/null || true)
current="$(json_field "$status" info.status) $(json_field "$status" version)"
if [ "$(cat "$state_file" 2>/dev/null || true)" = "$fingerprint deployed ${current#* }" ] && [ "${current%% *}" = deployed ]; then
  log "release $RELEASE is up to date (revision ${current#* }): chart and values unchanged"
else
  log "helm upgrade --install $RELEASE charts/berth -n $NAMESPACE (api $api_image, operator $operator_image)"
  t0=$SECONDS
  mkdir -p "$BERTH_LOCAL/logs"
  if ! helm_ upgrade --install "$RELEASE" charts/berth -n "$NAMESPACE" -f "$values" --history-max 5 --wait --timeout 5m >"$BERTH_LOCAL/logs/helm.log" 2>&1; then
    cat "$BERTH_LOCAL/logs/helm.log" >&2
    kubectl_ -n "$NAMESPACE" get pods,jobs -o wide >&2 || true
    kubectl_ -n "$NAMESPACE" get events --sort-by=.lastTimestamp 2>/dev/null | tail -n 15 >&2 || true
    die "helm upgrade --install failed (logs: kubectl -n $NAMESPACE logs deploy/$RELEASE-api; job/$RELEASE-migrations)"
  fi
  status=$(helm_ status "$RELEASE" -n "$NAMESPACE" -o json)
  echo "$fingerprint deployed $(json_field "$status" version)" > "$state_file"
  log "release $RELEASE revision $(json_field "$status" version) deployed in $((SECONDS - t0))s"
fi

# The API from the host: the node's bridge forwards 127.0.0.1:<port> to berth-api-local.
api_url="http://$BERTH_API_FORWARD"
deadline=$((SECONDS + 60))
until curl -sf "$api_url/readyz" >/dev/null 2>&1; do
  [ $SECONDS -lt $deadline ] || die "the API does not answer at $api_url/readyz (kubectl -n $NAMESPACE get pods; logs: kubectl -n $NAMESPACE logs deploy/$RELEASE-api)"
  sleep 0.5
done

# 5. An admin key and a workspace for local use.
code_of() { curl -s -o /dev/null -w '%{http_code}' -H "Authorization: Bearer $1" "$2"; }
admin_file="$BERTH_LOCAL/admin.env"
BERTH_ADMIN_KEY=""
# shellcheck disable=SC1090
[ -f "$admin_file" ] && source "$admin_file"
if [ -z "$BERTH_ADMIN_KEY" ] || [ "$(code_of "$BERTH_ADMIN_KEY" "$api_url/api/v1/workspaces")" != 200 ]; then
  key_json=$(kubectl_ -n "$NAMESPACE" exec "deploy/$RELEASE-api" -c api -- node api/cli.ts admin-key create --name local)
  BERTH_ADMIN_KEY=$(json_field "$key_json" key)
  [ -n "$BERTH_ADMIN_KEY" ] || die "the API's CLI printed no admin key: $key_json"
  printf 'BERTH_ADMIN_KEY=%s\n' "$BERTH_ADMIN_KEY" > "$admin_file"; chmod 600 "$admin_file"
  log "minted a platform admin key with the API's CLI in the API pod"
fi
ws_file="$BERTH_LOCAL/workspace.env"
ws_ok=false
if [ -f "$ws_file" ]; then
  # shellcheck disable=SC1090
  source "$ws_file"
  ns=$(json_field "$(curl -s -H "Authorization: Bearer $BERTH_API_KEY" "$api_url/api/v1/workspaces/$BERTH_WORKSPACE_ID")" namespace)
  [ -n "$ns" ] && kubectl_ get namespace "$ns" >/dev/null 2>&1 && ws_ok=true
fi
if ! $ws_ok; then
  # The API's CLI in its pod, idempotent with an id: it re-creates a namespace that is gone and
  # mints a fresh key (POST /workspaces mints no key for a workspace that exists).
  ws_json=$(kubectl_ -n "$NAMESPACE" exec "deploy/$RELEASE-api" -c api -- node api/cli.ts workspace create --name local --id wslocalberth) \
    || die "the API's CLI could not create the local workspace: $ws_json"
  BERTH_WORKSPACE_ID=$(json_field "$ws_json" workspaceId)
  BERTH_API_KEY=$(json_field "$ws_json" apiKey)
  printf 'BERTH_WORKSPACE_ID=%s\nBERTH_API_KEY=%s\n' "$BERTH_WORKSPACE_ID" "$BERTH_API_KEY" > "$ws_file"; chmod 600 "$ws_file"
  log "workspace $BERTH_WORKSPACE_ID ready with a fresh key"
fi

{
  echo "export KUBECONFIG=$KUBECONFIG"
  echo "export DATABASE_URL=$database_url"
  echo "export BERTH_API_URL=$api_url/api/v1"
  echo "export BERTH_WORKSPACE_ID=$BERTH_WORKSPACE_ID"
  echo "export BERTH_API_KEY=$BERTH_API_KEY"
  echo "export BERTH_ADMIN_KEY=$BERTH_ADMIN_KEY"
  echo "export BERTH_INGRESS_URL=$BERTH_INGRESS_URL"
  echo "export BERTH_INGRESS_TLS_URL=$BERTH_INGRESS_TLS_URL"
  echo "export BERTH_DNS_MANAGEMENT_URL=$BERTH_DNS_MANAGEMENT_URL"
  echo "export BERTH_REGISTRY=$BERTH_REGISTRY"
  echo "export BERTH_SAMPLE_IMAGE=$sample_image"
  echo "export BERTH_BUILDKIT_ADDR=$BERTH_BUILDKIT_ADDR"
  echo "export BERTH_GIT_URL=$BERTH_GIT_URL"
  echo "export BERTH_GIT_CLUSTER_URL=$BERTH_GIT_CLUSTER_URL"
  echo "export BERTH_GIT_CREDENTIALS=$BERTH_GIT_CREDENTIALS"
} > "$env_file.tmp"
log "console: $api_url/console/ (sign in with BERTH_API_KEY of .local/env)"
log "API: $api_url/api/v1 (docs: $api_url/api/v1/docs; also through the ingress: curl -H 'Host: api.berth.local' $BERTH_INGRESS_URL/api/v1/...)"
log "images: $api_image, $operator_image; Apps are served at <slug>.apps.berth.local through $BERTH_INGRESS_URL (Host header)"
