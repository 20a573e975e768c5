package raft

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/kvd-project/kvd/internal/kvdtest/peertest"
	"github.com/kvd-project/kvd/internal/kvdtest/wait"
	"github.com/kvd-project/kvd/internal/revision"
	"github.com/kvd-project/kvd/internal/store"
	"github.com/kvd-project/kvd/raft/peer"
)

func TestRestoreConfigValidate(t *testing.T) {
	ok := RestoreConfig{ID: 1, InitialCluster: map[uint64]string{1: "a:1"}, DataDir: "d", Index: 5}
	if err := ok.Validate(); err != nil {
		t.Fatal(err)
	}
	for name, mut := range map[string]func(*RestoreConfig){
		"not a member":       func(c *RestoreConfig) { c.ID = 2 },
		"no dir":             func(c *RestoreConfig) { c.DataDir = "" },
		"index 0":            func(c *RestoreConfig) { c.Index = 0 },
		"empty addr":         func(c *RestoreConfig) { c.InitialCluster = map[uint64]string{1: ""} },
		"raft log elsewhere": func(c *RestoreConfig) { c.RaftLog = "files" },
	} {
		c := ok
		mut(&c)
		if err := c.Validate(); !errors.Is(err, ErrConfig) {
			t.Errorf("%s: %v, want ErrConfig", name, err)
		}
	}
}

// TestRestoreWritesTheNodesRaftLogMode: Restore writes the directory with
// its raft log where the node will keep it, so that the node opens it in
// either mode (a directory in the "wal" mode refuses "pebble").
func TestRestoreWritesTheNodesRaftLogMode(t *testing.T) {
	for _, mode := range []string{store.RaftLogPebble, store.RaftLogWAL} {
		dir := t.TempDir()
		cfg := RestoreConfig{ID: 1, InitialCluster: map[uint64]string{1: "a:1"}, DataDir: dir, Index: 5, Revision: 5,
			Logger: peertest.Logger(), RaftLog: mode, WALSegmentSize: testWALSegmentSize}
		if err := Restore(cfg, func(add func(key, value []byte, m revision.Meta) error) error {
			return add([]byte("k"), []byte("v"), revision.Meta{Create: 5, Mod: 5, Version: 1})
		}); err != nil {
			t.Fatalf("restore with the raft log in %s: %v", mode, err)
		}
		st, err := store.Open(dir, store.Options{RaftLog: mode, WALSegmentSize: testWALSegmentSize})
		if err != nil {
			t.Fatalf("open a directory restored for %s in %s: %v", mode, mode, err)
		}
		if got := st.RaftLog(); got != mode {
			t.Errorf("restored for %s, the directory keeps its raft log in %s", mode, got)
		}
		if err := st.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestRestoreRefusesUsedDir: Restore never writes into a directory that
// holds anything, and a fill that fails leaves the directory empty.
func TestRestoreRefusesUsedDir(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "x"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := RestoreConfig{ID: 1, InitialCluster: map[uint64]string{1: "a:1"}, DataDir: dir, Index: 5, Revision: 5, Logger: peertest.Logger()}
	none := func(func(key, value []byte, m revision.Meta) error) error { return nil }
	if err := Restore(cfg, none); !errors.Is(err, ErrNotEmpty) {
		t.Fatalf("used dir: %v, want ErrNotEmpty", err)
	}
	cfg.DataDir = filepath.Join(t.TempDir(), "new")
	boom := errors.New("boom")
	err := Restore(cfg, func(add func(key, value []byte, m revision.Meta) error) error {
		if err := add([]byte("k"), []byte("v"), revision.Meta{Create: 3, Mod: 3, Version: 1}); err != nil {
			return err
		}
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("failing fill: %v", err)
	}
	if ents, _ := os.ReadDir(cfg.DataDir); len(ents) != 0 {
		t.Fatalf("a failed restore left %d entries", len(ents))
	}
	if err := Restore(cfg, none); err != nil {
		t.Fatalf("restore after the failed one: %v", err)
	}
	cfg.FromCluster = peer.ClusterIDFor(cfg.InitialClusterToken, cfg.InitialCluster)
	cfg.DataDir = t.TempDir()
	if err := Restore(cfg, none); !errors.Is(err, ErrSameCluster) {
		t.Fatalf("same cluster id: %v, want ErrSameCluster", err)
	}
}

// TestInterruptedRestoreRefused: a restore that dies half way (killed, a
// power cut) leaves part of the backup and no node state. Started as it
// was, without the backup, such a directory made a new, empty cluster, and
// the peer.Refusal of a second restore into it said to do just that. The marker
// Restore writes first and removes last makes Open and Restore refuse it.
func TestInterruptedRestoreRefused(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "node1")
	cfg := RestoreConfig{ID: 1, InitialCluster: map[uint64]string{1: "a:1"}, DataDir: dir, Index: 5, Revision: 5, Logger: peertest.Logger()}
	var crashImage string // the directory as a crash inside the fill leaves it
	err := Restore(cfg, func(add func(key, value []byte, m revision.Meta) error) error {
		if err := add([]byte("k"), []byte("v"), revision.Meta{Create: 3, Mod: 3, Version: 1}); err != nil {
			return err
		}
		if _, err := os.Stat(filepath.Join(dir, restoreMarker)); err != nil {
			t.Errorf("no restore marker while filling: %v", err)
		}
		crashImage = filepath.Join(t.TempDir(), "crashed")
		return os.CopyFS(crashImage, os.DirFS(dir))
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, restoreMarker)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a complete restore left its marker: %v", err)
	}

	ncfg := testConfig()
	ncfg.ID, ncfg.DataDir, ncfg.Transport, ncfg.InitialCluster = 1, crashImage, newMemNet().endpoint("a:1"), cfg.InitialCluster
	if n, err := Open(withKV(ncfg, nil)); !errors.Is(err, ErrRestoreInterrupted) {
		if err == nil {
			n.Close()
		}
		t.Fatalf("Open of an interrupted restore's directory = %v, want ErrRestoreInterrupted", err)
	}
	cfg.DataDir = crashImage
	if err := Restore(cfg, func(func(key, value []byte, m revision.Meta) error) error { return nil }); !errors.Is(err, ErrRestoreInterrupted) {
		t.Fatalf("Restore into it = %v, want ErrRestoreInterrupted", err)
	}
}

// TestRestoredClusterAtMaxIndexCommits: a cluster restored at any index
// RestoreConfig.Validate (and the backup reader) accept must then work.
// Both accepted up to maxPeerIndex, and at exactly maxPeerIndex it did not: the new leader's first entry is at
// maxPeerIndex+1, which every follower's peer filter drops (checkAppend:
// entries past maxPeerIndex), so a cluster of more than one node elects a
// leader and then commits nothing, ever: every write hangs until its
// deadline.
func TestRestoredClusterAtMaxIndexCommits(t *testing.T) {
	for _, index := range []uint64{100, maxPeerIndex / 2, maxPeerIndex} {
		t.Run(fmt.Sprint(index), func(t *testing.T) {
			probe := RestoreConfig{ID: 1, InitialCluster: map[uint64]string{1: "a:1"}, DataDir: "d", Index: index}
			if err := probe.Validate(); err != nil {
				t.Skipf("Restore refuses index %d: %v", index, err) // refused up front: fine
			}
			base := testConfig()
			base.InitialClusterToken = "restored"
			c := &cluster{t: t, dir: t.TempDir(), net: newMemNet(), base: base,
				peers: map[uint64]string{}, nodes: map[uint64]*testNode{}}
			t.Cleanup(c.stopAll)
			for id := uint64(1); id <= 3; id++ {
				c.reserve(id)
			}
			for id, tn := range c.nodes {
				cfg := RestoreConfig{ID: id, InitialCluster: maps.Clone(c.peers), InitialClusterToken: base.InitialClusterToken,
					DataDir: tn.dir, Index: index, Revision: index, Logger: peertest.Logger(),
					RaftLog: base.RaftLog, WALSegmentSize: base.Knobs.WALSegmentSize}
				if err := Restore(cfg, func(add func(key, value []byte, m revision.Meta) error) error {
					return add([]byte("k"), []byte("v"), revision.Meta{Create: index, Mod: index, Version: 1})
				}); err != nil {
					t.Fatalf("restore node %d at %d: %v", id, index, err)
				}
			}
			for id := range c.peers {
				c.start(id, false)
			}
			lead := c.leader()
			var v uint64
			wait.NoError(t, fmt.Sprintf("the cluster restored at index %d (leader %d) to commit a write", index, lead.id), func() error {
				ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
				defer cancel()
				var err error
				v, err = c.leader().node.Put(ctx, []byte("new"), []byte("x"))
				return err
			})
			if v <= index {
				t.Fatalf("write after a restore at %d got version %d", index, v)
			}
		})
	}
}
