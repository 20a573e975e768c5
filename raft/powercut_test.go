package raft

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/kvd-project/kvd/internal/store"
)

// cutFS counts the writes and syncs made through it (files and
// directories) and calls cut, once, before the one numbered at.
type cutFS struct {
	vfs.FS
	n   atomic.Int64
	at  int64
	cut func()
}

func (fs *cutFS) op() {
	if fs.n.Add(1) == fs.at {
		fs.cut()
	}
}

func (fs *cutFS) wrap(f vfs.File, err error) (vfs.File, error) {
	if err != nil {
		return nil, err
	}
	return &cutFile{File: f, fs: fs}, nil
}

func (fs *cutFS) Create(name string, c vfs.DiskWriteCategory) (vfs.File, error) {
	fs.op()
	return fs.wrap(fs.FS.Create(name, c))
}

func (fs *cutFS) OpenReadWrite(name string, c vfs.DiskWriteCategory, opts ...vfs.OpenOption) (vfs.File, error) {
	return fs.wrap(fs.FS.OpenReadWrite(name, c, opts...))
}

func (fs *cutFS) ReuseForWrite(oldname, newname string, c vfs.DiskWriteCategory) (vfs.File, error) {
	fs.op()
	return fs.wrap(fs.FS.ReuseForWrite(oldname, newname, c))
}

func (fs *cutFS) OpenDir(name string) (vfs.File, error) { return fs.wrap(fs.FS.OpenDir(name)) }

func (fs *cutFS) Rename(oldname, newname string) error {
	fs.op()
	return fs.FS.Rename(oldname, newname)
}

func (fs *cutFS) Remove(name string) error {
	fs.op()
	return fs.FS.Remove(name)
}

type cutFile struct {
	vfs.File
	fs *cutFS
}

func (f *cutFile) Write(p []byte) (int, error) {
	f.fs.op()
	return f.File.Write(p)
}

func (f *cutFile) WriteAt(p []byte, off int64) (int, error) {
	f.fs.op()
	return f.File.WriteAt(p, off)
}

func (f *cutFile) Sync() error {
	f.fs.op()
	return f.File.Sync()
}

func (f *cutFile) SyncData() error {
	f.fs.op()
	return f.File.SyncData()
}

func (f *cutFile) SyncTo(length int64) (bool, error) {
	f.fs.op()
	return f.File.SyncTo(length)
}

// TestPowerCutKeepsAcknowledgedWrites runs a one-node cluster with its raft
// log in the WAL (and, for comparison, in Pebble) on a crashable memory
// file system, writing from several
// clients, snapshotting and compacting the log often, and cuts power before
// a random write or sync of the store's (the WAL's or Pebble's): the file
// system keeps what was synced and a random share of the rest. The node
// restarted on what is left must hold every write acknowledged before the
// cut, and its state must be exactly the replay of its log: the writes of
// the entries up to its applied index, each with its entry's index, and
// nothing else.
func TestPowerCutKeepsAcknowledgedWrites(t *testing.T) {
	seeds := 40
	if testing.Short() {
		seeds = 10
	}
	for _, mode := range []string{store.RaftLogWAL, store.RaftLogPebble} {
		for seed := range seeds {
			t.Run(fmt.Sprintf("%s/seed%d", mode, seed), func(t *testing.T) { powerCut(t, mode, uint64(seed)) })
		}
	}
}

// powerCutRun is one seed's run: what the writers tried and had
// acknowledged, and the file system left by the cut.
type powerCutRun struct {
	rng   *rand.Rand
	mem   *vfs.MemFS
	mu    sync.Mutex
	tried map[string]string    // every write proposed: key -> value
	acked map[string]versioned // acknowledged: key -> value, index
	// Set by the cut.
	cutDone  chan struct{}
	kept     *vfs.MemFS
	mustHave map[string]versioned
	keep     int
	at       int64
}

func (r *powerCutRun) cut() {
	r.mu.Lock()
	r.mustHave = maps.Clone(r.acked)
	r.keep = r.rng.IntN(101)
	r.kept = r.mem.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: r.keep, RNG: rand.New(rand.NewPCG(r.rng.Uint64(), 1))})
	r.mu.Unlock()
	close(r.cutDone)
}

func powerCut(t *testing.T, mode string, seed uint64) {
	r := &powerCutRun{rng: rand.New(rand.NewPCG(seed, 7)), mem: vfs.NewCrashableMem(),
		tried: map[string]string{}, acked: map[string]versioned{}, cutDone: make(chan struct{})}
	var once sync.Once
	r.at = 200 + r.rng.Int64N(3000)
	fs := &cutFS{FS: r.mem, at: r.at, cut: func() { once.Do(r.cut) }}
	base := testConfig()
	base.TickInterval = 2 * time.Millisecond
	base.RaftLog, base.FS = mode, fs
	base.SnapshotCount, base.SnapshotCatchUpEntries = 20+r.rng.Uint64N(40), r.rng.Uint64N(10)
	base.Knobs.WALSegmentSize = 16 << 10
	c := newCluster(t, 1, base)
	c.leader()
	var stop atomic.Bool
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r.write(c, w, &stop)
		}()
	}
	select {
	case <-r.cutDone:
	case <-time.After(waitTimeout):
		once.Do(r.cut) // the run made fewer writes than the cut waited for
	}
	stop.Store(true)
	c.stopAll()
	wg.Wait()

	c.base.FS = r.kept
	tn := c.start(1, false)
	c.leader()
	c.caughtUp(tn)
	r.check(t, tn)
}

// write puts keys of its own (each written once) until stop.
func (r *powerCutRun) write(c *cluster, w int, stop *atomic.Bool) {
	nodes := []*Node{c.nodes[1].node}
	for i := 0; !stop.Load(); i++ {
		key, val := fmt.Sprintf("w%d-%05d", w, i), fmt.Sprintf("v%d-%d-%x", w, i, i*i)
		r.mu.Lock()
		r.tried[key] = val
		r.mu.Unlock()
		ver, err := putAnywhere(nodes, key, val)
		if err != nil {
			continue // stopping under the writer
		}
		r.mu.Lock()
		r.acked[key] = versioned{val, ver}
		r.mu.Unlock()
	}
}

// check compares the restarted node's state with what was acknowledged,
// and with the replay of its log.
func (r *powerCutRun) check(t *testing.T, tn *testNode) {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	state := kvState(t, tn.node)
	for k, want := range r.mustHave {
		if got, ok := state[k]; !ok || got != want {
			t.Fatalf("cut at %d%% of unsynced data kept: lost acknowledged write %s=%v (has %v, %v)", r.keep, k, want, got, ok)
		}
	}
	st, release, err := tn.node.Acquire()
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	applied := st.Applied()
	first, _ := st.FirstIndex()
	t.Logf("cut before op %d, %d%% of unsynced data kept: %d of %d writes acknowledged before it; restarted at applied %d, log from %d",
		r.at, r.keep, len(r.mustHave), len(r.tried), applied, first)
	// Each key is written once, by the entry whose index is its version:
	// the state holds exactly the writes of entries up to applied.
	byIndex := map[uint64]string{}
	for k, v := range state {
		if want, ok := r.tried[k]; !ok || want != v.value {
			t.Fatalf("state holds %s=%q, which no client wrote (wrote %q, %v)", k, v.value, want, ok)
		}
		if v.version > applied {
			t.Fatalf("state holds %s at %d, beyond the applied index %d", k, v.version, applied)
		}
		byIndex[v.version] = k
	}
	if applied >= first {
		ents, err := st.Entries(first, applied+1, 1<<40)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range ents {
			_, _, _, key, value, err := decodeTestCommand(e.GetData())
			if err != nil {
				continue // not a write
			}
			if got := state[string(key)]; got != (versioned{string(value), e.GetIndex()}) {
				t.Fatalf("entry %d writes %s=%q; the state has %v", e.GetIndex(), key, value, got)
			}
			delete(byIndex, e.GetIndex())
		}
	}
	for idx, k := range byIndex {
		if idx >= first {
			t.Fatalf("state holds %s at %d, but entry %d of the log is no such write", k, idx, idx)
		}
	}
}
