# Install what is missing: Node.js 24 and the npm dependencies (only when package-lock.json changed).
source "$(dirname "${BASH_SOURCE[0]}")/node.sh"
ensure_deps() {
  ensure_node
  local want have=""
  want=$(sha256sum "$BERTH_ROOT/package-lock.json" | cut -c1-64)-$(node -p process.version)
  [ -f "$BERTH_ROOT/node_modules/.berth-installed" ] && have=$(cat "$BERTH_ROOT/node_modules/.berth-installed")
  if [ "$want" != "$have" ]; then
    log "installing npm dependencies"
    # onnxruntime-node's install script fetches CUDA binaries from nuget.org unless told to skip:
    # Berth uses the CPU binaries inside the package (npm 11 also leaves install scripts unrun
    # until approved; older npm would run it)
    (cd "$BERTH_ROOT" && ONNXRUNTIME_NODE_INSTALL=skip npm ci --no-audit --no-fund --loglevel=error >&2)
    echo "$want" > "$BERTH_ROOT/node_modules/.berth-installed"
  fi
}
