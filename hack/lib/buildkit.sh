# BuildKit for the local cluster, sourced by hack/cluster after hack/lib/realnode.sh (which defines
# DIR, RUN, NODE_ID, REGISTRY_PORT, node_start/node_running/node_stop, undo_mounts_and_cgroups,
# wait_for). With the real node
# enabled, `hack/cluster up` starts buildkitd as a process of the host (its pid in
# $DIR/buildkitd.pid) and `down` stops it; `hack/cluster env` exports BERTH_BUILDKIT_ADDR for
# buildctl (hack/berth-images.ts builds Berth's own images with it).
#
#   listeners the unix socket $BUILDKIT_SOCK (root's, no TLS: hack's own image builds, and the
#             build program run on the host by test/e2e/builder.test.ts) and the TCP listener
#             127.0.0.1:$BUILDKIT_PORT, which build pods reach through the node's bridge at
#             $NODE_IP:$BUILDKIT_PORT: mutual TLS (docs/builds.md "mTLS"), buildkitd refuses a
#             client without a certificate signed by $BUILDKIT_TLS/ca.crt
#   mTLS      a CA, buildkitd's certificate (for 127.0.0.1, $NODE_IP and localhost) and a client
#             certificate, made with openssl under $BUILDKIT_TLS once and kept across down/up;
#             $BUILDKIT_TLS/client/ holds ca.crt, tls.crt and tls.key (`buildctl --tlsdir` reads it;
#             it is the Secret berth-buildkit-client of ./hack/up and the tests), exported as
#             BERTH_BUILDKIT_TLS_DIR with the listener's address from the host, BERTH_BUILDKIT_TCP_ADDR
#   worker    the OCI worker running our runc (bin_path runc) through a wrapper that keeps runc's
#             state under $BUILDKIT_RUN instead of /run/runc; no containerd worker
#   network   RUN steps use the host's network (networkMode host): `npm ci` reaches the npm
#             registry, and nothing is set up per step (no CNI, no bridge)
#   egress    buildkitd's HTTP_PROXY/HTTPS_PROXY is the builds' egress proxy
#             (operator/builder/egress.ts on 127.0.0.1:$EGRESS_PORT, started first, stopped after):
#             what RUN steps ask of BuildKit's proxy goes out only to public addresses, whatever
#             name it is asked by (this machine's own name resolves to 127.0.0.1). buildkitd's own
#             pulls and pushes to the registry on 127.0.0.1 are not proxied (Go never proxies
#             loopback). BERTH_EGRESS_ALLOW opens ranges (a package mirror on a private address)
#   registry  the local registry (127.0.0.1:$REGISTRY_PORT) as plain HTTP, for FROM and pushes
#   cache     $BUILDKIT_DIR (snapshots, content, metadata): kept across down/up, so a rebuild of
#             unchanged steps is a cache hit; `rm -rf` it (while stopped) to start cold
#
# What it changes outside its directories, and undoes on down: the cgroups runc creates for RUN
# steps, under /$BUILDKIT_CGROUP in every cgroup hierarchy (defaultCgroupParent); the overlay
# mounts of running steps under $BUILDKIT_DIR and $BUILDKIT_RUN (unmounted on down should a step
# have been killed with the daemon). The socket and runc's state live under $RUN (/run/berth-<id>),
# which down removes with the node.

BUILDKIT_DIR="$DIR/buildkit"
BUILDKIT_RUN="$RUN/buildkit"
BUILDKIT_SOCK="$RUN/buildkitd.sock"
BUILDKIT_CGROUP="berth-$NODE_ID-buildkit"
BUILDKIT_TLS="$DIR/buildkit-tls"

# The certificates of mutual TLS on the TCP listener (idempotent: made once, kept across down/up).
buildkit_certs() {
  local d="$BUILDKIT_TLS"
  [ -f "$d/.ready-v1" ] && return 0
  log "creating buildkitd's mTLS certificates"
  rm -rf "$d"; mkdir -p "$d/client"; chmod 700 "$d"
  (
    cd "$d"
    umask 077
    openssl req -x509 -newkey rsa:2048 -nodes -days 3650 -keyout ca.key -out ca.crt -subj "/CN=berth-local-buildkit-ca" 2>/dev/null
    openssl req -newkey rsa:2048 -nodes -keyout server.key -out server.csr -subj "/CN=buildkitd" 2>/dev/null
    printf 'subjectAltName=IP:127.0.0.1,IP:%s,DNS:localhost\nextendedKeyUsage=serverAuth\n' "$NODE_IP" > server.ext
    openssl x509 -req -in server.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 3650 -extfile server.ext -out server.crt 2>/dev/null
    openssl req -newkey rsa:2048 -nodes -keyout client/tls.key -out client.csr -subj "/CN=berth-build" 2>/dev/null
    printf 'extendedKeyUsage=clientAuth\n' > client.ext
    openssl x509 -req -in client.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 3650 -extfile client.ext -out client/tls.crt 2>/dev/null
    cp ca.crt client/ca.crt
    rm -f ./*.csr ./*.ext ./*.srl
  )
  touch "$d/.ready-v1"
}

# buildkitd's configuration, on stdout.
buildkit_toml() {
  cat <<TOML
root = "$BUILDKIT_DIR"
[grpc]
  # the unix socket: hack's own image builds (root's); the TCP listener: build Jobs, through the
  # node's bridge ($NODE_IP:$BUILDKIT_PORT), loopback and the node's namespace only
  address = ["unix://$BUILDKIT_SOCK", "tcp://127.0.0.1:$BUILDKIT_PORT"]
  [grpc.tls]
    # mutual TLS on the TCP listener: a client certificate signed by ca, or no connection
    # (docs/builds.md "mTLS"); buildkitd gives the unix socket none
    cert = "$BUILDKIT_TLS/server.crt"
    key = "$BUILDKIT_TLS/server.key"
    ca = "$BUILDKIT_TLS/ca.crt"
[otel]
  socketPath = "$BUILDKIT_RUN/otel-grpc.sock"
[cdi]
  disabled = true
[worker.containerd]
  enabled = false
[worker.oci]
  enabled = true
  binary = "$BUILDKIT_RUN/runc"
  snapshotter = "overlayfs"
  networkMode = "host"
  defaultCgroupParent = "$BUILDKIT_CGROUP"
  gc = true
  reservedSpace = "2GB"
  maxUsedSpace = "10GB"
[registry."127.0.0.1:$REGISTRY_PORT"]
  http = true
  insecure = true
TOML
}

buildkit_config() {
  mkdir -p "$BUILDKIT_DIR" "$BUILDKIT_RUN"
  # runc keeps the state of running containers under --root (default /run/runc, host state).
  cat > "$BUILDKIT_RUN/runc" <<EOF
#!/bin/sh
exec "$(bin_path runc)" --root "$BUILDKIT_RUN/runc-state" "\$@"
EOF
  chmod 755 "$BUILDKIT_RUN/runc"
  buildkit_toml > "$DIR/buildkitd.toml"
}

buildkit_up() {
  # buildkitd reads its proxy at start: one started without the egress proxy is started again.
  node_running build-egress || node_stop buildkitd
  buildkit_certs
  # and its configuration: one started with another (before mTLS, say) is started again
  if node_running buildkitd && ! buildkit_toml | cmp -s - "$DIR/buildkitd.toml"; then
    log "buildkitd's configuration changed: restarting it"
    node_stop buildkitd
  fi
  node_running buildkitd && return 0
  buildkit_config
  BERTH_EGRESS_LISTEN="127.0.0.1:$EGRESS_PORT" BERTH_EGRESS_ALLOW="${BERTH_EGRESS_ALLOW:-}" \
    node_start build-egress out "$(command -v node)" "$BERTH_ROOT/operator/builder/egress.ts"
  # (a relative request is its 400: the answer of this proxy, not of something else on the port)
  wait_for "the builds' egress proxy" 15 sh -c "node_pid=\$(cat '$DIR/build-egress.pid') && kill -0 \$node_pid && curl -s -o /dev/null -w '%{http_code}' http://127.0.0.1:$EGRESS_PORT/ | grep -qx 400"
  HTTP_PROXY="http://127.0.0.1:$EGRESS_PORT" HTTPS_PROXY="http://127.0.0.1:$EGRESS_PORT" NO_PROXY="" \
    http_proxy="" https_proxy="" no_proxy="" \
    node_start buildkitd out "$(bin_path buildkitd)" --config "$DIR/buildkitd.toml"
  wait_for buildkitd 30 "$(bin_path buildctl)" --addr "unix://$BUILDKIT_SOCK" debug workers
}

buildkit_down() {
  node_stop buildkitd
  node_stop build-egress
  # A step killed with the daemon may leave its container's mounts and cgroups behind.
  undo_mounts_and_cgroups "$BUILDKIT_CGROUP" "$BUILDKIT_DIR" "$BUILDKIT_RUN"
  rm -rf "$BUILDKIT_RUN" "$BUILDKIT_SOCK"
}

buildkit_status() {
  if node_running build-egress; then echo "build-egress: running (pid $(cat "$DIR/build-egress.pid"))"; else echo "build-egress: stopped"; fi
  if node_running buildkitd; then echo "buildkitd: running (pid $(cat "$DIR/buildkitd.pid"))"; else echo "buildkitd: stopped"; return 1; fi
}

buildkit_env() {
  echo "export BERTH_BUILDKIT_ADDR=unix://$BUILDKIT_SOCK BERTH_BUILDKIT_CLUSTER_ADDR=tcp://$NODE_IP:$BUILDKIT_PORT BERTH_BUILD_EGRESS_LOG=$DIR/logs/build-egress.log"
  # the TCP listener from the host, and the client certificate it asks for (ca.crt, tls.crt, tls.key)
  echo "export BERTH_BUILDKIT_TCP_ADDR=tcp://127.0.0.1:$BUILDKIT_PORT BERTH_BUILDKIT_TLS_DIR=$BUILDKIT_TLS/client"
}
