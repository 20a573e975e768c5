package main

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestEtcdCmdNamesWhatIsMissing: without a binary it needs, kvbench etcd
// fails as a usage error that says how to get it, before starting
// anything.
func TestEtcdCmdNamesWhatIsMissing(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		have []string
		want string
	}{
		{nil, "no kvd"},
		{[]string{"kvd"}, "no etcd "},
		{[]string{"kvd", "etcd"}, "scripts/etcd-benchmark.sh"},
	} {
		bin := t.TempDir()
		for _, name := range tc.have {
			if err := os.WriteFile(filepath.Join(bin, name), []byte("#!/bin/sh\nexit 1\n"), 0o755); err != nil {
				t.Fatal(err)
			}
		}
		err := etcdCmd(context.Background(), []string{"--bin", bin, "--out", t.TempDir()})
		if !errors.As(err, new(usageError)) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("with %v: %v, want a usage error naming %q", tc.have, err, tc.want)
		}
	}
	if err := etcdCmd(context.Background(), []string{"--clients", "1,0"}); !errors.As(err, new(usageError)) {
		t.Errorf("--clients 1,0: %v, want a usage error", err)
	}
}
