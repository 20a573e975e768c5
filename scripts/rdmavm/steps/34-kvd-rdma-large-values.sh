#!/bin/sh
# kvd over RDMA: values from 1 B to the 1 MiB limit, at the transport's
# fragment and READ-slot boundaries, PUT by SEND/RECV and read back
# byte-exact (one-sided from every node, linearizable, ReadIndex), a value
# over the limit refused, concurrent 1 MiB PUTs and GETs
# (internal/chaos/rdma_scenarios_test.go, TestRDMALargeValues). Prints an
# RDMAVM-SCENARIO: line.
export KVD_TEST_BIN=/kvd/bin KVD_RDMA_HOST="$RDMAVM_ADDR" KVD_RDMA_DEVICE="$RDMAVM_DEV"
exec gotest chaos-rdma.test -test.count=1 -test.timeout=380s -test.run '^TestRDMALargeValues$'
