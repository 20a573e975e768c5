package wal

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"
)

// crashRun drives a log with random appends (some overwriting a suffix),
// HardState changes, syncs, compactions and resets, keeping two models:
// the durable one (as of the last sync) and the records written since, one
// model change per record. A crash may keep any prefix of those records,
// never less, never anything else.
type crashRun struct {
	t       *testing.T
	rng     *rand.Rand
	fs      vfs.FS // what l runs on
	segSize int64
	// maxData bounds an entry's data. Small entries come in few record
	// sizes, so that the records written after a restart often end just
	// where a leftover record of the same segment starts: the case where
	// reading a leftover as valid would go unnoticed by the checksum.
	maxData int
	l       *Log
	durable model
	live    model
	pending []func(*model)
	term    uint64
}

func (c *crashRun) synced() {
	c.durable, c.pending = c.live.clone(), nil
}

func (c *crashRun) op() {
	t, l, rng := c.t, c.l, c.rng
	switch p := rng.IntN(100); {
	case p < 45:
		first := c.live.last() + 1
		if rng.IntN(6) == 0 && len(c.live.ents) > 0 {
			// A new leader overwrites an uncommitted suffix.
			c.term++
			back := min(uint64(rng.IntN(6)), c.live.last())
			first = max(c.live.trunc.index+1, c.live.last()-back)
		}
		es := randEntries(rng, first, c.term, 1+rng.IntN(6), c.maxData)
		must(t, l.Append(es))
		for _, e := range es {
			c.pending = append(c.pending, func(m *model) { m.append([]*pb.Entry{e}) })
		}
		c.live.append(es)
	case p < 55:
		hs := &pb.HardState{Term: proto.Uint64(c.term), Vote: proto.Uint64(uint64(rng.IntN(3))), Commit: proto.Uint64(uint64(rng.Int64N(int64(c.live.last()) + 1)))}
		must(t, l.SetHardState(hs))
		c.pending = append(c.pending, func(m *model) { m.hs = hs })
		c.live.hs = hs
	case p < 70:
		must(t, l.Sync())
		c.synced()
	case p < 80:
		// Write without the fdatasync: the state a crash during Sync
		// finds, where the batch's write may have reached the disk in part.
		l.mu.Lock()
		must(t, l.flush())
		l.mu.Unlock()
	case p < 85:
		if len(c.live.ents) > 0 {
			lo := c.live.trunc.index + 1 + uint64(rng.IntN(len(c.live.ents)))
			got, err := l.Entries(lo, c.live.last()+1, 1<<62)
			must(t, err)
			if d := (model{hs: c.live.hs, trunc: indexTerm{lo - 1, 0}, ents: c.live.ents[lo-c.live.trunc.index-1:]}).diff(model{hs: c.live.hs, trunc: indexTerm{lo - 1, 0}, ents: got}); d != "" {
				t.Fatalf("Entries(%d, %d) before a sync: %s", lo, c.live.last()+1, d)
			}
		}
	case p < 93:
		idx := c.live.trunc.index + uint64(rng.IntN(len(c.live.ents)+1))
		must(t, l.Compact(idx))
		c.live.compact(idx)
		c.synced()
	case p < 96:
		c.restart()
	default:
		idx := c.live.last() + uint64(rng.IntN(4))
		c.term++
		must(t, l.Reset(idx, c.term))
		c.live.reset(idx, c.term)
		c.synced()
	}
}

// restart closes the log and opens it again, as a clean restart of the
// node does: the reopened log goes on in the same segment, so later
// crashes hit a segment with records of several openings in it.
func (c *crashRun) restart() {
	must(c.t, c.l.Close())
	l, r, err := Open(memConfig(c.fs, c.segSize))
	if err != nil {
		c.t.Fatalf("clean restart: Open: %v", err)
	}
	if d := c.live.diff(fromRecovered(r)); d != "" {
		c.t.Fatalf("clean restart: replay: %s", d)
	}
	c.l = l
	c.synced()
}

// soonRestart sometimes follows a crash with a run of clean restarts, one
// after each operation: each reopen scans past the records written since
// the crash, so if the leftovers the crash left past the torn tail could
// be read as records, one whose start a record boundary meets is read.
// Small entries come in few record sizes, so such meetings are frequent.
func (c *crashRun) soonRestart() {
	if c.rng.IntN(4) == 0 {
		return
	}
	for range 1 + c.rng.IntN(40) {
		c.op()
		c.restart()
	}
}

// check compares a replay with the durable model plus each prefix of the
// pending records.
func (c *crashRun) check(got model) error {
	st := c.durable.clone()
	if st.diff(got) == "" {
		return nil
	}
	for _, p := range c.pending {
		p(&st)
		if st.diff(got) == "" {
			return nil
		}
	}
	return fmt.Errorf("replay matches no prefix of the writes: against the synced state: %s (%d records unsynced)", c.durable.diff(got), len(c.pending))
}

// TestCrashKeepsSyncedRecordsAndNoGarbage cuts power at random points of
// random write sequences: after each crash the file system keeps what was
// synced and a random subset of the unsynced 4 KiB blocks and directory
// entries (so unsynced writes come back torn and out of order). Reopening
// must succeed, replay every synced record, and read nothing that is not a
// prefix of what was written; the log then goes on from there.
func TestCrashKeepsSyncedRecordsAndNoGarbage(t *testing.T) {
	seeds := 150
	if testing.Short() {
		seeds = 30
	}
	for seed := range seeds {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(uint64(seed), 31))
			fs := vfs.NewCrashableMem()
			segSize := int64(8<<10) << rng.IntN(3)
			l, _ := mustOpen(t, memConfig(fs, segSize))
			c := &crashRun{t: t, rng: rng, fs: fs, segSize: segSize, maxData: []int{700, 24, 4}[rng.IntN(3)], l: l, durable: newModel(), live: newModel(), term: 1}
			for crash := range 8 {
				for range rng.IntN(300) {
					c.op()
				}
				keep := rng.IntN(101)
				clone := fs.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: keep, RNG: rng})
				l2, r, err := Open(memConfig(clone, segSize))
				if err != nil {
					t.Fatalf("crash %d (kept %d%% of unsynced data): Open: %v", crash, keep, err)
				}
				got := fromRecovered(r)
				if err := c.check(got); err != nil {
					t.Fatalf("crash %d (kept %d%% of unsynced data): %v", crash, keep, err)
				}
				checkLog(t, l2, got)
				fs, c.fs, c.l = clone, clone, l2
				c.live = got.clone()
				c.synced()
				c.soonRestart()
			}
			must(t, c.l.Close())
		})
	}
}
