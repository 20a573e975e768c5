package server_test

import (
	"context"
	"testing"
	"time"

	"github.com/kvd-project/kvd/client"
	"github.com/kvd-project/kvd/internal/kvdtest"
	"github.com/kvd-project/kvd/internal/revision"
	"github.com/kvd-project/kvd/internal/wire"
)

// TestRPCGetWithMeta: a GET RPC with wire.GetMeta answers the key's whole
// revision metadata and the revision it was served at; without it, the
// value and its mod revision, as a client before revisions reads them.
func TestRPCGetWithMeta(t *testing.T) {
	nodes := kvdtest.StartCluster(t, 1, kvdtest.Options{})
	leader := kvdtest.WaitLeader(t, nodes, 10*time.Second)
	c := newClient(t, kvdtest.Endpoints(nodes), client.Linearizable)
	ctx := context.Background()
	for _, v := range []string{"1", "2"} {
		if err := c.Put(ctx, []byte("k"), []byte(v)); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.Put(ctx, []byte("other"), []byte("x")); err != nil {
		t.Fatal(err)
	}
	resp, err := askNode(t, leader.Addr, []byte("k"), wire.Linearizable|wire.GetMeta, 10*time.Second)
	if err != nil || resp.Status != wire.StatusOK {
		t.Fatalf("get with meta: %+v, %v", resp, err)
	}
	m, err := revision.Decode(resp.Value)
	if err != nil || m != (revision.Meta{Create: 1, Mod: 2, Version: 2}) || string(resp.Value[revision.Size:]) != "2" || resp.Version != 3 {
		t.Fatalf("get with meta: %+v (%v), value %q, served at %d; want created 1, mod 2, version 2, value 2, at 3", m, err, resp.Value, resp.Version)
	}
	resp, err = askNode(t, leader.Addr, []byte("k"), wire.Linearizable, 10*time.Second)
	if err != nil || string(resp.Value) != "2" || resp.Version != 2 {
		t.Fatalf("get without meta: %q at %d, %v; want 2 at its mod revision 2", resp.Value, resp.Version, err)
	}
}
