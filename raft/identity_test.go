package raft

import (
	"errors"
	"fmt"
	"maps"
	"strings"
	"testing"
)

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
		return Open(withKV(cfg, nil))
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

// TestJoinRefusesOwnCluster: a data directory that created a cluster of its
// own is refused Join, naming its cluster and both ways out (checkJoinTarget);
// started anyway it would keep its own cluster and refuse, for as long as it
// ran, the members it was told to join. Without Join it restarts as it is.
func TestJoinRefusesOwnCluster(t *testing.T) {
	c := newCluster(t, 1, testConfig())
	c.put("k", "v")
	want := c.nodes[1].node.ClusterID()
	c.stop(1)
	tn := c.nodes[1]
	open := func(join bool, members map[uint64]string) (*Node, error) {
		cfg := c.base
		cfg.ID, cfg.DataDir, cfg.Addr, cfg.Join, cfg.InitialCluster = 1, tn.dir, tn.addr, join, members
		cfg.Transport = c.net.transport(t, tn.name)
		t.Cleanup(func() { cfg.Transport.Close() })
		return Open(withKV(cfg, nil))
	}
	for name, members := range map[string]map[uint64]string{
		"another cluster's members": {1: tn.addr, 5: "elsewhere:1"},
		"no member named":           nil,
	} {
		t.Run(name, func(t *testing.T) {
			n, err := open(true, members)
			if err == nil {
				n.Close()
				t.Fatal("joined another cluster with the data of its own")
			}
			if !errors.Is(err, ErrClusterMismatch) || !strings.Contains(err.Error(), hex16(want)) ||
				!strings.Contains(err.Error(), "rm -rf "+tn.dir) || !strings.Contains(err.Error(), "drop --join") {
				t.Fatalf("err = %v; want ErrClusterMismatch naming cluster %s, rm -rf and drop --join", err, hex16(want))
			}
			t.Log(err)
		})
	}
	n, err := open(false, map[uint64]string{1: tn.addr})
	if err != nil {
		t.Fatalf("restart without Join refused: %v", err)
	}
	n.Close()
}
