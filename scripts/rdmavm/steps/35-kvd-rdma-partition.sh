#!/bin/sh
# A partition over RDMA (internal/chaos/rdma_partition_test.go): three kvd
# nodes in the test process, each on its own rdma transport wrapped so that
# the leader's Raft traffic to and from its peers can be cut (kvd's fault
# endpoint can only cut tcp peers); linearizable one-sided GETs and PUTs,
# two clients pinned to the isolated leader; a new leader elected and new
# values written through it; heal; the old leader catches up; the history
# is checked with porcupine. Prints RDMAVM-PARTITION: lines.
export KVD_TEST_BIN=/kvd/bin KVD_RDMA_HOST="$RDMAVM_ADDR" KVD_RDMA_DEVICE="$RDMAVM_DEV"
exec gotest chaos-rdma.test -test.count=1 -test.timeout=300s -test.run '^TestRDMAPartitionLinearizable$'
