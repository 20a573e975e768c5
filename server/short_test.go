package server_test

import "testing"

// skipShort skips a test of several seconds (a cluster, a fault, a load
// held for a while) under -short: make test-short is the quick loop, and
// make test runs everything.
func skipShort(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("a multi-second cluster test; make test runs it")
	}
}
