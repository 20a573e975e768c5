package main

import (
	"io"
	"strings"
	"testing"
	"time"

	buildinfo "github.com/kvd-project/kvd/internal/version"
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
		{"--timeout", "0"}, {"--timeout", "-1s"}, {"--attempt-timeout", "-1s"},
	} {
		_, errOut, code := kvctlAt("127.0.0.1:1", "", append(bad, "get", "k")...)
		if code != 2 || !strings.Contains(errOut, bad[0]) {
			t.Errorf("kvctl %v get k: exit %d, stderr %q; want a usage error naming %s", bad, code, errOut, bad[0])
		}
	}
}

// TestAttemptTimeoutFlag: --attempt-timeout is the client's
// AttemptTimeout; 0 leaves the client's default.
func TestAttemptTimeoutFlag(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want time.Duration
	}{
		{[]string{"get", "k"}, 0},
		{[]string{"--attempt-timeout", "20s", "put", "k", "v"}, 20 * time.Second},
	} {
		o, _, err := parse(tc.args, io.Discard)
		if err != nil || o.attempt != tc.want {
			t.Errorf("kvctl %v: attempt timeout %v, err %v; want %v", tc.args, o.attempt, err, tc.want)
		}
	}
}

// TestFlagErrorOneLine: a flag typo or an unknown command is one line on
// stderr naming it and where the usage is (exit 2), not the whole usage
// and the error twice; -h and help still print the usage (exit 0).
func TestFlagErrorOneLine(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--endpoint", "x", "get", "k"}, "kvctl: flag provided but not defined: -endpoint (see kvctl -h)\n"},
		{[]string{"get", "k", "--prefx"}, "kvctl: flag provided but not defined: -prefx (see kvctl -h)\n"},
		{[]string{"gte", "k"}, "kvctl: unknown command \"gte\" (see kvctl -h)\n"},
	} {
		out, errOut, code := kvctlAt("127.0.0.1:1", "", tc.args...)
		if code != 2 || out != "" || errOut != tc.want {
			t.Errorf("kvctl %v: exit %d, stdout %q, stderr %q; want exit 2 and stderr %q", tc.args, code, out, errOut, tc.want)
		}
	}
	for _, help := range [][]string{{"-h"}, {"help"}} {
		_, errOut, code := kvctlAt("127.0.0.1:1", "", help...)
		if code != 0 || !strings.Contains(errOut, "usage: kvctl") || !strings.Contains(errOut, "-endpoints") {
			t.Errorf("kvctl %v: exit %d, stderr %q; want the usage", help, code, errOut)
		}
	}
}

// TestVersion: kvctl version and kvctl --version print the build's
// version (internal/version) without dialling anything.
func TestVersion(t *testing.T) {
	want := "kvctl version: " + buildinfo.Get().Version + "\n"
	for _, args := range [][]string{{"version"}, {"--version"}} {
		out, errOut, code := kvctlAt("127.0.0.1:1", "", args...)
		if code != 0 || !strings.HasPrefix(out, want) || !strings.Contains(out, "Go Version: ") {
			t.Errorf("kvctl %v: exit %d, stdout %q, stderr %q; want it to start %q", args, code, out, errOut, want)
		}
	}
}
