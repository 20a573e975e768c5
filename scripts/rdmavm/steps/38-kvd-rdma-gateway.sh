#!/bin/sh
# The gateway's one-sided GET path over RDMA (internal/chaos/
# rdma_gateway_test.go): a 3-node cluster whose nodes serve etcd's API and
# Redis' protocol, and `kvd gateway` beside it. What a node's front writes
# the gateway reads at once, by one-sided READs (its INFO stats' counts);
# then etcd Get through the gateway against through the leader's and a
# follower's etcd listener, and RESP GET through the gateway against the
# leader's Redis listener, alternating in one run (RDMAVM-GATEWAY: lines,
# with ratios to this run's ib_read_lat). Last, nodes with --rdma-auth-file
# serve their fronts on an rw key (--rdma-auth-client-name).
export KVD_TEST_BIN=/kvd/bin KVD_RDMA_HOST="$RDMAVM_ADDR" KVD_RDMA_DEVICE="$RDMAVM_DEV" KVD_PERF_DIR=/tmp
exec gotest chaos-rdma.test -test.count=1 -test.timeout=300s -test.run '^(TestRDMAGatewayGetsOneSided|TestRDMAFrontsWithAuth)$'
