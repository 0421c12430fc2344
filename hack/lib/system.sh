# The Debian packages of hack/lib/system-packages.txt: installed when missing, and named when a
# tool is missing. Sourced by common.sh.

SYSTEM_PACKAGES_FILE="${SYSTEM_PACKAGES_FILE:-$BERTH_ROOT/hack/lib/system-packages.txt}"

# The list's rows (package when provides need...) that this run needs: every row for the real node
# (BERTH_REAL_NODE=1), else those marked `any`.
system_package_rows() {
  local scope=any
  [ "${BERTH_REAL_NODE:-0}" = 1 ] && scope=real-node
  awk -v scope="$scope" '!/^[[:space:]]*(#|$)/ && (scope == "real-node" || $2 == "any")' "$SYSTEM_PACKAGES_FILE"
}

# The package of the list that provides a command (or pc:MODULE), whatever the run needs.
system_package_of() { # command | pc:MODULE
  awk -v w="$1" '!/^[[:space:]]*(#|$)/ { n = split($3, p, ","); for (i = 1; i <= n; i++) if (p[i] == w) { print $1; exit } }' "$SYSTEM_PACKAGES_FILE"
}

# Whether a command (or pc:MODULE) is there.
system_tool_present() { # command | pc:MODULE
  case "$1" in
    pc:*) command -v pkg-config >/dev/null && pkg-config --exists "${1#pc:}" 2>/dev/null ;;
    *) command -v "$1" >/dev/null ;;
  esac
}

# Whether a package of the list is installed: dpkg's word where there is dpkg, else whether what it
# provides is there.
system_package_present() { # package provides
  if command -v dpkg-query >/dev/null; then
    [ "$(dpkg-query -W -f='${db:Status-Abbrev}' "$1" 2>/dev/null)" = "ii " ]
    return
  fi
  local what
  for what in ${2//,/ }; do
    [ "$what" = - ] || system_tool_present "$what" || return 1
  done
}

# Installs the packages of the list that this run needs and that are missing, with one
# `apt-get update`, saying what it installs. Without them it stops before anything is built.
ensure_system_packages() {
  local missing=() pkg when provides
  while read -r pkg when provides _; do
    system_package_present "$pkg" "$provides" || missing+=("$pkg")
  done < <(system_package_rows)
  [ ${#missing[@]} -eq 0 ] && return 0
  local list=${SYSTEM_PACKAGES_FILE#"$BERTH_ROOT"/}
  command -v apt-get >/dev/null || die "missing system packages: ${missing[*]} ($list says what needs each); this machine has no apt-get: install them by hand"
  [ "$(id -u)" = 0 ] || die "missing system packages: ${missing[*]} ($list says what needs each): run this once as root, or install them with apt-get"
  log "installing from Debian: ${missing[*]} ($list says what needs each)"
  apt-get update -qq >/dev/null || die "apt-get update failed"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null || die "apt-get install ${missing[*]} failed"
}

# Stops with the package to install when a command (or pc:MODULE) that a step needs is missing.
need_system() { # command | pc:MODULE
  local pkg; pkg=$(system_package_of "$1")
  [ -n "$pkg" ] || die "no package of ${SYSTEM_PACKAGES_FILE#"$BERTH_ROOT"/} provides $1: add it there"
  system_tool_present "$1" || die "$1 is missing: it comes from the Debian package $pkg, which ./hack/test and ./hack/up install (or: apt-get install $pkg)"
}
