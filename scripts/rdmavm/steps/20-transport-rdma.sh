#!/bin/sh
# The RDMA transport's tests, including the shared conformance suite.
exec gotest transport-rdma.test -test.count=1 -test.timeout=300s ${RDMA_TEST_ARGS:-}
