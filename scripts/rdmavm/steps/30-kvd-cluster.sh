#!/bin/sh
# kvd end to end over RDMA: a 3-node cluster (Raft over RC queue pairs), a
# client doing PUTs by SEND/RECV and GETs by one-sided READ, a SIGKILL of the
# leader; compare-and-swap and transactions raced by one-sided readers (no
# reader sees half a transaction, atomic multi-key snapshots whole, a watch
# replay); TTL leases and a backup stream; then the latency probe, as ratios
# to this run's perftest figures.
export KVD_TEST_BIN=/kvd/bin KVD_RDMA_HOST="$RDMAVM_ADDR" KVD_RDMA_DEVICE="$RDMAVM_DEV" KVD_PERF_DIR=/tmp
exec gotest chaos-rdma.test -test.count=1 -test.timeout=300s -test.run '^(TestRDMACluster|TestRDMACASAndTxn|TestRDMALeaseAndBackup|TestRDMALatencyProbe)$'
