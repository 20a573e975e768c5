#!/bin/sh
# kvd over RDMA, restart and redial (internal/chaos/rdma_scenarios_test.go,
# TestRDMARestartRedial): a follower, then the leader, SIGKILLed and
# restarted from its data directory while writes and one-sided GETs go on;
# the restarted node's region has a new rkey and generation, and a client
# pinned to it redials and reads every acknowledged write one-sided,
# byte-exact. Prints an RDMAVM-SCENARIO: line.
export KVD_TEST_BIN=/kvd/bin KVD_RDMA_HOST="$RDMAVM_ADDR" KVD_RDMA_DEVICE="$RDMAVM_DEV"
exec gotest chaos-rdma.test -test.count=1 -test.timeout=360s -test.run '^TestRDMARestartRedial$'
