#!/bin/sh
# The same tests under the race detector (slower: only the result lines are
# shown, and the output's tail on failure).
exec gotest -q transport-rdma-race.test -test.count=1 -test.timeout=600s ${RDMA_TEST_ARGS:-}
