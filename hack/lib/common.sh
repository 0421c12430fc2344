# Shared settings for the hack/ scripts. Source it; it defines paths and pinned versions.
# Everything built or downloaded lives under $BERTH_CACHE (never in the repo).
set -euo pipefail

BERTH_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
BERTH_CACHE="${BERTH_CACHE:-$HOME/.cache/berth}"
BERTH_LOCAL="${BERTH_LOCAL:-$BERTH_ROOT/.local}"

# Pinned versions. Changing one rebuilds only that binary (the cache is keyed by version).
K8S_VERSION="${K8S_VERSION:-v1.36.3}"
ETCD_VERSION="${ETCD_VERSION:-v3.6.16}"
KWOK_VERSION="${KWOK_VERSION:-v0.8.0}"
HELM_VERSION="${HELM_VERSION:-v3.22.0}"
CERT_MANAGER_VERSION="${CERT_MANAGER_VERSION:-v1.21.2}"
# Pebble (a small ACME server: the local ACME CA of custom domains) and its challenge test server
# (a DNS server whose records tests set over HTTP).
PEBBLE_VERSION="${PEBBLE_VERSION:-v2.10.1}"
NODE_VERSION="${NODE_VERSION:-24}"
# The real node (hack/cluster --node) and what runs around it. Exact versions known to resolve on
# the module proxy here, never `latest`: it is a partial mirror, where some versions, every
# pseudo-version and every branch query answer 403 "This module version is not available".
CONTAINERD_VERSION="${CONTAINERD_VERSION:-v2.4.2}"
RUNC_VERSION="${RUNC_VERSION:-v1.5.2}"
CNI_PLUGINS_VERSION="${CNI_PLUGINS_VERSION:-v1.9.1}"
REGISTRY_VERSION="${REGISTRY_VERSION:-v3.1.2}"
BUILDKIT_VERSION="${BUILDKIT_VERSION:-v0.34.2}"
TRAEFIK_VERSION="${TRAEFIK_VERSION:-v3.6.12}"
METRICS_SERVER_VERSION="${METRICS_SERVER_VERSION:-v0.9.0}"
COREDNS_VERSION="${COREDNS_VERSION:-v1.15.0}"
# The node's NetworkPolicy engine: kube-router's firewall, built from the wrapper module
# hack/kube-router (its go.mod pins this version and raises flawed dependencies).
KUBE_ROUTER_VERSION="v2.1.0"

BERTH_BIN="$BERTH_CACHE/bin"

# Go: no workspace, no toolchain switching, static binaries, module proxy only.
export GOWORK=off GOTOOLCHAIN=local CGO_ENABLED=0 GOFLAGS=-mod=mod

log() { printf '[%s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() { log "error: $*"; exit 1; }

kube_router_src_hash() { cat "$BERTH_ROOT"/hack/kube-router/go.mod "$BERTH_ROOT"/hack/kube-router/go.sum | sha256sum | cut -c1-8; }
cert_manager_src_hash() { cat "$BERTH_ROOT"/hack/cert-manager/main.go "$BERTH_ROOT"/hack/cert-manager/acmesolver/main.go | sha256sum | cut -c1-8; }

bin_path() { # name -> path of the cached binary for the pinned version
  case "$1" in
    kube-apiserver|kube-controller-manager|kube-scheduler|kubectl|kubelet|kube-proxy) echo "$BERTH_BIN/$1-$K8S_VERSION" ;;
    containerd|containerd-shim-runc-v2|ctr) echo "$BERTH_BIN/$1-$CONTAINERD_VERSION" ;;
    runc) echo "$BERTH_BIN/runc-$RUNC_VERSION" ;;
    cni) echo "$BERTH_BIN/cni-$CNI_PLUGINS_VERSION" ;;  # a directory: bridge, host-local, loopback, portmap
    registry) echo "$BERTH_BIN/registry-$REGISTRY_VERSION" ;;
    buildkitd|buildctl) echo "$BERTH_BIN/$1-$BUILDKIT_VERSION" ;;
    traefik) echo "$BERTH_BIN/traefik-$TRAEFIK_VERSION" ;;
    pebble-challtestsrv) echo "$BERTH_BIN/pebble-challtestsrv-$PEBBLE_VERSION" ;;
    # our mains over cert-manager's packages (hack/cert-manager): keyed by their sources' hash too
    cert-manager-controller|acmesolver) echo "$BERTH_BIN/$1-$CERT_MANAGER_VERSION-$(cert_manager_src_hash)" ;;
    pebble) echo "$BERTH_BIN/pebble-$PEBBLE_VERSION" ;;
    metrics-server) echo "$BERTH_BIN/metrics-server-$METRICS_SERVER_VERSION" ;;
    coredns) echo "$BERTH_BIN/coredns-$COREDNS_VERSION" ;;
    kube-router) echo "$BERTH_BIN/kube-router-$KUBE_ROUTER_VERSION-$(kube_router_src_hash)" ;;
    etcd) echo "$BERTH_BIN/etcd-$ETCD_VERSION" ;;
    kwok) echo "$BERTH_BIN/kwok-$KWOK_VERSION" ;;
    helm) echo "$BERTH_BIN/helm-$HELM_VERSION" ;;
    *) die "unknown binary $1" ;;
  esac
}

source "$BERTH_ROOT/hack/lib/system.sh"
