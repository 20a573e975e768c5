#!/bin/sh
# A step for scripts/rdmavm/run.sh (see bench/bench.sh, rdma_vm): benchmarks
# a 3-node kvd cluster inside the Soft-RoCE VM over RDMA and, under the same
# emulation, over TCP, and prints each report as JSON between
# KVBENCH-REPORT-BEGIN and KVBENCH-REPORT-END lines on the console.
# `kvbench report console.log` extracts them.
#
# Per transport: latency against value size at one client (over RDMA with
# perftest's ib_read_lat and ib_send_lat at each size, 1 MiB included, so
# the report sets kvd's GETs and PUTs next to them), throughput against
# clients at 256 B, and issue 11's many-instance point (100k keys, 256 B, 64
# closed-loop clients each with its own client instance, PUT and one-sided
# GET; series vm-rdma-64inst and vm-tcp-64inst).
#
# Under TCG emulation absolute figures mean little; compare series by their
# ratios to the raw perftest / TCP round trips measured alongside.
#
# Tunables come from /kvd/bench.env if the host ships one (--file
# SRC:/kvd/bench.env): BENCH_VM_DURATION, BENCH_VM_SIZES, BENCH_VM_CLIENTS,
# BENCH_VM_KEYS (key space of the sweeps; each preload is PUTs through Raft
# on three emulated nodes, tens per second on a busy host),
# BENCH_VM_NODES, BENCH_VM_PERFTEST_ARGS, BENCH_VM_BASELINE_ITERS (the TCP
# ping-pong's round trips per size), and for the many-instance point
# BENCH_VM_INST_DURATION, BENCH_VM_INST_KEYS, BENCH_VM_INST_CLIENTS.
[ -f /kvd/bench.env ] && . /kvd/bench.env
dur=${BENCH_VM_DURATION:-2s}
sizes=${BENCH_VM_SIZES:-16,256,4KiB,64KiB,1MiB}
clients=${BENCH_VM_CLIENTS:-1,4,16}
nodes=${BENCH_VM_NODES:-3}
keys=${BENCH_VM_KEYS:-1000}
perfargs=${BENCH_VM_PERFTEST_ARGS:--n 1000}
biters=${BENCH_VM_BASELINE_ITERS:-2000}
idur=${BENCH_VM_INST_DURATION:-$dur}
ikeys=${BENCH_VM_INST_KEYS:-100000}
iclients=${BENCH_VM_INST_CLIENTS:-64}
dev=${RDMAVM_DEV:-rxe0}
addr=${RDMAVM_ADDR:-10.77.0.1}

# Inline records' grace period 1s, not kvd's 100ms: a GET resting on
# arena bytes must finish within half of it, and under TCG with 64 client
# instances GETs queue for longer than 50ms (they would retry, then fall
# back to RPC). On hardware 100ms is ample.
# 192 MiB tables: a quarter (the preload cap) holds the 100k keys of 256 B
# and 1 MiB values can be written; the VM has memory for three of them.
bench() {
	kvbench run --start-cluster "$nodes" --bin /kvd/bin --table-mem 192MiB --table-inline "${BENCH_VM_TABLE_INLINE:-0}" --table-inline-grace "${BENCH_VM_TABLE_INLINE_GRACE:-1s}" --keys "$keys" \
		--ready-timeout 120s --dial-timeout 30s --attempt-timeout 60s --request-timeout 60s --duration "$dur" --warmup 300ms --idle 500ms --quiet -w marked "$@"
}

# many: the many-instance point (every client its own client instance).
many() {
	bench --keys "$ikeys" --conns "$iclients" --clients "$iclients" --duration "$idur" --value-size 256 \
		--mix put,get --consistency linearizable --baseline=false "$@"
}

step() {
	echo "rdmavm-bench: $* ($(date +%T))"
}

rc=0
step "vm-rdma: latency against value size, with perftest at $sizes"
bench --transport rdma --host "$addr" --series vm-rdma --baseline=false --rdma-device "$dev" --rdma-addr "$addr" \
	--perftest-args "$perfargs" --mix get,put --consistency linearizable,readindex --clients 1 --value-size "$sizes" || rc=1
step "vm-rdma: throughput against clients ($clients)"
bench --transport rdma --host "$addr" --series vm-rdma --baseline=false \
	--mix get,95/5,put --consistency linearizable,readindex --clients "$clients" || rc=1
step "vm-rdma-64inst: $iclients client instances, $ikeys keys"
many --transport rdma --host "$addr" --series vm-rdma-64inst || rc=1
# TCP in the same VM, with its own loopback baseline.
step "vm-tcp: latency against value size"
bench --transport tcp --series vm-tcp --baseline-iters "$biters" \
	--mix get,put --consistency linearizable,readindex --clients 1 --value-size "$sizes" || rc=1
step "vm-tcp: throughput against clients ($clients)"
bench --transport tcp --series vm-tcp --baseline=false \
	--mix get,95/5,put --consistency linearizable,readindex --clients "$clients" || rc=1
step "vm-tcp-64inst: $iclients client instances, $ikeys keys"
many --transport tcp --series vm-tcp-64inst || rc=1
step "done, rc $rc"
exit $rc
