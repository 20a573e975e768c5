#!/usr/bin/env bash
# Starts a local 3-node kvd cluster in the foreground and stops it on Ctrl-C.
# usage: scripts/run-cluster.sh BIN_DIR DATA_DIR
# Environment: KVD_RUN_TRANSPORT (tcp), KVD_RUN_BASE_PORT (7301),
# KVD_RUN_METRICS_PORT (the base port + 2000), KVD_RUN_CLUSTER_TOKEN (random, drawn once per DATA_DIR and kept
# in DATA_DIR/cluster-token, since the nodes refuse to restart with another),
# KVD_RUN_LOG_LEVEL (info; debug shows raft's internals too), KVD_RUN_REDIS_PORT
# (6379: node 1 serves the Redis protocol there, nodes 2 and 3 on the next two
# ports; off: none), KVD_RUN_ETCD_PORTS (2379,22379,32379: where the nodes
# serve etcd's v3 API, for etcdctl; as etcd's own local clusters number them).
set -euo pipefail
bin=${1:-bin}
data=${2:-data}
transport=${KVD_RUN_TRANSPORT:-tcp}
base=${KVD_RUN_BASE_PORT:-7301}
mbase=${KVD_RUN_METRICS_PORT:-$((base + 2000))}
level=${KVD_RUN_LOG_LEVEL:-info}
rbase=${KVD_RUN_REDIS_PORT:-6379}
IFS=, read -r -a etcd_ports <<<"${KVD_RUN_ETCD_PORTS:-2379,22379,32379}"
if ((${#etcd_ports[@]} != 3)); then
  echo "KVD_RUN_ETCD_PORTS: want three ports, one per node" >&2
  exit 2
fi

mkdir -p "$data"
if [[ -n ${KVD_RUN_CLUSTER_TOKEN:-} ]]; then
  token=$KVD_RUN_CLUSTER_TOKEN
elif [[ -s $data/cluster-token ]]; then
  token=$(<"$data/cluster-token")
else
  token=kvd-run-$(od -An -N8 -tx8 /dev/urandom | tr -d ' ')
  echo "$token" >"$data/cluster-token"
fi
# KVD_RUN_* are this script's settings, not kvd's: kvd takes every KVD_*
# variable for a flag of its own and warns of the ones that name none.
for v in $(compgen -e); do
  if [[ $v == KVD_RUN_* ]]; then unset "$v"; fi
done

cluster="1=127.0.0.1:$base,2=127.0.0.1:$((base + 1)),3=127.0.0.1:$((base + 2))"
endpoints="127.0.0.1:$base,127.0.0.1:$((base + 1)),127.0.0.1:$((base + 2))"
etcd_endpoints="127.0.0.1:${etcd_ports[0]},127.0.0.1:${etcd_ports[1]},127.0.0.1:${etcd_ports[2]}"

pids=()
stopped=0
stop() {
  [[ $stopped == 1 ]] && return
  stopped=1
  echo
  echo "stopping the cluster..."
  kill -TERM "${pids[@]}" 2>/dev/null || true
  wait "${pids[@]}" 2>/dev/null || true
  echo "stopped; data kept in $data/ (make clean removes it)"
}
# Ctrl-C is how the cluster is meant to end: stop the nodes, exit 0 (make
# would otherwise report "Error 130").
trap 'stop; exit 0' INT TERM
trap stop EXIT

for id in 1 2 3; do
  mkdir -p "$data/node$id"
  redis=()
  if [[ $rbase != off ]]; then redis=(--redis-listen "127.0.0.1:$((rbase + id - 1))"); fi
  # setsid: Ctrl-C reaches the script only, which stops the nodes in
  # order, instead of every node at once with the terminal's SIGINT.
  setsid "$bin/kvd" --id "$id" --listen "127.0.0.1:$((base + id - 1))" --initial-cluster "$cluster" \
    --initial-cluster-token "$token" --log-level "$level" \
    --data-dir "$data/node$id" --transport "$transport" --metrics-listen "127.0.0.1:$((mbase + id - 1))" "${redis[@]}" \
    --listen-client-urls "http://127.0.0.1:${etcd_ports[id - 1]}" \
    2> >(trap '' INT; sed -u "s/^/[node$id] /" >&2) &
  pids+=($!)
done

ready=0
for _ in $(seq 1 100); do
  if "$bin/kvctl" --endpoints "$endpoints" --timeout 1s status >/dev/null 2>&1 &&
     "$bin/kvctl" --endpoints "$endpoints" --timeout 2s put kvd-run-probe ok >/dev/null 2>&1; then
    ready=1
    break
  fi
  sleep 0.2
done
if [[ $ready == 0 ]]; then
  echo "kvd: the cluster did not become ready; see the nodes' lines above" >&2
fi

cat <<MSG

kvd $("$bin/kvd" --version | sed -n 's/^kvd Version: //p') is running: 3 nodes over $transport, data in $data/.
  endpoints: $endpoints
  metrics:   http://127.0.0.1:$mbase/metrics (and :$((mbase + 1)), :$((mbase + 2))); /healthz, /version
  etcd API:  $etcd_endpoints (etcd's v3 gRPC API, for etcdctl and etcd clients)
MSG
if [[ $rbase != off ]]; then
  echo "  redis:     127.0.0.1:$rbase (and :$((rbase + 1)), :$((rbase + 2))); redis-cli -p $rbase set a b && redis-cli -p $rbase get a"
fi
cat <<MSG

Try, in another terminal:
  $bin/kvctl --endpoints $endpoints put hello world
  $bin/kvctl --endpoints $endpoints get hello
  $bin/kvctl --endpoints $endpoints status -w table
  etcdctl --endpoints=127.0.0.1:${etcd_ports[0]} put a b
  etcdctl --endpoints=$etcd_endpoints get a

Press Ctrl-C to stop all three nodes (or: kill -INT $$).
MSG
wait "${pids[@]}"
