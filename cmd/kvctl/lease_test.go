package main

import (
	"cmp"
	"encoding/json"
	"slices"
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
	// A PUT with a lease is a transaction inside; the operator ran a put.
	if _, errOut, code := kvctlAt(ep, "", "put", "--lease", id, "k", "v"); code != 1 ||
		!strings.HasPrefix(errOut, "kvctl: kvd: lease not found: "+id) || strings.Contains(errOut, "txn") {
		t.Fatalf("put --lease with a revoked lease: exit %d, %q; want lease not found naming the lease, and no txn", code, errOut)
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

// TestLeaseList: lease list prints "found N leases" and the IDs, as
// etcdctl does, and -w json {"leases": [{"id": "..."}]}, IDs that lease
// ttl takes.
func TestLeaseList(t *testing.T) {
	ep := startNode(t)
	if got := mustKvctl(t, ep, "lease", "list"); got != "found 0 leases\n" {
		t.Fatalf("lease list with none: %q", got)
	}
	a := strings.TrimSpace(mustKvctl(t, ep, "lease", "grant", "30"))
	b := strings.TrimSpace(mustKvctl(t, ep, "lease", "grant", "30"))
	ids := []string{a, b}
	slices.SortFunc(ids, func(x, y string) int { // numerically
		return cmp.Compare(len(x), len(y))*2 + strings.Compare(x, y)
	})
	if got, want := mustKvctl(t, ep, "lease", "list"), "found 2 leases\n"+ids[0]+"\n"+ids[1]+"\n"; got != want {
		t.Fatalf("lease list: %q, want %q", got, want)
	}
	var js struct{ Leases []struct{ ID string } }
	if err := json.Unmarshal([]byte(mustKvctl(t, ep, "-w", "json", "lease", "list")), &js); err != nil || len(js.Leases) != 2 {
		t.Fatalf("-w json lease list: %+v, %v", js, err)
	}
	for _, l := range js.Leases {
		mustKvctl(t, ep, "lease", "ttl", l.ID)
	}
	if _, _, code := kvctlAt(ep, "", "lease", "list", "x"); code != 2 {
		t.Errorf("lease list x: exit %d, want 2", code)
	}
}
