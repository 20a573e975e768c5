#!/bin/sh
# The revision fault test over RDMA (internal/chaos/revision_test.go):
# clients PUT, range-delete, run version-guarded transactions, GET with
# metadata one-sided, scan at the latest and at past revisions and compact
# while the leader is SIGKILLed, then SIGSTOPped (no partition: the fault
# endpoint cuts TCP peers only); porcupine checks the history against one
# store with revisions.
export KVD_TEST_BIN=/kvd/bin KVD_RDMA_HOST="$RDMAVM_ADDR" KVD_RDMA_DEVICE="$RDMAVM_DEV"
exec gotest chaos-rdma.test -test.count=1 -test.timeout=300s -test.v -test.run '^TestRDMARevisionsUnderFaults$'
