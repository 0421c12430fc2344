# What Berth installed by ./hack/up (hack/lib/up-helm.sh) needs from a cluster with the real node,
# sourced by hack/cluster after hack/lib/realnode.sh (PORT_BASE, NODE_IP, NODE_DIR).
#
# Two forwards on the node's bridge (hack/lib/netbridge.ts; node_bridge_config writes them):
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

up_forwards_env() {
  echo "export BERTH_NODE_PG_ADDR=$NODE_IP:$UP_PG_PORT BERTH_API_FORWARD=127.0.0.1:$UP_API_PORT BERTH_API_CLUSTER_IP=$UP_API_CLUSTER_IP"
}
