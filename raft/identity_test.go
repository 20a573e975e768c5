package raft

import (
	"errors"
	"fmt"
	"maps"
	"strings"
	"testing"
)

// TestClusterIDFor checks the derivation every initial member does on its
// own: the same from the same token and members whatever the map order,
// different if anything differs, never 0.
func TestClusterIDFor(t *testing.T) {
	peers := map[uint64]string{1: "10.0.0.1:7301", 2: "10.0.0.2:7301", 3: "10.0.0.3:7301"}
	base := clusterIDFor("tok", peers)
	if base == 0 {
		t.Fatal("cluster id 0")
	}
	for range 20 { // map iteration order varies from call to call
		if id := clusterIDFor("tok", maps.Clone(peers)); id != base {
			t.Fatalf("same cluster, id %x then %x", base, id)
		}
	}
	if clusterIDFor("", peers) != clusterIDFor(DefaultClusterToken, peers) {
		t.Fatal("the empty token is not the default one")
	}
	change := func(f func(p map[uint64]string)) map[uint64]string {
		p := maps.Clone(peers)
		f(p)
		return p
	}
	others := map[string]uint64{
		"another token":    clusterIDFor("tok2", peers),
		"another address":  clusterIDFor("tok", change(func(p map[uint64]string) { p[2] = "10.0.0.9:7301" })),
		"another id":       clusterIDFor("tok", change(func(p map[uint64]string) { p[4] = p[3]; delete(p, 3) })),
		"an extra member":  clusterIDFor("tok", change(func(p map[uint64]string) { p[4] = "10.0.0.4:7301" })),
		"a missing member": clusterIDFor("tok", change(func(p map[uint64]string) { delete(p, 3) })),
		// Token and addresses are length-prefixed: no shifting bytes
		// between them gives the same input.
		"token/address boundary": clusterIDFor("tok1", map[uint64]string{1: "0.0.0.1:7301", 2: "10.0.0.2:7301", 3: "10.0.0.3:7301"}),
	}
	for name, id := range others {
		if id == base || id == 0 {
			t.Errorf("%s: cluster id %x (base %x)", name, id, base)
		}
	}
}

// TestRestartWithWrongCluster checks a node refuses to start, with an error
// naming both clusters, when its token or initial members describe another
// cluster than its data, and starts with the right ones or with Join.
func TestRestartWithWrongCluster(t *testing.T) {
	base := testConfig()
	base.InitialClusterToken = "tok"
	c := newCluster(t, 3, base)
	c.put("k", "v")
	want := c.nodes[1].node.ClusterID()
	for _, tn := range c.running() {
		if id := tn.node.ClusterID(); id != want || id == 0 {
			t.Fatalf("node %d has cluster id %x, node 1 %x", tn.id, id, want)
		}
	}
	c.stop(1)
	tn := c.nodes[1]
	open := func(f func(cfg *Config)) (*Node, error) {
		cfg := c.base
		cfg.ID, cfg.DataDir, cfg.Addr = 1, tn.dir, tn.addr
		cfg.Transport = c.net.transport(t, tn.name)
		t.Cleanup(func() { cfg.Transport.Close() })
		cfg.InitialCluster = maps.Clone(c.peers)
		f(&cfg)
		return Open(cfg)
	}
	refused := []struct {
		name string
		f    func(cfg *Config)
	}{
		{"another token", func(cfg *Config) { cfg.InitialClusterToken = "other" }},
		{"the default token", func(cfg *Config) { cfg.InitialClusterToken = "" }},
		{"another address", func(cfg *Config) { cfg.InitialCluster[2] = "elsewhere" }},
		{"an extra member", func(cfg *Config) { cfg.InitialCluster[4] = "node4" }},
		{"a missing member", func(cfg *Config) { delete(cfg.InitialCluster, 3) }},
	}
	for _, tc := range refused {
		t.Run(tc.name, func(t *testing.T) {
			n, err := open(tc.f)
			if err == nil {
				n.Close()
				t.Fatal("started with the data of another cluster")
			}
			if !errors.Is(err, ErrClusterMismatch) || !strings.Contains(err.Error(), "cluster "+hex16(want)) {
				t.Fatalf("err = %v; want ErrClusterMismatch naming cluster %s", err, hex16(want))
			}
			t.Log(err)
		})
	}
	// Another member's id on this member's data: the cluster is right, the
	// member is not (two nodes' directories swapped).
	for _, join := range []bool{false, true} {
		t.Run(fmt.Sprintf("another member's id, join %t", join), func(t *testing.T) {
			n, err := open(func(cfg *Config) { cfg.ID, cfg.Join = 2, join })
			if err == nil {
				n.Close()
				t.Fatal("member 2 started from member 1's data directory")
			}
			if !errors.Is(err, ErrNodeMismatch) || !strings.Contains(err.Error(), "data of member 1") {
				t.Fatalf("err = %v; want ErrNodeMismatch naming member 1", err)
			}
		})
	}
	// Join takes the stored id as it is; so do the original settings.
	for _, f := range []func(cfg *Config){
		func(cfg *Config) { cfg.Join, cfg.InitialClusterToken = true, "ignored when joining" },
		func(*Config) {},
	} {
		n, err := open(f)
		if err != nil {
			t.Fatalf("restart refused: %v", err)
		}
		if id := n.ClusterID(); id != want {
			t.Errorf("restarted with cluster id %x, want %x", id, want)
		}
		if err := n.Close(); err != nil {
			t.Fatal(err)
		}
	}
	c.caughtUp(c.start(1, false))
}

func hex16(id uint64) string { return fmt.Sprintf("%016x", id) }
