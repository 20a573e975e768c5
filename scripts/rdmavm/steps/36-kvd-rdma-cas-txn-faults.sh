#!/bin/sh
# The compare-and-swap and transaction fault tests over RDMA: clients mix
# conditional writes, multi-key transactions, GetManyAtomic, prefix scans
# and one-sided GETs while the leader is SIGKILLed, partitioned away and
# frozen (no partition: the fault endpoint cuts TCP peers only); porcupine checks each history (the transactions' against one key
# space).
export KVD_TEST_BIN=/kvd/bin KVD_RDMA_HOST="$RDMAVM_ADDR" KVD_RDMA_DEVICE="$RDMAVM_DEV"
exec gotest chaos-rdma.test -test.count=1 -test.timeout=300s -test.v -test.run '^(TestRDMACASUnderFaults|TestRDMATxnUnderFaults)$'
