#!/bin/sh
# kvd over RDMA, snapshot install (internal/chaos/rdma_scenarios_test.go,
# TestRDMASnapshotInstall): a follower stopped while the leader (with
# --snapshot-count 64) compacts its log past it, then restarted: it must
# install a snapshot (over 1 MiB, several chunks) streamed over the RDMA
# peer transport, and serve every key one-sided, byte-exact. Prints an
# RDMAVM-SCENARIO: line.
export KVD_TEST_BIN=/kvd/bin KVD_RDMA_HOST="$RDMAVM_ADDR" KVD_RDMA_DEVICE="$RDMAVM_DEV"
exec gotest chaos-rdma.test -test.count=1 -test.timeout=360s -test.run '^TestRDMASnapshotInstall$'
