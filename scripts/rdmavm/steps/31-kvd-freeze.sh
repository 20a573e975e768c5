#!/bin/sh
# Linearizable one-sided GETs while the leader is frozen: a 3-node cluster
# over RDMA, clients doing GETs (one-sided READs) and PUTs, the leader
# stopped with SIGSTOP (its NIC keeps answering READs of its region), a new
# leader elected and new values written through it, SIGCONT; the history is
# checked with porcupine. Prints RDMAVM-FREEZE: lines (verdict, timeline,
# any stale reads).
export KVD_TEST_BIN=/kvd/bin KVD_RDMA_HOST="$RDMAVM_ADDR" KVD_RDMA_DEVICE="$RDMAVM_DEV"
exec gotest chaos-rdma.test -test.count=1 -test.timeout=240s -test.run '^TestRDMAFreezeLinearizable$'
