# What Berth installed by ./hack/up (hack/lib/up-helm.sh) needs from a cluster with the real node,
# sourced by hack/cluster after hack/lib/realnode.sh (PORT_BASE, NODE_IP, NODE_DIR).
#
# ServiceAccount tokens in pods: the API server's ServiceAccount admission plugin (which mounts
# each pod's token, CA and namespace at /var/run/secrets/kubernetes.io/serviceaccount) runs when
# the real node does; Berth's pods talk to the API server with those tokens. The kwok-only plane
# keeps it off, as before (its pods never run).
#
# Two forwards on the node's bridge (hack/lib/netbridge.ts):
#   postgres  pods -> host: $NODE_IP:$UP_PG_PORT inside the node's namespace forwards to
#             hack/postgres.ts on 127.0.0.1:$UP_PG_PORT (the Service postgres.berth-system that
#             hack/up creates has this address as its endpoint)
#   api       host -> the API: 127.0.0.1:$UP_API_PORT forwards to $UP_API_CLUSTER_IP:80, the
#             fixed cluster IP of the Service berth-api-local (hack/up creates it in front of the
#             chart's API pods), so BERTH_API_URL is a plain URL on the host's loopback
#
# The ports are fixed when the node's bridge starts: PostgreSQL's is BERTH_PG_PORT (default 26432,
# as hack/postgres.ts), the API's BERTH_API_PORT (default the cluster's port base + 90).
UP_PG_PORT="${BERTH_PG_PORT:-26432}"
UP_API_PORT="${BERTH_API_PORT:-$((PORT_BASE + 90))}"
# In the lower, statically assigned band of the service range (dynamic allocation avoids it).
UP_API_CLUSTER_IP=10.96.0.90

# Adds the two forwards to the bridge's config file (called by node_bridge_config).
up_bridge_forwards() { # netbridge.json
  node -e '
    const fs = require("node:fs");
    const [file, nodeIp, pgPort, apiPort, apiIp] = process.argv.slice(1);
    const c = JSON.parse(fs.readFileSync(file, "utf8"));
    const add = (list, f) => { c[list] = [...c[list].filter((x) => x.name !== f.name), f]; };
    add("toHost", { name: "postgres", listen: `${nodeIp}:${pgPort}`, target: `127.0.0.1:${pgPort}` });
    add("toNode", { name: "api", listen: `127.0.0.1:${apiPort}`, target: `${apiIp}:80` });
    fs.writeFileSync(file, JSON.stringify(c, null, 2) + "\n");
  ' "$1" "$NODE_IP" "$UP_PG_PORT" "$UP_API_PORT" "$UP_API_CLUSTER_IP"
}

# The API server's admission flags (hack/cluster's kube-apiserver command line).
cluster_admission_flags() {
  node_enabled || echo "--disable-admission-plugins ServiceAccount"
}

up_forwards_env() {
  echo "export BERTH_NODE_PG_ADDR=$NODE_IP:$UP_PG_PORT BERTH_API_FORWARD=127.0.0.1:$UP_API_PORT BERTH_API_CLUSTER_IP=$UP_API_CLUSTER_IP"
}
