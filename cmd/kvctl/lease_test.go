package main

import (
	"strings"
	"testing"
)

// TestLeaseCommands: lease grant prints an id that put --lease, lease ttl,
// lease revoke take; revoking deletes the key; misuse is a usage error
// (exit 2) and an unknown lease exit 1 with the client's message.
func TestLeaseCommands(t *testing.T) {
	ep := startNode(t)
	must := func(args ...string) string { t.Helper(); return mustKvctl(t, ep, args...) }
	id := strings.TrimSpace(must("lease", "grant", "30s"))
	if got := must("put", "--lease", id, "svc/a", "addr"); got != "OK\n" {
		t.Fatalf("put --lease: %q", got)
	}
	if got := must("lease", "ttl", id); !strings.Contains(got, "granted TTL 30s") || !strings.HasSuffix(got, "1 keys\n") {
		t.Fatalf("lease ttl: %q", got)
	}
	txn := "missing(\"svc/b\")\n\nput svc/b addr --lease " + id + "\n"
	if out, errOut, code := kvctlAt(ep, txn, "txn"); code != 0 || !strings.HasPrefix(out, "SUCCESS") {
		t.Fatalf("txn with a lease put: exit %d, %q, %q", code, out, errOut)
	}
	if got := must("lease", "revoke", id); got != "OK\n" {
		t.Fatalf("lease revoke: %q", got)
	}
	for _, k := range []string{"svc/a", "svc/b"} {
		if _, _, code := kvctlAt(ep, "", "get", k); code != 1 {
			t.Fatalf("get %s after revoke: exit %d, want 1 (deleted)", k, code)
		}
	}
	if _, errOut, code := kvctlAt(ep, "", "lease", "keepalive", id); code != 1 || !strings.Contains(errOut, "lease not found") {
		t.Fatalf("keepalive of a revoked lease: exit %d, %q", code, errOut)
	}
	if _, errOut, code := kvctlAt(ep, "", "put", "--lease", id, "k", "v"); code != 1 || !strings.Contains(errOut, "kvd: lease not found") {
		t.Fatalf("put --lease with a revoked lease: exit %d, %q", code, errOut)
	}
	for _, args := range [][]string{
		{"lease", "grant", "ten"},
		{"lease", "revoke", "x"},
		{"lease", "grant"},
		{"get", "--lease", id, "k"},
	} {
		if _, _, code := kvctlAt(ep, "", args...); code != 2 {
			t.Errorf("kvctl %v: exit %d, want 2", args, code)
		}
	}
}
