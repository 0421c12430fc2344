# Shared settings for the hack/ scripts. Source it; it defines paths and pinned versions.
# Everything built or downloaded lives under $BERTH_CACHE (never in the repo).
set -euo pipefail

BERTH_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
BERTH_CACHE="${BERTH_CACHE:-$HOME/.cache/berth}"
BERTH_LOCAL="${BERTH_LOCAL:-$BERTH_ROOT/.local}"

# Pinned versions. A binary is cached by its version (and its Go module's key: bin_path).
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
# The node's NetworkPolicy engine: kube-router's firewall (only --run-firewall runs).
KUBE_ROUTER_VERSION="${KUBE_ROUTER_VERSION:-v2.1.0}"
# All but runc are built from two Go modules of ours (hack/binaries): hack/go/kube and
# hack/go/runtime, whose go.mod must select exactly the versions above. To change one, change both:
# `cd hack/go/<module> && go get <module path>@<version> && go mod tidy`; the build refuses a
# difference (module_versions_check). The table: module, module path, version variable.
GO_MODULE_PINS="kube k8s.io/kubernetes K8S_VERSION
kube sigs.k8s.io/kwok KWOK_VERSION
kube helm.sh/helm/v3 HELM_VERSION
kube github.com/cert-manager/cert-manager CERT_MANAGER_VERSION
kube github.com/traefik/traefik/v3 TRAEFIK_VERSION
kube sigs.k8s.io/metrics-server METRICS_SERVER_VERSION
kube github.com/coredns/coredns COREDNS_VERSION
kube github.com/cloudnativelabs/kube-router/v2 KUBE_ROUTER_VERSION
runtime go.etcd.io/etcd/server/v3 ETCD_VERSION
runtime github.com/containerd/containerd/v2 CONTAINERD_VERSION
runtime github.com/containernetworking/plugins CNI_PLUGINS_VERSION
runtime github.com/distribution/distribution/v3 REGISTRY_VERSION
runtime github.com/moby/buildkit BUILDKIT_VERSION
runtime github.com/letsencrypt/pebble/v2 PEBBLE_VERSION"

BERTH_BIN="$BERTH_CACHE/bin"

# Go: no workspace, no toolchain switching, static binaries, module proxy only.
export GOWORK=off GOTOOLCHAIN=local CGO_ENABLED=0 GOFLAGS=-mod=mod

log() { printf '[%s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() { log "error: $*"; exit 1; }

# A module's key: the hash of its files (go.mod, go.sum, our mains), so that a change to any
# dependency or main rebuilds its binaries. hack/lib/pinned.ts computes the same.
go_module_key() { (cd "$BERTH_ROOT/hack/go/$1" && find . -type f -print0 | LC_ALL=C sort -z | xargs -0 cat) | sha256sum | cut -c1-8; }

# Refuse a module whose go.mod selects another version than the one pinned above, or (kube) a
# Kubernetes staging module at another version than v0.<K8S_VERSION's minor and patch>.
module_versions_check() { # module
  local gomod="$BERTH_ROOT/hack/go/$1/go.mod" m path var want have
  while read -r m path var; do
    [ "$m" = "$1" ] || continue
    want="${!var}"
    have=$(awk -v p="$path" '($1 == p && $2 ~ /^v/) {print $2; exit} ($1 == "require" && $2 == p) {print $3; exit}' "$gomod")
    [ "$have" = "$want" ] || die "hack/go/$1/go.mod selects $path ${have:-(none)}, but $var is $want: change both (cd hack/go/$1 && go get $path@$want && go mod tidy)"
  done <<< "$GO_MODULE_PINS"
  if [ "$1" = kube ]; then
    local staging="v0.${K8S_VERSION#v1.}" wrong
    wrong=$(awk -v v="$staging" '$2 == "=>" && $1 ~ /^k8s\.io\// && $3 == $1 && $4 != v {print $1 " " $4}' "$gomod")
    [ -z "$wrong" ] || die "hack/go/kube/go.mod replaces Kubernetes' staging modules by another version than $staging: $wrong"
  fi
}

bin_path() { # name -> path of the cached binary for the pinned version (and its module's key)
  case "$1" in
    kube-apiserver|kube-controller-manager|kube-scheduler|kubectl|kubelet|kube-proxy) echo "$BERTH_BIN/$1-$K8S_VERSION-$(go_module_key kube)" ;;
    containerd|containerd-shim-runc-v2|ctr) echo "$BERTH_BIN/$1-$CONTAINERD_VERSION-$(go_module_key runtime)" ;;
    runc) echo "$BERTH_BIN/runc-$RUNC_VERSION" ;;
    cni) echo "$BERTH_BIN/cni-$CNI_PLUGINS_VERSION-$(go_module_key runtime)" ;;  # a directory: bridge, host-local, loopback, portmap
    registry) echo "$BERTH_BIN/registry-$REGISTRY_VERSION-$(go_module_key runtime)" ;;
    buildkitd|buildctl) echo "$BERTH_BIN/$1-$BUILDKIT_VERSION-$(go_module_key runtime)" ;;
    traefik) echo "$BERTH_BIN/traefik-$TRAEFIK_VERSION-$(go_module_key kube)" ;;
    pebble|pebble-challtestsrv) echo "$BERTH_BIN/$1-$PEBBLE_VERSION-$(go_module_key runtime)" ;;
    # our mains over cert-manager's packages (hack/go/kube/cert-manager)
    cert-manager-controller|acmesolver) echo "$BERTH_BIN/$1-$CERT_MANAGER_VERSION-$(go_module_key kube)" ;;
    metrics-server) echo "$BERTH_BIN/metrics-server-$METRICS_SERVER_VERSION-$(go_module_key kube)" ;;
    coredns) echo "$BERTH_BIN/coredns-$COREDNS_VERSION-$(go_module_key kube)" ;;
    kube-router) echo "$BERTH_BIN/kube-router-$KUBE_ROUTER_VERSION-$(go_module_key kube)" ;;
    etcd) echo "$BERTH_BIN/etcd-$ETCD_VERSION-$(go_module_key runtime)" ;;
    kwok) echo "$BERTH_BIN/kwok-$KWOK_VERSION-$(go_module_key kube)" ;;
    helm) echo "$BERTH_BIN/helm-$HELM_VERSION-$(go_module_key kube)" ;;
    *) die "unknown binary $1" ;;
  esac
}

source "$BERTH_ROOT/hack/lib/system.sh"
