package cluster

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestValidate(t *testing.T) {
	for _, tc := range []struct {
		cfg Config
		ok  bool
	}{
		{Config{}, false}, {Config{Bin: "b"}, true}, {Config{Bin: "b", Nodes: 10}, false}, {Config{Bin: "b", Nodes: -1}, false},
	} {
		c := tc.cfg
		err := c.Validate()
		if (err == nil) != tc.ok || (err != nil && !errors.Is(err, ErrConfig)) {
			t.Errorf("Validate(%+v) = %v", tc.cfg, err)
		}
		if err == nil && (c.Nodes != 3 || c.Transport != "tcp" || c.Host != "127.0.0.1" || c.ReadyTimeout != DefaultReadyTimeout) {
			t.Errorf("defaults: %+v", c)
		}
	}
}

func TestTail(t *testing.T) {
	tl := &tail{max: 8}
	for _, s := range []string{"hello ", "world", "!"} {
		if n, err := tl.Write([]byte(s)); n != len(s) || err != nil {
			t.Fatal(n, err)
		}
	}
	if got := tl.String(); got != "o world!"[len("o world!")-8:] {
		t.Errorf("tail = %q", got)
	}
}

// TestNodeExits: a "kvd" that dies at once makes Start fail fast with its
// output, and leaves no temporary directory behind.
func TestNodeExits(t *testing.T) {
	bin := t.TempDir()
	script := "#!/bin/sh\necho \"kvd: cannot start: $*\" >&2\nexit 3\n"
	if err := os.WriteFile(filepath.Join(bin, "kvd"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	data := t.TempDir()
	_, err := Start(context.Background(), Config{Bin: bin, Nodes: 2, Dir: data, TableMem: "1MiB", ReadyTimeout: 20 * time.Second})
	if !errors.Is(err, ErrNotReady) || !strings.Contains(err.Error(), "cannot start") || !strings.Contains(err.Error(), "--table-mem 1MiB") {
		t.Fatalf("Start = %v", err)
	}
	if _, err := Start(context.Background(), Config{Bin: t.TempDir()}); !errors.Is(err, ErrConfig) {
		t.Errorf("Start without a kvd binary = %v", err)
	}
}

// TestExited: a node that dies after the cluster is up is reported with its
// output.
func TestExited(t *testing.T) {
	bin := t.TempDir()
	if err := os.WriteFile(filepath.Join(bin, "kvd"), []byte("#!/bin/sh\necho bye\nexit 1\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	n, err := startNode(filepath.Join(bin, "kvd"), nil)
	if err != nil {
		t.Fatal(err)
	}
	<-n.done
	c := &Cluster{nodes: []*node{n}}
	if got := c.Exited(); !strings.Contains(got, "node 1") || !strings.Contains(got, "bye") {
		t.Errorf("Exited = %q", got)
	}
}
