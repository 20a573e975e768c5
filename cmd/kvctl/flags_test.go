package main

import (
	"io"
	"strings"
	"testing"
)

// TestLeaseDriftFlag: kvctl judges a leader's lease by the drift the
// servers were given; a value it cannot use is a usage error (exit 2).
func TestLeaseDriftFlag(t *testing.T) {
	o, _, err := parse([]string{"--lease-drift", "0.3", "get", "k"}, io.Discard)
	if err != nil || o.leaseDrift != 0.3 {
		t.Fatalf("--lease-drift 0.3: drift %v, err %v", o.leaseDrift, err)
	}
	t.Setenv("KVCTL_LEASE_DRIFT", "0.25")
	if o, _, err := parse([]string{"get", "k"}, io.Discard); err != nil || o.leaseDrift != 0.25 {
		t.Fatalf("KVCTL_LEASE_DRIFT=0.25: drift %v, err %v", o.leaseDrift, err)
	}
	for _, bad := range [][]string{
		{"--lease-drift", "0"}, {"--lease-drift", "0.6"}, {"--lease-drift", "-1"}, {"--lease-drift", "NaN"},
		{"--timeout", "0"}, {"--timeout", "-1s"},
	} {
		_, errOut, code := kvctlAt("127.0.0.1:1", "", append(bad, "get", "k")...)
		if code != 2 || !strings.Contains(errOut, bad[0]) {
			t.Errorf("kvctl %v get k: exit %d, stderr %q; want a usage error naming %s", bad, code, errOut, bad[0])
		}
	}
}
