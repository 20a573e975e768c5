package client_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/kvd-project/kvd/client"
	"github.com/kvd-project/kvd/internal/kvdtest"
)

// TestUnsentWriteIsNotApplied: a write that never reached any node fails
// with ErrUnavailable and ErrNotApplied (safe to retry), and the error names
// the node it last tried; a write that reached a node is never reported as
// not applied (see TestWriteFailures for the maybe-applied cases).
func TestUnsentWriteIsNotApplied(t *testing.T) {
	dead := kvdtest.FreeAddrs(t, 1)[0] // nothing listens there
	c, err := client.New(client.Config{Endpoints: []string{dead}, DialTimeout: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	err = c.Put(ctx, []byte("k"), []byte("v"))
	if !errors.Is(err, client.ErrUnavailable) || !errors.Is(err, client.ErrNotApplied) {
		t.Fatalf("put to a dead endpoint: %v; want ErrUnavailable and ErrNotApplied", err)
	}
	if !strings.Contains(err.Error(), dead) {
		t.Fatalf("error %q does not name the node %s", err, dead)
	}
}
