# The real node, sourced by hack/cluster (which defines DIR, KUBECONFIG_OUT, API_PORT, PORT_BASE,
# start/running/wait_for/kubectl_). A kubelet with containerd and runc, kube-proxy and CoreDNS run
# inside a network namespace of their own ($NETNS), with the pods' bridge, addresses and iptables
# rules; the control plane stays on the host's loopback. hack/lib/netbridge.ts joins the two over
# unix sockets: the node reaches the API server and the registry at 127.0.0.1 (and pods at
# $NODE_IP), the host reaches the ingress at 127.0.0.1, and the API server reaches kubelets, pods
# and services through its egress selector (an HTTP CONNECT proxy on a unix socket).
#
# Addresses (inside $NETNS): the node 10.201.0.1 (on lo), pods 10.202.0.0/24 on the bridge cni0
# (gateway 10.202.0.1), services 10.96.0.0/16 (kube-proxy, iptables), cluster DNS 10.96.0.10.
# On the host: the registry at 127.0.0.1:$REGISTRY_PORT (the same reference works on the node).
#
# What it changes outside the namespace, and undoes on down: the kubelet's cgroups under
# /$CGROUP_ROOT in each cgroup v1 hierarchy; mounts under $NODE_DIR and $RUN; the sysctls the
# kubelet sets (vm.overcommit_memory, kernel.panic, kernel.panic_on_oops), restored from
# /run/berth-sysctl.orig when the last real node of the machine goes. Everything is found by
# recorded pids, paths and names only.

NODE_ID=$(printf '%s' "$BERTH_LOCAL" | sha256sum | cut -c1-8)
NETNS="berth-$NODE_ID"
CGROUP_ROOT="berth-$NODE_ID"
NODE_NAME="berth-node"
NODE_DIR="$DIR/node"
RUN="/run/berth-$NODE_ID"          # unix sockets: short paths (108-byte limit)
NODE_IP=10.201.0.1
POD_CIDR=10.202.0.0/24
SERVICE_CIDR=10.96.0.0/16   # kube-apiserver's --service-cluster-ip-range
CLUSTER_DNS=10.96.0.10
REGISTRY_PORT=$((PORT_BASE + 50))
# The registry's endpoint for the node (read-only, token authentication: each namespace's pods pull
# with that namespace's credential, docs/images.md "Pull credentials") and its token service, on the
# host's loopback; the node reaches them at 127.0.0.1:$REGISTRY_PORT and 127.0.0.1:$REGISTRY_AUTH_PORT.
REGISTRY_GATE_PORT=$((PORT_BASE + 63))
REGISTRY_AUTH_PORT=$((PORT_BASE + 64))
REGISTRY_AUTH="$DIR/registry-auth"   # registry.key, signing.pem, jwks.json: made once, kept across down/up
# what the gate names in its challenges and checks in the tokens (auth.token.service and issuer)
REGISTRY_AUTH_SERVICE=berth-registry REGISTRY_AUTH_ISSUER=berth-registry-auth
INGRESS_PORT=$((PORT_BASE + 51))
# buildkitd's TCP listener (hack/lib/buildkit.sh) and the Git server (hack/lib/git-server.ts), each
# on the host's loopback and, for pods (build Jobs), on the node's side of the bridge.
BUILDKIT_PORT=$((PORT_BASE + 52))
GIT_PORT=$((PORT_BASE + 53))
# The builds' egress proxy (operator/builder/egress.ts), buildkitd's HTTP(S)_PROXY: on the host's
# loopback only (buildkitd is a process of the host).
EGRESS_PORT=$((PORT_BASE + 58))
# Custom domains: Traefik's websecure entrypoint (:443 on the node) on the host's loopback, and the
# tests' DNS server (Pebble's challenge test server: records set over its management API).
INGRESS_TLS_PORT=$((PORT_BASE + 54))
DNS_PORT=$((PORT_BASE + 55))
DNS_MANAGEMENT_PORT=$((PORT_BASE + 56))
# The CA ClusterIssuer that issues custom domains' certificates here (selfSigned -> CA -> CA issuer).
DOMAIN_ISSUER="berth-local-ca"
# The local ACME CA: Pebble inside $NETNS (validating HTTP-01 at the ingress's :80 there, resolving
# names with the tests' DNS server), its ACME and management APIs on the host's loopback; and the
# ACME ClusterIssuer against it (HTTP-01 through Traefik).
ACME_PORT=$((PORT_BASE + 61))
ACME_MANAGEMENT_PORT=$((PORT_BASE + 62))
ACME_ISSUER="berth-local-acme"
# A Berth API run on the host (the tests', hack/up's) is reachable from pods at $NODE_IP:$HOST_API_PORT.
HOST_API_PORT=$((PORT_BASE + 60))
NODE_COMPONENTS=(netbridge-host netbridge-node containerd kubelet kube-proxy kube-router coredns metrics-server traefik pebble-challtestsrv pebble cert-manager-controller)
KERNEL_SYSCTLS=(vm.overcommit_memory kernel.panic kernel.panic_on_oops)
REAL_NODE_TAINT="berth.dev/real-node"

node_enabled() { [ "${BERTH_REAL_NODE:-0}" = 1 ]; }

node_deps() {
  [ "$(id -u)" = 0 ] || die "the real node needs root (network namespaces, cgroups, mounts)"
  ensure_system_packages   # hack/lib/system-packages.txt (./hack/test and ./hack/up did it first)
  source "$BERTH_ROOT/hack/lib/node.sh"; ensure_node   # netbridge.ts needs Node.js 24
  "$BERTH_ROOT/hack/binaries" node
}

# Only the network namespace: `ip netns exec` would also give the command a mount namespace with
# /sys remounted, where the kubelet finds no cgroup hierarchies and containerd's mounts would be
# invisible to the kubelet.
nsexec() { nsenter --net="/var/run/netns/$NETNS" "$@"; }

# Starts a node component (netns: "in" or "out"), recording its pid.
node_start() { # name in|out command...
  local name="$1" where="$2"; shift 2
  node_running "$name" && return 0
  mkdir -p "$DIR/logs"
  if [ "$where" = in ]; then
    setsid nsenter --net="/var/run/netns/$NETNS" "$@" >>"$DIR/logs/$name.log" 2>&1 < /dev/null &
  else
    setsid "$@" >>"$DIR/logs/$name.log" 2>&1 < /dev/null &
  fi
  echo $! > "$DIR/$name.pid"
  log "started $name (pid $!)"
}

node_running() {
  local f="$DIR/$1.pid" pid; [ -f "$f" ] || return 1
  pid=$(cat "$f"); kill -0 "$pid" 2>/dev/null
}

node_stop() {
  local f="$DIR/$1.pid"; [ -f "$f" ] || return 0
  local pid; pid=$(cat "$f")
  if kill -0 "$pid" 2>/dev/null; then
    kill "$pid" 2>/dev/null || true
    for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$pid" 2>/dev/null || true
    log "stopped $1"
  fi
  rm -f "$f"
}

# The kubelet's serving certificate, and the API server's client certificate for kubelets (logs,
# exec, port-forward, metrics), both from the cluster's CA.
node_certs() {
  local c="$DIR/pki"
  [ -f "$c/kubelet.crt" ] && [ -f "$c/apiserver-kubelet-client.crt" ] && [ -f "$c/front-proxy-client.crt" ] && [ -f "$c/metrics-server.crt" ] && return 0
  (
    cd "$c"
    # The aggregator's client certificate towards extension API servers (metrics-server).
    openssl req -newkey rsa:2048 -nodes -keyout front-proxy-client.key -out fpc.csr -subj "/CN=front-proxy-client" 2>/dev/null
    printf 'extendedKeyUsage=clientAuth\n' > fpc.ext
    openssl x509 -req -in fpc.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 3650 -extfile fpc.ext -out front-proxy-client.crt 2>/dev/null
    # metrics-server's serving certificate, for the APIService's caBundle.
    openssl req -newkey rsa:2048 -nodes -keyout metrics-server.key -out ms.csr -subj "/CN=metrics-server.kube-system.svc" 2>/dev/null
    printf 'subjectAltName=DNS:metrics-server.kube-system.svc,IP:%s\nextendedKeyUsage=serverAuth\n' "$NODE_IP" > ms.ext
    openssl x509 -req -in ms.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 3650 -extfile ms.ext -out metrics-server.crt 2>/dev/null
    rm -f fpc.csr fpc.ext ms.csr ms.ext
    openssl req -newkey rsa:2048 -nodes -keyout kubelet.key -out kubelet.csr -subj "/CN=$NODE_NAME" 2>/dev/null
    printf 'subjectAltName=IP:%s,DNS:%s\nextendedKeyUsage=serverAuth\n' "$NODE_IP" "$NODE_NAME" > kubelet.ext
    openssl x509 -req -in kubelet.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 3650 -extfile kubelet.ext -out kubelet.crt 2>/dev/null
    openssl req -newkey rsa:2048 -nodes -keyout apiserver-kubelet-client.key -out akc.csr -subj "/O=system:masters/CN=kube-apiserver-kubelet-client" 2>/dev/null
    printf 'extendedKeyUsage=clientAuth\n' > akc.ext
    openssl x509 -req -in akc.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 3650 -extfile akc.ext -out apiserver-kubelet-client.crt 2>/dev/null
    rm -f kubelet.csr kubelet.ext akc.csr akc.ext ca.srl
  )
}

node_network() {
  if ! ip netns list | grep -qw "$NETNS"; then
    ip netns add "$NETNS"
    log "created network namespace $NETNS"
  fi
  nsexec ip link set lo up
  nsexec ip addr replace "$NODE_IP/32" dev lo   # idempotent (a grep -q under pipefail can fail on SIGPIPE)
  nsexec sysctl -qw net.ipv4.ip_forward=1
  # A route for the service range, so that connections from the node itself pass the route lookup
  # before kube-proxy's DNAT (in OUTPUT) sends them on to a pod; there is no default route.
  nsexec ip route replace "$SERVICE_CIDR" dev lo
}

node_configs() {
  mkdir -p "$NODE_DIR"/{containerd,kubelet,cni/net.d,certs.d/"127.0.0.1:$REGISTRY_PORT"} "$RUN"
  # The registry is plain HTTP on loopback (containerd 2 reads hosts.toml under config_path).
  cat > "$NODE_DIR/certs.d/127.0.0.1:$REGISTRY_PORT/hosts.toml" <<EOF
server = "http://127.0.0.1:$REGISTRY_PORT"
[host."http://127.0.0.1:$REGISTRY_PORT"]
  capabilities = ["pull", "resolve", "push"]
  skip_verify = true
EOF
  cat > "$NODE_DIR/containerd.toml" <<EOF
version = 3
root = "$NODE_DIR/containerd"
state = "$RUN/containerd"
[grpc]
  address = "$RUN/containerd.sock"
[plugins."io.containerd.cri.v1.runtime"]
  # kubelet asks for oom_score_adj -998/-997; lowering it needs CAP_SYS_RESOURCE, which root lacks here
  restrict_oom_score_adj = true
  # pods' network namespaces under $RUN, not the host's /var/run/netns: down removes them with it
  netns_mounts_under_state_dir = true
  [plugins."io.containerd.cri.v1.runtime".cni]
    bin_dirs = ["$(bin_path cni)"]
    conf_dir = "$NODE_DIR/cni/net.d"
  [plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc]
    runtime_type = "io.containerd.runc.v2"
    [plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc.options]
      BinaryName = "$(bin_path runc)"
      SystemdCgroup = false
[plugins."io.containerd.cri.v1.images"]
  [plugins."io.containerd.cri.v1.images".pinned_images]
    sandbox = "127.0.0.1:$REGISTRY_PORT/berth/pause:v1"
  [plugins."io.containerd.cri.v1.images".registry]
    config_path = "$NODE_DIR/certs.d"
EOF
  cat > "$NODE_DIR/cni/net.d/10-berth.conflist" <<EOF
{
  "cniVersion": "1.0.0",
  "name": "berth",
  "plugins": [
    { "type": "bridge", "bridge": "cni0", "isGateway": true, "ipMasq": false, "hairpinMode": true,
      "ipam": { "type": "host-local", "ranges": [[{ "subnet": "$POD_CIDR" }]], "routes": [{ "dst": "0.0.0.0/0" }],
                "dataDir": "$NODE_DIR/cni/ipam" } },
    { "type": "portmap", "capabilities": { "portMappings": true } }
  ]
}
EOF
  : > "$NODE_DIR/resolv.conf"  # no upstream DNS: nothing outside the machine is reachable
  cat > "$NODE_DIR/kubelet.yaml" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
cgroupDriver: cgroupfs
cgroupRoot: /$CGROUP_ROOT
failCgroupV1: false
containerRuntimeEndpoint: unix://$RUN/containerd.sock
address: $NODE_IP
port: 10250
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: 10248
tlsCertFile: $DIR/pki/kubelet.crt
tlsPrivateKeyFile: $DIR/pki/kubelet.key
authentication:
  anonymous: { enabled: false }
  webhook: { enabled: true }
  x509: { clientCAFile: $DIR/pki/ca.crt }
authorization: { mode: Webhook }
clusterDomain: cluster.local
clusterDNS: [$CLUSTER_DNS]
resolvConf: $NODE_DIR/resolv.conf
registerWithTaints:
  - { key: $REAL_NODE_TAINT, value: "true", effect: NoSchedule }
maxPods: 110
serializeImagePulls: false
imageGCHighThresholdPercent: 95
imageGCLowThresholdPercent: 90
evictionHard: { memory.available: 100Mi, nodefs.available: 2%, imagefs.available: 2% }
failSwapOn: false
EOF
}

# The kubelet's cgroup root, in every cgroup v1 hierarchy (it must exist before the kubelet starts).
node_cgroups() {
  local h d
  for h in /sys/fs/cgroup/*/; do
    d="$h$CGROUP_ROOT"
    [ -d "$d" ] || mkdir "$d" 2>/dev/null || continue
    if [ -f "${h}cpuset.cpus" ]; then
      [ -s "$d/cpuset.cpus" ] && [ "$(cat "$d/cpuset.cpus")" != "" ] || cat "${h}cpuset.cpus" > "$d/cpuset.cpus"
      [ -s "$d/cpuset.mems" ] && [ "$(cat "$d/cpuset.mems")" != "" ] || cat "${h}cpuset.mems" > "$d/cpuset.mems"
    fi
  done
}

# The kubelet sets host-wide sysctls. Their original values are kept once for all of this machine's
# real nodes (./hack/up's and ./hack/test's may run side by side) and restored when the last one
# goes. /run is a tmpfs: after a reboot the values are the kernel's again, and so is the record.
SYSCTL_RECORD=/run/berth-sysctl.orig

node_save_sysctls() {
  [ -f "$SYSCTL_RECORD" ] && return 0
  local s; for s in "${KERNEL_SYSCTLS[@]}"; do echo "$s=$(sysctl -n "$s")"; done > "$SYSCTL_RECORD.tmp"
  mv "$SYSCTL_RECORD.tmp" "$SYSCTL_RECORD"
}

node_restore_sysctls() {
  [ -f "$SYSCTL_RECORD" ] || return 0
  # Another real node still runs (its namespace exists): it keeps the kubelet's values.
  if ip netns list 2>/dev/null | awk '{print $1}' | grep -v "^$NETNS\$" | grep -q '^berth-'; then return 0; fi
  local line; while read -r line; do sysctl -qw "$line" || true; done < "$SYSCTL_RECORD"
  rm -f "$SYSCTL_RECORD"
}

node_bridge_config() {
  cat > "$NODE_DIR/netbridge.json" <<EOF
{
  "dir": "$RUN",
  "egress": true,
  "toNode": [
    { "name": "ingress", "listen": "127.0.0.1:$INGRESS_PORT", "target": "127.0.0.1:80" },
    { "name": "ingress-tls", "listen": "127.0.0.1:$INGRESS_TLS_PORT", "target": "127.0.0.1:443" },
    { "name": "acme", "listen": "127.0.0.1:$ACME_PORT", "target": "127.0.0.1:14000" },
    { "name": "acme-management", "listen": "127.0.0.1:$ACME_MANAGEMENT_PORT", "target": "127.0.0.1:15000" },
    { "name": "api", "listen": "127.0.0.1:$UP_API_PORT", "target": "$UP_API_CLUSTER_IP:80" }
  ],
  "toHost": [
    { "name": "apiserver", "listen": "0.0.0.0:$API_PORT", "target": "127.0.0.1:$API_PORT" },
    { "name": "registry", "listen": "127.0.0.1:$REGISTRY_PORT", "target": "127.0.0.1:$REGISTRY_GATE_PORT" },
    { "name": "registry-auth", "listen": "127.0.0.1:$REGISTRY_AUTH_PORT", "target": "127.0.0.1:$REGISTRY_AUTH_PORT" },
    { "name": "berth-api", "listen": "$NODE_IP:$HOST_API_PORT", "target": "127.0.0.1:$HOST_API_PORT" },
    { "name": "postgres", "listen": "$NODE_IP:$UP_PG_PORT", "target": "127.0.0.1:$UP_PG_PORT" },
    { "name": "buildkit", "listen": "$NODE_IP:$BUILDKIT_PORT", "target": "127.0.0.1:$BUILDKIT_PORT" },
    { "name": "git", "listen": "$NODE_IP:$GIT_PORT", "target": "127.0.0.1:$GIT_PORT" },
    { "name": "dns", "listen": "127.0.0.1:$DNS_PORT", "target": "127.0.0.1:$DNS_PORT" }
  ]
}
EOF
}

# The API server's egress for "cluster" traffic (kubelets, pods, services): the node side of the bridge.
node_egress_config() {
  cat > "$DIR/egress-selector.yaml" <<EOF
apiVersion: apiserver.k8s.io/v1beta1
kind: EgressSelectorConfiguration
egressSelections:
  - name: cluster
    connection:
      proxyProtocol: HTTPConnect
      transport:
        uds:
          udsName: $RUN/egress.sock
EOF
}

# Two endpoints over one storage: the host's (127.0.0.1:$REGISTRY_PORT, open: hack's pushes, buildkitd,
# tests; no pod reaches the host's loopback) and the node's (the gate: read-only, every request with
# a token of the token service, api/registry/main.ts, which grants a namespace's images only to its
# pull credential and the platform's images to anyone).
registry_up() {
  mkdir -p "$DIR/registry"
  cat > "$DIR/registry.yaml" <<EOF
version: 0.1
log: { level: warn }
storage:
  filesystem: { rootdirectory: $BERTH_LOCAL/registry }
  delete: { enabled: true }
http:
  addr: 127.0.0.1:$REGISTRY_PORT
EOF
  node "$BERTH_ROOT/api/registry/main.ts" keys "$REGISTRY_AUTH"
  BERTH_REGISTRY_AUTH_LISTEN="127.0.0.1:$REGISTRY_AUTH_PORT" BERTH_REGISTRY_AUTH_KEY_FILE="$REGISTRY_AUTH/registry.key" \
    BERTH_REGISTRY_AUTH_SIGNING_KEY_FILE="$REGISTRY_AUTH/signing.pem" \
    BERTH_REGISTRY_AUTH_SERVICE="$REGISTRY_AUTH_SERVICE" BERTH_REGISTRY_AUTH_ISSUER="$REGISTRY_AUTH_ISSUER" \
    node_start registry-auth out "$(command -v node)" "$BERTH_ROOT/api/registry/main.ts"
  cat > "$DIR/registry-gate.yaml" <<EOF
version: 0.1
log: { level: warn }
storage:
  filesystem: { rootdirectory: $BERTH_LOCAL/registry }
  maintenance: { readonly: { enabled: true } }
http:
  addr: 127.0.0.1:$REGISTRY_GATE_PORT
auth:
  token:
    realm: http://127.0.0.1:$REGISTRY_AUTH_PORT/token
    service: $REGISTRY_AUTH_SERVICE
    issuer: $REGISTRY_AUTH_ISSUER
    jwks: $REGISTRY_AUTH/jwks.json
    signingalgorithms: [EdDSA]
EOF
  node_start registry out "$(bin_path registry)" serve "$DIR/registry.yaml"
  node_start registry-gate out "$(bin_path registry)" serve "$DIR/registry-gate.yaml"
  wait_for registry 30 curl -sf "http://127.0.0.1:$REGISTRY_PORT/v2/"
  wait_for "the registry's token service" 15 curl -sf "http://127.0.0.1:$REGISTRY_AUTH_PORT/healthz"
  wait_for "the registry's gate" 30 registry_gate_challenges
}

# The gate answers, asking for a token (401).
registry_gate_challenges() {
  [ "$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$REGISTRY_GATE_PORT/v2/")" = 401 ]
}

# The Git server (hack/lib/git-server.ts): repositories under $BERTH_LOCAL/git, kept across down/up
# like the registry's images. Repositories named private-* need BERTH_GIT_CREDENTIALS.
GIT_CREDENTIALS="${BERTH_GIT_CREDENTIALS:-berth:local-git-secret}"
git_server_up() {
  mkdir -p "$BERTH_LOCAL/git"
  BERTH_GIT_CREDENTIALS="$GIT_CREDENTIALS" node_start git-server out "$(command -v node)" "$BERTH_ROOT/hack/lib/git-server.ts" \
    --listen "127.0.0.1:$GIT_PORT" --root "$BERTH_LOCAL/git"
  wait_for "the Git server" 15 curl -s -o /dev/null "http://127.0.0.1:$GIT_PORT/"
}

node_up() {
  node_deps
  node_save_sysctls
  node_network
  node_cgroups
  node_configs
  node_bridge_config
  registry_up
  git_server_up
  local node; node=$(command -v node)
  node_start netbridge-host out "$node" "$BERTH_ROOT/hack/lib/netbridge.ts" host "$NODE_DIR/netbridge.json"
  node_start netbridge-node in "$node" "$BERTH_ROOT/hack/lib/netbridge.ts" node "$NODE_DIR/netbridge.json"
  wait_for "the node's bridge" 15 test -S "$RUN/egress.sock"
  # containerd looks its shim up on PATH, by that exact name
  mkdir -p "$RUN/bin"; ln -sf "$(bin_path containerd-shim-runc-v2)" "$RUN/bin/containerd-shim-runc-v2"
  node_start containerd in env PATH="$RUN/bin:$PATH" "$(bin_path containerd)" --config "$NODE_DIR/containerd.toml"
  wait_for containerd 30 test -S "$RUN/containerd.sock"
  node_start kubelet in "$(bin_path kubelet)" --config "$NODE_DIR/kubelet.yaml" \
    --kubeconfig "$KUBECONFIG_OUT" --node-ip "$NODE_IP" --hostname-override "$NODE_NAME" \
    --root-dir "$NODE_DIR/kubelet" --cert-dir "$NODE_DIR/kubelet/pki" \
    --node-labels "berth.dev/node=real"
  local deadline=$((SECONDS + 120))
  until [ "$(kubectl_ get node "$NODE_NAME" -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}' 2>/dev/null)" = True ]; do
    node_running kubelet || { tail -n 20 "$DIR/logs/kubelet.log" >&2; die "the kubelet exited (log: $DIR/logs/kubelet.log)"; }
    [ $SECONDS -lt $deadline ] || { tail -n 20 "$DIR/logs/kubelet.log" >&2; die "the real node did not become Ready in 120 s"; }
    sleep 1
  done
  node_start kube-proxy in "$(bin_path kube-proxy)" --kubeconfig "$KUBECONFIG_OUT" --hostname-override "$NODE_NAME" \
    --proxy-mode iptables --cluster-cidr "$POD_CIDR" --masquerade-all \
    --conntrack-max-per-core 0 --conntrack-tcp-timeout-established 0 --conntrack-tcp-timeout-close-wait 0 \
    --bind-address "$NODE_IP" --healthz-bind-address 127.0.0.1:10256 --metrics-bind-address 127.0.0.1:10249
  node_policies
  node_dns
  node_metrics
  node_ingress
  node_tls
  log "real node $NODE_NAME ready in network namespace $NETNS (registry 127.0.0.1:$REGISTRY_PORT, ingress 127.0.0.1:$INGRESS_PORT)"
}

# The NetworkPolicy engine: kube-router's firewall alone (no router, no service proxy, no CNI
# config), in the node's namespace like kube-proxy. Its iptables chains and ipsets filter each pod's
# traffic by the policies that select it (on the bridge through br_netfilter, to the node through
# INPUT); traffic from the node's own addresses (the kubelet's probes, Traefik) is let in. Its rules
# go with the namespace on down.
node_policies() {
  need_system ipset
  node_start kube-router in "$(bin_path kube-router)" --kubeconfig "$KUBECONFIG_OUT" --hostname-override "$NODE_NAME" \
    --run-firewall=true --run-router=false --run-service-proxy=false --enable-cni=false \
    --service-cluster-ip-range "$SERVICE_CIDR" --health-port 0 --metrics-port 0
  wait_for "kube-router's firewall" 60 nsexec iptables -w -n -L KUBE-ROUTER-FORWARD
}

# A Service whose one endpoint is a process of the node itself (on $NODE_IP), so pods and the
# API server reach it by its name. Usage: node_service <namespace> <name> <clusterIP or ""> "<port name>:<port>:<protocol>:<node port>"...
node_service() {
  local ns="$1" name="$2" ip="$3" p svc_ports="" slice_ports=""
  for p in $4; do
    IFS=: read -r pname port proto target <<<"$p"
    svc_ports+="{ name: $pname, port: $port, protocol: $proto, targetPort: $target }, "
    slice_ports+="{ name: $pname, port: $target, protocol: $proto }, "
  done
  kubectl_ apply --server-side -f - >/dev/null <<EOF
apiVersion: v1
kind: Service
metadata: { name: $name, namespace: $ns }
spec: { ${ip:+clusterIP: $ip, }ports: [${svc_ports%, }] }
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: { name: $name-node, namespace: $ns, labels: { kubernetes.io/service-name: $name, endpointslice.kubernetes.io/managed-by: berth-hack } }
addressType: IPv4
endpoints: [{ addresses: ["$NODE_IP"], conditions: { ready: true } }]
ports: [${slice_ports%, }]
EOF
}

# Cluster DNS: CoreDNS as a process of the node (no image needed), behind the kube-dns Service.
# Names outside the cluster go to the local DNS server (Pebble's challenge test server, the one
# Pebble resolves with; over TCP, as the bridge carries it): it answers only the records set through
# its management API, so pods resolve no public name (nothing outside the machine is reachable),
# and a custom domain whose CNAME was set there verifies from the operator's pod as it would
# against public DNS (docs/domains.md).
node_dns() {
  cat > "$NODE_DIR/Corefile" <<EOF
.:53 {
    bind $NODE_IP
    errors
    kubernetes cluster.local in-addr.arpa ip6.arpa {
        kubeconfig $KUBECONFIG_OUT
        pods insecure
        fallthrough in-addr.arpa ip6.arpa
    }
    forward . 127.0.0.1:$DNS_PORT {
        force_tcp
    }
    cache 5
}
EOF
  node_start coredns in "$(bin_path coredns)" -conf "$NODE_DIR/Corefile"
  node_service kube-system kube-dns "$CLUSTER_DNS" "dns:53:UDP:53 dns-tcp:53:TCP:53"
}

# The resource metrics API (kubectl top, HPAs on CPU): metrics-server as a process of the node,
# scraping the kubelet, behind an APIService the API server reaches through its egress.
node_metrics() {
  node_start metrics-server in "$(bin_path metrics-server)" --kubeconfig "$KUBECONFIG_OUT" \
    --authentication-kubeconfig "$KUBECONFIG_OUT" --authorization-kubeconfig "$KUBECONFIG_OUT" \
    --bind-address "$NODE_IP" --secure-port 4443 --tls-cert-file "$DIR/pki/metrics-server.crt" --tls-private-key-file "$DIR/pki/metrics-server.key" \
    --kubelet-preferred-address-types InternalIP --kubelet-certificate-authority "$DIR/pki/ca.crt" \
    --metric-resolution 15s --kubelet-request-timeout 5s --node-selector berth.dev/node=real
  node_service kube-system metrics-server "" "https:443:TCP:4443"
  kubectl_ apply --server-side -f - >/dev/null <<EOF
apiVersion: apiregistration.k8s.io/v1
kind: APIService
metadata: { name: v1beta1.metrics.k8s.io }
spec:
  service: { name: metrics-server, namespace: kube-system, port: 443 }
  group: metrics.k8s.io
  version: v1beta1
  caBundle: $(base64 -w0 < "$DIR/pki/ca.crt")
  groupPriorityMinimum: 100
  versionPriority: 100
EOF
}

# The ingress controller: Traefik as a process of the node, on :80 inside the namespace (the host
# reaches it at 127.0.0.1:$INGRESS_PORT), routing Ingresses of its class (the default) to pods,
# with its CRD provider on (hack/cluster applies Traefik's CRDs) for the ForwardAuth Middlewares
# that guard private Apps: an Ingress names one in traefik.ingress.kubernetes.io/router.middlewares.
# Like Traefik in a pod, it resolves names with the cluster's DNS (a ForwardAuth address such as
# http://berth-api.berth-system.svc, as the chart writes it): its own mount namespace has the node's
# pod-style resolv.conf bound over /etc/resolv.conf, the host's stays as it is (and the mount goes
# with the process).
node_ingress() {
  kubectl_ apply --server-side -f - >/dev/null <<EOF
apiVersion: networking.k8s.io/v1
kind: IngressClass
metadata: { name: traefik, annotations: { ingressclass.kubernetes.io/is-default-class: "true" } }
spec: { controller: traefik.io/ingress-controller }
EOF
  printf 'nameserver %s\nsearch svc.cluster.local cluster.local\noptions ndots:5\n' "$CLUSTER_DNS" > "$NODE_DIR/traefik-resolv.conf"
  node_start traefik in unshare --mount --propagation private \
    sh -c 'mount --bind "$1" /etc/resolv.conf && shift && exec "$@"' sh "$NODE_DIR/traefik-resolv.conf" \
    env KUBECONFIG="$KUBECONFIG_OUT" "$(bin_path traefik)" \
    --entryPoints.web.address=:80 --entryPoints.websecure.address=:443 --entryPoints.websecure.http.tls=true \
    --providers.kubernetesingress=true --providers.kubernetescrd=true \
    --providers.kubernetesingress.ingressendpoint.ip="$NODE_IP" \
    --ping=true --ping.entryPoint=web --log.level=WARN --accesslog=false --global.checknewversion=false --global.sendanonymoususage=false
  wait_for traefik 30 nsexec curl -sf http://127.0.0.1:80/ping
}

# Certificates for custom domains: cert-manager's controller (hack/go/kube/cert-manager/main.go) as a process
# of the host, and two ClusterIssuers:
# - $DOMAIN_ISSUER, a CA (a selfSigned issuer signs the CA Certificate, whose Secret backs it);
# - $ACME_ISSUER, ACME against Pebble with HTTP-01 through Traefik: for each challenge cert-manager
#   runs a solver pod (berth/acmesolver, hack/images.ts) on the node behind an Ingress of class
#   traefik for the challenge's path; Pebble, inside $NETNS, resolves the domain with the tests' DNS
#   server (over TCP, bridged to the host) and fetches http://<domain>/.well-known/acme-challenge/<token>
#   from the address found, port 80: Traefik's web entrypoint.
# cert-manager first checks each challenge itself: a GET of http://<domain>/.well-known/... from its
# own process. The domain's address is the node's, which the host does not route to, so the
# controller's HTTP_PROXY is the ingress's host port: Go's ProxyFromEnvironment sends plain-HTTP
# requests there (absolute URI, Host the domain) and never proxies loopback (the API server,
# Pebble); nothing else of the controller speaks plain HTTP.
# And the DNS server the tests set records in (Pebble's challenge test server on
# 127.0.0.1:$DNS_PORT, no default answers: a name without records has none).
node_tls() {
  node_start pebble-challtestsrv out "$(bin_path pebble-challtestsrv)" -dnsserver "127.0.0.1:$DNS_PORT" \
    -management "127.0.0.1:$DNS_MANAGEMENT_PORT" -http01 "" -https01 "" -doh "" -tlsalpn01 "" -defaultIPv4 "" -defaultIPv6 ""
  wait_for "the DNS server" 15 curl -sf -o /dev/null -X POST -d '{"host":"probe.invalid."}' "http://127.0.0.1:$DNS_MANAGEMENT_PORT/clear-a"
  node_pebble
  local solver
  solver=$(node "$BERTH_ROOT/hack/images.ts" build-acmesolver --binary "$(bin_path acmesolver)" --registry "127.0.0.1:$REGISTRY_PORT" | tail -1)
  [ -n "$solver" ] || die "hack/images.ts printed no acmesolver reference"
  node_start cert-manager-controller out env HTTP_PROXY="http://127.0.0.1:$INGRESS_PORT" NO_PROXY="127.0.0.1,localhost" \
    "$(bin_path cert-manager-controller)" --kubeconfig "$KUBECONFIG_OUT" \
    --cluster-resource-namespace cert-manager --acme-http01-solver-image "$solver" \
    --acme-http01-solver-nameservers "127.0.0.1:$DNS_PORT" --v=1
  kubectl_ apply --server-side -f - >/dev/null <<EOF
apiVersion: v1
kind: Namespace
metadata: { name: cert-manager }
---
apiVersion: cert-manager.io/v1
kind: ClusterIssuer
metadata: { name: berth-selfsigned }
spec: { selfSigned: {} }
---
apiVersion: cert-manager.io/v1
kind: Certificate
metadata: { name: $DOMAIN_ISSUER, namespace: cert-manager }
spec:
  isCA: true
  commonName: Berth local CA
  secretName: $DOMAIN_ISSUER
  duration: 87600h
  privateKey: { algorithm: ECDSA, size: 256 }
  issuerRef: { name: berth-selfsigned, kind: ClusterIssuer, group: cert-manager.io }
---
apiVersion: cert-manager.io/v1
kind: ClusterIssuer
metadata: { name: $DOMAIN_ISSUER }
spec: { ca: { secretName: $DOMAIN_ISSUER } }
---
apiVersion: cert-manager.io/v1
kind: ClusterIssuer
metadata: { name: $ACME_ISSUER }
spec:
  acme:
    server: https://127.0.0.1:$ACME_PORT/dir
    caBundle: $(base64 -w0 < "$DIR/pki/pebble-ca.crt")
    privateKeySecretRef: { name: $ACME_ISSUER-account }
    solvers:
      - http01:
          ingress:
            ingressClassName: traefik
            serviceType: ClusterIP
            # the solver pods run on the real node (the kwok nodes run nothing)
            podTemplate:
              spec:
                nodeSelector: { berth.dev/node: real }
                tolerations: [{ key: $REAL_NODE_TAINT, operator: Exists, effect: NoSchedule }]
EOF
  local i
  for i in "$DOMAIN_ISSUER" "$ACME_ISSUER"; do
    wait_for "the ClusterIssuer $i" 90 sh -c "'$(bin_path kubectl)' --kubeconfig '$KUBECONFIG_OUT' get clusterissuer $i -o jsonpath='{.status.conditions[?(@.type==\"Ready\")].status}' | grep -q True"
  done
}

# Pebble (a small ACME server for tests) inside $NETNS: its HTTP-01 validations dial port 80 of the
# domain's address (the node's: Traefik), names are resolved by the tests' DNS server (bridged),
# and its APIs answer on the host at 127.0.0.1:$ACME_PORT (ACME) and :$ACME_MANAGEMENT_PORT
# (management: /roots/0 is the root that issues, generated anew at each start). TLS: the module's
# test certificate (127.0.0.1, localhost), signed by its test CA, copied to $DIR/pki/pebble-ca.crt.
node_pebble() {
  local mod
  mod=$(cd "$BERTH_CACHE/build" && go mod download -json "github.com/letsencrypt/pebble/v2@$PEBBLE_VERSION" | sed -n 's/.*"Dir": "\(.*\)".*/\1/p')
  [ -f "$mod/test/certs/localhost/cert.pem" ] || die "Pebble $PEBBLE_VERSION has no test certificate"
  cp "$mod/test/certs/localhost/cert.pem" "$DIR/pki/pebble.crt"
  cp "$mod/test/certs/localhost/key.pem" "$DIR/pki/pebble.key"
  cp "$mod/test/certs/pebble.minica.pem" "$DIR/pki/pebble-ca.crt"
  cat > "$NODE_DIR/pebble.json" <<EOF
{
  "pebble": {
    "listenAddress": "127.0.0.1:14000",
    "managementListenAddress": "127.0.0.1:15000",
    "certificate": "$DIR/pki/pebble.crt",
    "privateKey": "$DIR/pki/pebble.key",
    "httpPort": 80,
    "tlsPort": 443,
    "ocspResponderURL": "",
    "externalAccountBindingRequired": false,
    "retryAfter": { "authz": 1, "order": 1 },
    "keyAlgorithm": "ecdsa",
    "profiles": { "default": { "description": "90 days, like Let's Encrypt's", "validityPeriod": 7776000 } }
  }
}
EOF
  # no random sleeps before validations and no rejected nonces (both only slow tests down); every
  # authorization validated anew (a reused one would skip HTTP-01)
  node_start pebble in env PEBBLE_VA_NOSLEEP=1 PEBBLE_WFE_NONCEREJECT=0 PEBBLE_AUTHZREUSE=0 \
    "$(bin_path pebble)" -config "$NODE_DIR/pebble.json" -dnsserver "127.0.0.1:$DNS_PORT"
  wait_for Pebble 30 curl -sf -o /dev/null --cacert "$DIR/pki/pebble-ca.crt" "https://127.0.0.1:$ACME_PORT/dir"
}

# Unmounts what is mounted under the directories (deepest first) and removes the cgroup `name`,
# deepest first, from every hierarchy. Usage: undo_mounts_and_cgroups <cgroup name> <dir>...
undo_mounts_and_cgroups() {
  local cgroup="$1"; shift
  local dirs m d; dirs=$(IFS='|'; echo "$*")
  for m in $(awk '{print $2}' /proc/mounts | grep -E "^($dirs)(/|$)" | sort -r); do umount -l "$m" 2>/dev/null || true; done
  for d in /sys/fs/cgroup/*/"$cgroup" /sys/fs/cgroup/"$cgroup"; do
    [ -d "$d" ] || continue
    find "$d" -depth -type d -exec rmdir {} \; 2>/dev/null || true
  done
}

node_down() {
  # Pods first, while the kubelet still runs to stop them and release their addresses.
  if node_running kubelet && [ -f "$KUBECONFIG_OUT" ]; then
    kubectl_ delete pods -A --field-selector "spec.nodeName=$NODE_NAME" --grace-period=0 --force --wait=false >/dev/null 2>&1 || true
    for _ in $(seq 1 60); do
      [ -z "$(kubectl_ get pods -A --field-selector "spec.nodeName=$NODE_NAME" -o name 2>/dev/null)" ] && break
      sleep 0.5
    done
  fi
  local c
  for c in cert-manager-controller pebble pebble-challtestsrv traefik metrics-server coredns kube-router kube-proxy kubelet; do node_stop "$c"; done
  # What the kubelet left running: kill the containers' tasks through containerd, then stop it.
  if node_running containerd; then
    local ctr; ctr=(env "$(bin_path ctr)" --address "$RUN/containerd.sock" -n k8s.io)
    for t in $("${ctr[@]}" tasks ls -q 2>/dev/null); do "${ctr[@]}" tasks kill -s SIGKILL "$t" >/dev/null 2>&1 || true; done
    sleep 0.5
    for t in $("${ctr[@]}" tasks ls -q 2>/dev/null); do "${ctr[@]}" tasks delete -f "$t" >/dev/null 2>&1 || true; done
  fi
  for c in containerd netbridge-node netbridge-host registry registry-gate registry-auth git-server; do node_stop "$c"; done
  undo_mounts_and_cgroups "$CGROUP_ROOT" "$NODE_DIR" "$RUN"
  if ip netns list 2>/dev/null | grep -qw "$NETNS"; then ip netns delete "$NETNS"; log "deleted network namespace $NETNS"; fi
  node_restore_sysctls
  rm -rf "$RUN" "$NODE_DIR/kubelet" "$NODE_DIR/containerd" "$NODE_DIR/cni/ipam"
}

# BERTH_WORKSPACE_NETWORK for this node, as JSON: every pod's egress to DNS (CoreDNS runs on the
# node) and to the API at the given port of the node (the tests' API on the host; none for
# hack/up, whose API is a pod the chart names); build pods' to buildkitd and the Git server.
node_workspace_network() { # [api port]
  local node="{\"ipBlock\":{\"cidr\":\"$NODE_IP/32\"}}" api=""
  [ -n "${1:-}" ] && api=",{\"protocol\":\"TCP\",\"port\":$1}"
  printf '{"egressTo":[{"to":[%s],"ports":[{"protocol":"UDP","port":53},{"protocol":"TCP","port":53}%s]}],"buildEgressTo":[{"to":[%s],"ports":[{"protocol":"TCP","port":%s},{"protocol":"TCP","port":%s}]}]}' \
    "$node" "$api" "$node" "$BUILDKIT_PORT" "$GIT_PORT"
}

# What tests and hack/up need to know about the node, as shell exports.
node_env() {
  echo "export BERTH_REGISTRY=127.0.0.1:$REGISTRY_PORT"
  # the node's endpoint of the registry (token authentication) on the host, and the key of the
  # namespaces' pull credentials (the operator's BERTH_REGISTRY_AUTH_KEY_FILE)
  echo "export BERTH_REGISTRY_GATE=127.0.0.1:$REGISTRY_GATE_PORT BERTH_REGISTRY_AUTH_KEY_FILE=$REGISTRY_AUTH/registry.key"
  echo "export BERTH_INGRESS_URL=http://127.0.0.1:$INGRESS_PORT BERTH_INGRESS_TLS_URL=https://127.0.0.1:$INGRESS_TLS_PORT"
  # custom domains: the DNS server tests set records in, and the ClusterIssuer of their certificates
  echo "export BERTH_DNS_RESOLVER=127.0.0.1:$DNS_PORT BERTH_DNS_MANAGEMENT_URL=http://127.0.0.1:$DNS_MANAGEMENT_PORT BERTH_DOMAIN_ISSUER=$DOMAIN_ISSUER"
  # the ACME ClusterIssuer (Pebble) and Pebble's management API (https, its CA in the issuer's caBundle)
  echo "export BERTH_ACME_ISSUER=$ACME_ISSUER BERTH_ACME_MANAGEMENT_URL=https://127.0.0.1:$ACME_MANAGEMENT_PORT"
  echo "export BERTH_NODE_IP=$NODE_IP BERTH_NODE_NAME=$NODE_NAME BERTH_HOST_API_PORT=$HOST_API_PORT"
  # The workspaces' NetworkPolicies on this node (BERTH_WORKSPACE_NETWORK): cluster DNS and the
  # tests' API are processes of the node, and so are buildkitd and the Git server for build pods.
  echo "export BERTH_WORKSPACE_NETWORK='$(node_workspace_network "$HOST_API_PORT")'"
  # git push $BERTH_GIT_URL/<name>.git from the host; Apps name $BERTH_GIT_CLUSTER_URL/<name>.git (what build Jobs reach)
  echo "export BERTH_GIT_URL=http://127.0.0.1:$GIT_PORT BERTH_GIT_CLUSTER_URL=http://$NODE_IP:$GIT_PORT BERTH_GIT_CREDENTIALS=$GIT_CREDENTIALS"
}

node_status() {
  local c all=0
  for c in registry registry-gate registry-auth git-server "${NODE_COMPONENTS[@]}"; do
    if node_running "$c"; then echo "$c: running (pid $(cat "$DIR/$c.pid"))"; else echo "$c: stopped"; all=1; fi
  done
  return $all
}
