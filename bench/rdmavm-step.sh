#!/bin/sh
# A step for scripts/rdmavm/run.sh (see bench/bench.sh, rdma_vm): benchmarks
# kvd inside the Soft-RoCE VM over RDMA and, under the same emulation, over
# TCP, and prints each report as JSON between KVBENCH-REPORT-BEGIN and
# KVBENCH-REPORT-END lines on the console. `kvbench report console.log`
# extracts them.
#
# Under TCG emulation absolute figures mean little; compare series by their
# ratios to the raw perftest / TCP round trips measured alongside.
#
# Tunables come from /kvd/bench.env if the host ships one (--file
# SRC:/kvd/bench.env): BENCH_VM_DURATION, BENCH_VM_SIZES, BENCH_VM_CLIENTS,
# BENCH_VM_NODES.
[ -f /kvd/bench.env ] && . /kvd/bench.env
dur=${BENCH_VM_DURATION:-2s}
sizes=${BENCH_VM_SIZES:-16,256,4KiB,64KiB}
clients=${BENCH_VM_CLIENTS:-1,4,16}
nodes=${BENCH_VM_NODES:-1}
dev=${RDMAVM_DEV:-rxe0}
addr=${RDMAVM_ADDR:-127.1.0.1}

bench() {
	kvbench run --start-cluster "$nodes" --bin /kvd/bin --table-mem 128MiB --keys 1000 \
		--duration "$dur" --warmup 300ms --idle 500ms --quiet -w marked "$@"
}

rc=0
# RDMA: latency against value size (with perftest at each size), then
# throughput against clients.
bench --transport rdma --host "$addr" --series vm-rdma --baseline=false --rdma-device "$dev" --rdma-addr "$addr" \
	--mix get,put --consistency linearizable,readindex --clients 1 --value-size "$sizes" || rc=1
bench --transport rdma --host "$addr" --series vm-rdma --baseline=false \
	--mix get,95/5,put --consistency linearizable,readindex --clients "$clients" || rc=1
# TCP in the same VM, with its own loopback baseline.
bench --transport tcp --series vm-tcp \
	--mix get,put --consistency linearizable,readindex --clients 1 --value-size "$sizes" || rc=1
bench --transport tcp --series vm-tcp --baseline=false \
	--mix get,95/5,put --consistency linearizable,readindex --clients "$clients" || rc=1
exit $rc
