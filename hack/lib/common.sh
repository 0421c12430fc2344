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
NODE_VERSION="${NODE_VERSION:-24}"

BERTH_BIN="$BERTH_CACHE/bin"

# Go: no workspace, no toolchain switching, static binaries, module proxy only.
export GOWORK=off GOTOOLCHAIN=local CGO_ENABLED=0 GOFLAGS=-mod=mod

log() { printf '[%s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() { log "error: $*"; exit 1; }

bin_path() { # name -> path of the cached binary for the pinned version
  case "$1" in
    kube-apiserver|kube-controller-manager|kube-scheduler|kubectl) echo "$BERTH_BIN/$1-$K8S_VERSION" ;;
    etcd) echo "$BERTH_BIN/etcd-$ETCD_VERSION" ;;
    kwok) echo "$BERTH_BIN/kwok-$KWOK_VERSION" ;;
    helm) echo "$BERTH_BIN/helm-$HELM_VERSION" ;;
    *) die "unknown binary $1" ;;
  esac
}
