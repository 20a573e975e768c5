#!/usr/bin/env bash
# Builds kvd and kvbench, runs the benchmark suite against local clusters
# that kvbench starts and stops itself, and writes bench/results/:
# results.md (tables), results.csv, baselines.csv, results.json and plots.
#
# usage: bench/bench.sh          (make bench: the full sweep, ~10 min)
#        QUICK=1 bench/bench.sh  (make bench-quick: a small sweep, ~2.75 min;
#                                 ~5.5 min with BENCH_RDMA=1)
#
# Environment:
#   QUICK=1          small sweep, short points
#   BIN=bin          where binaries are built
#   OUT=bench/results
#   BENCH_NODES=3    cluster size for the host runs
#   BENCH_RDMA=1     also run the RDMA series inside the Soft-RoCE VM
#                    (scripts/rdmavm; needs root, qemu, and time: TCG is slow)
#   BENCH_RDMA_CONSOLE=FILE  merge an RDMA VM console log captured earlier
#                    instead of booting the VM
#   KVBENCH_*        any kvbench flag this script does not pass itself,
#                    e.g. KVBENCH_CONNS=8 (flags given here win over env)
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$repo"
BIN=${BIN:-bin}
OUT=${OUT:-bench/results}
NODES=${BENCH_NODES:-3}
QUICK=${QUICK:-0}
[ "$QUICK" = 0 ] && QUICK=

log() { printf 'bench: %s\n' "$*" >&2; }

if [ -n "$QUICK" ]; then
	dur=2s warm=300ms clients=1,4,16,64 sizes=16,256,4KiB,64KiB keys=2000 rates=2000,8000 tlsclients=1,4
else
	dur=5s warm=1s clients=1,2,4,8,16,32,64,128,256 sizes=16,64,256,1KiB,4KiB,16KiB,64KiB keys=10000 rates=2000,8000,20000 tlsclients=1,4,16
fi

log "building into $BIN/"
go build -o "$BIN/" ./cmd/kvd ./cmd/kvctl ./cmd/kvbench

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# kvb runs one kvbench sweep against its own fresh cluster and keeps the
# JSON for the report. A failed sweep still leaves what it measured; the
# script carries on and fails at the end.
failed=()
kvb() {
	local name=$1
	shift
	log "$name"
	"$BIN/kvbench" run --start-cluster "$NODES" --bin "$BIN" --table-mem 256MiB --keys "$keys" \
		--duration "$dur" --warmup "$warm" --json "$work/$name.json" -w none "$@" || failed+=("$name")
}

start=$(date +%s)
# Throughput and latency against concurrency, every mix, one-sided and RPC GETs.
kvb clients --mix 100/0,95/5,50/50,0/100 --consistency linearizable,readindex --clients "$clients"
# Latency against value size, one client: GETs both ways, and PUTs.
kvb values --mix get,put --consistency linearizable,readindex --clients 1 --value-size "$sizes"
# Without the client's location cache every one-sided GET takes 2 round trips.
kvb nocache --series tcp-nocache --client-cache -1 --mix get --consistency linearizable --clients 1,16 --baseline=false
# TLS on (kvbench generates the certificates; clients and peers must show
# theirs): one-sided GETs and PUTs at 256 B, at points the plaintext sweeps
# above also ran, so the report's "TLS cost" table sets them side by side.
kvb tls --series tcp+tls --tls --mix get,put --consistency linearizable --clients "$tlsclients" --baseline=false
# Skewed keys.
kvb zipf --dist zipf --mix 100/0,95/5 --consistency linearizable --clients 1,16 --baseline=false
# Open loop at fixed rates: tail latency without coordinated omission.
kvb open --mode open --rate "$rates" --clients 64 --mix 95/5 --consistency linearizable --baseline=false

shopt -s nullglob
inputs=("$work"/*.json)

# rdma_vm runs bench/rdmavm-step.sh inside the Soft-RoCE VM and keeps the
# console, from which `kvbench report` extracts the marked reports. It is
# the hook for wiring RDMA into `make bench` (BENCH_RDMA=1).
rdma_vm() {
	local vmbin=$work/rdma-bin console=$work/rdma-console.log rc=0
	log "building the RDMA binaries (-tags rdma)"
	go build -tags rdma -o "$vmbin/" ./cmd/kvd ./cmd/kvbench || return 1
	if [ -n "$QUICK" ]; then
		printf 'BENCH_VM_DURATION=1s\nBENCH_VM_SIZES=16,4KiB,64KiB\nBENCH_VM_CLIENTS=1,4\n' >"$work/bench.env"
	else
		: >"$work/bench.env"
	fi
	log "booting the RDMA VM (minutes under TCG); console in $console"
	scripts/rdmavm/run.sh --timeout 2400 --step-timeout 2100 --bin "$vmbin/kvd" --bin "$vmbin/kvbench" \
		--file "$work/bench.env:/kvd/bench.env" bench/rdmavm-step.sh >"$console" || rc=$?
	[ $rc -eq 0 ] || log "RDMA VM run failed (rc $rc); reporting whatever it printed"
	add_console "$console"
}

# add_console merges a VM console log if it holds at least one report.
add_console() {
	if grep -q KVBENCH-REPORT-END "$1" 2>/dev/null; then
		inputs+=("$1")
	else
		log "no kvbench report in $1; RDMA series left out"
	fi
}

if [ -n "${BENCH_RDMA_CONSOLE:-}" ]; then
	add_console "$BENCH_RDMA_CONSOLE"
elif [ "${BENCH_RDMA:-0}" = 1 ]; then
	rdma_vm || log "RDMA part skipped"
fi

[ ${#inputs[@]} -gt 0 ] || { log "no results"; exit 1; }
mkdir -p "$OUT"
"$BIN/kvbench" report --out "$OUT" -w table "${inputs[@]}"
log "done in $(($(date +%s) - start))s; see $OUT/results.md"
if [ ${#failed[@]} -gt 0 ]; then
	log "these sweeps failed (their partial results are included): ${failed[*]}"
	exit 1
fi
