# Sourced by hack/up once the control plane and PostgreSQL run: starts the API and the operator in
# the background (pids in .local/, logs in .local/logs/), bootstraps a workspace and a key, and
# appends BERTH_API_URL, BERTH_WORKSPACE_ID and BERTH_API_KEY to the env file being written.
API_PORT="${BERTH_API_PORT:-26490}"
OPERATOR_HEALTH_PORT="${BERTH_OPERATOR_HEALTH_PORT:-26491}"
API_URL="http://127.0.0.1:$API_PORT"
mkdir -p "$BERTH_LOCAL/logs"

alive() { local f="$BERTH_LOCAL/$1.pid"; [ -f "$f" ] && kill -0 "$(cat "$f")" 2>/dev/null; }

start_service() { # name command...
  local name="$1"; shift
  alive "$name" && return 0
  setsid env "$@" >>"$BERTH_LOCAL/logs/$name.log" 2>&1 < /dev/null &
  echo $! > "$BERTH_LOCAL/$name.pid"
  log "started $name (pid $!, log .local/logs/$name.log)"
}

wait_http() { # what url seconds
  local deadline=$((SECONDS + $3))
  until curl -sf "$2" >/dev/null 2>&1; do
    [ $SECONDS -lt $deadline ] || { log "$1 did not become ready; last log lines:"; tail -n 20 "$BERTH_LOCAL/logs/$1.log" >&2; exit 1; }
    sleep 0.3
  done
}

# The API and the operator hold the control plane's credentials and their code in memory: when
# the plane under them was restarted (another apiserver pid) or their source changed (committed,
# modified or new), they are restarted.
fingerprint=$( {
  cat "$BERTH_LOCAL/cluster/kube-apiserver.pid" 2>/dev/null || true
  cd "$BERTH_ROOT" && git ls-files -s api operator crds toolkit package-lock.json && git diff HEAD -- api operator crds toolkit
  # new files not yet added count too
  git ls-files -z -o --exclude-standard -- api operator crds toolkit | xargs -0 -r sha256sum
} | sha256sum | cut -c1-16)
if [ "$(cat "$BERTH_LOCAL/services.fingerprint" 2>/dev/null || true)" != "$fingerprint" ]; then
  for svc in api operator; do
    if alive "$svc"; then kill "$(cat "$BERTH_LOCAL/$svc.pid")"; while alive "$svc"; do sleep 0.2; done; log "restarting $svc (new control plane or code)"; fi
  done
fi
echo "$fingerprint" > "$BERTH_LOCAL/services.fingerprint"

# The console the API serves under /console (api/console/web, built in a fraction of a second; the
# API reads it when it starts, and restarts when api/ changes).
node "$BERTH_ROOT/hack/console.ts" --out "$BERTH_LOCAL/console" >/dev/null
start_service api DATABASE_URL="$database_url" KUBECONFIG="$KUBECONFIG" BERTH_API_PORT="$API_PORT" \
  BERTH_GOVERNANCE_HOST="127.0.0.1:$API_PORT" BERTH_OPERATOR_USERNAME=system:serviceaccount:berth-system:berth-operator \
  BERTH_CONSOLE_DIR="$BERTH_LOCAL/console" \
  node "$BERTH_ROOT/api/main.ts" --migrate
# The operator proves who it is to the API with a ServiceAccount token (checked by TokenReview),
# as it does in a cluster; locally the token is minted into .local/ and refreshed on every up.
kubectl_() { "$(bin_path kubectl)" --kubeconfig "$KUBECONFIG" "$@"; }
kubectl_ create namespace berth-system --dry-run=client -o yaml | kubectl_ apply -f - >/dev/null
kubectl_ -n berth-system create serviceaccount berth-operator --dry-run=client -o yaml | kubectl_ apply -f - >/dev/null
kubectl_ -n berth-system create token berth-operator --duration=48h > "$BERTH_LOCAL/operator.token.tmp"
chmod 600 "$BERTH_LOCAL/operator.token.tmp"; mv "$BERTH_LOCAL/operator.token.tmp" "$BERTH_LOCAL/operator.token"
# The operator's memory flags are the Helm chart's (docs/operating.md, "Operator memory").
start_service operator KUBECONFIG="$KUBECONFIG" BERTH_OPERATOR_HEALTH_PORT="$OPERATOR_HEALTH_PORT" \
  BERTH_LEADER_ELECTION_NAMESPACE=berth-system BERTH_OPERATOR_API_URL="$API_URL" BERTH_OPERATOR_TOKEN_FILE="$BERTH_LOCAL/operator.token" \
  node --max-semi-space-size=1 --optimize-for-size --v8-pool-size=1 "$BERTH_ROOT/operator/main.ts"
wait_http api "$API_URL/readyz" 60
wait_http operator "http://127.0.0.1:$OPERATOR_HEALTH_PORT/readyz" 60

# A workspace for local use, created once; its key is kept in .local/workspace.env. When the key
# no longer works (database reset) or the namespace is gone (control plane reset), the idempotent
# `workspace create --id` re-creates what is missing and mints a fresh key.
ws_file="$BERTH_LOCAL/workspace.env"
ws_ok=false
if [ -f "$ws_file" ]; then
  # shellcheck disable=SC1090
  source "$ws_file"
  code=$(curl -s -o /dev/null -w '%{http_code}' -H "Authorization: Bearer $BERTH_API_KEY" "$API_URL/api/v1/workspaces/$BERTH_WORKSPACE_ID")
  ns=$(curl -s -H "Authorization: Bearer $BERTH_API_KEY" "$API_URL/api/v1/workspaces/$BERTH_WORKSPACE_ID" | node -e 'let s="";process.stdin.on("data",d=>s+=d).on("end",()=>{try{console.log(JSON.parse(s).namespace??"")}catch{console.log("")}})')
  [ "$code" = 200 ] && [ -n "$ns" ] && "$(bin_path kubectl)" get namespace "$ns" >/dev/null 2>&1 && ws_ok=true
fi
if ! $ws_ok; then
  ws_json=$(DATABASE_URL="$database_url" KUBECONFIG="$KUBECONFIG" node "$BERTH_ROOT/api/cli.ts" workspace create --name local --id wslocalberth)
  BERTH_WORKSPACE_ID=$(node -e 'console.log(JSON.parse(process.argv[1]).workspaceId)' "$ws_json")
  BERTH_API_KEY=$(node -e 'console.log(JSON.parse(process.argv[1]).apiKey)' "$ws_json")
  printf 'BERTH_WORKSPACE_ID=%s\nBERTH_API_KEY=%s\n' "$BERTH_WORKSPACE_ID" "$BERTH_API_KEY" > "$ws_file"
  chmod 600 "$ws_file"
fi
{
  echo "export BERTH_API_URL=$API_URL/api/v1"
  echo "export BERTH_WORKSPACE_ID=$BERTH_WORKSPACE_ID"
  echo "export BERTH_API_KEY=$BERTH_API_KEY"
} >> "$env_file.tmp"
log "console: $API_URL/console/ (sign in with BERTH_API_KEY of .local/env)"
log "API: $API_URL/api/v1 (docs: $API_URL/api/v1/docs), operator health: http://127.0.0.1:$OPERATOR_HEALTH_PORT/metrics"
