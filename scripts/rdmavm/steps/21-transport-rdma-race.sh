#!/bin/sh
# The same tests under the race detector (slower: only failures are shown
# in full).
out=$TMPDIR/transport-rdma-race.out
transport-rdma-race.test -test.count=1 -test.timeout=300s ${RDMA_TEST_ARGS:-} >"$out" 2>&1
rc=$?
grep -E -- '^(--- |ok|PASS|FAIL)|DATA RACE' "$out"
[ $rc -eq 0 ] || tail -n 150 "$out"
exit $rc
