#!/usr/bin/env bash
# Starts a local 3-node kvd cluster in the foreground and stops it on Ctrl-C.
# usage: scripts/run-cluster.sh BIN_DIR DATA_DIR
# Environment: KVD_RUN_TRANSPORT (tcp), KVD_RUN_BASE_PORT (7301),
# KVD_RUN_CLUSTER_TOKEN (random, drawn once per DATA_DIR and kept in
# DATA_DIR/cluster-token, since the nodes refuse to restart with another).
set -euo pipefail
bin=${1:-bin}
data=${2:-data}
transport=${KVD_RUN_TRANSPORT:-tcp}
base=${KVD_RUN_BASE_PORT:-7301}

mkdir -p "$data"
if [[ -n ${KVD_RUN_CLUSTER_TOKEN:-} ]]; then
  token=$KVD_RUN_CLUSTER_TOKEN
elif [[ -s $data/cluster-token ]]; then
  token=$(<"$data/cluster-token")
else
  token=kvd-run-$(od -An -N8 -tx8 /dev/urandom | tr -d ' ')
  echo "$token" >"$data/cluster-token"
fi
cluster="1=127.0.0.1:$base,2=127.0.0.1:$((base + 1)),3=127.0.0.1:$((base + 2))"
endpoints="127.0.0.1:$base,127.0.0.1:$((base + 1)),127.0.0.1:$((base + 2))"

pids=()
stop() {
  trap - INT TERM EXIT
  echo
  echo "stopping the cluster..."
  kill "${pids[@]}" 2>/dev/null || true
  wait "${pids[@]}" 2>/dev/null || true
}
trap stop INT TERM EXIT

for id in 1 2 3; do
  mkdir -p "$data/node$id"
  "$bin/kvd" --id "$id" --listen "127.0.0.1:$((base + id - 1))" --initial-cluster "$cluster" \
    --initial-cluster-token "$token" \
    --data-dir "$data/node$id" --transport "$transport" --metrics-listen "127.0.0.1:$((base + 2000 + id - 1))" \
    2> >(sed -u "s/^/[node$id] /" >&2) &
  pids+=($!)
done

for _ in $(seq 1 100); do
  if "$bin/kvctl" --endpoints "$endpoints" --timeout 1s status >/dev/null 2>&1 &&
     "$bin/kvctl" --endpoints "$endpoints" --timeout 2s put kvd-run-probe ok >/dev/null 2>&1; then
    break
  fi
  sleep 0.2
done

cat <<MSG

kvd is running: 3 nodes over $transport, data in $data/.
  endpoints: $endpoints
  metrics:   http://127.0.0.1:$((base + 2000))/metrics (and :$((base + 2001)), :$((base + 2002)))

Try, in another terminal:
  $bin/kvctl --endpoints $endpoints put hello world
  $bin/kvctl --endpoints $endpoints get hello
  $bin/kvctl --endpoints $endpoints status -w table

Press Ctrl-C to stop all three nodes.
MSG
wait "${pids[@]}"
