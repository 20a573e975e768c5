package store

import (
	"errors"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/kvd-project/kvd/internal/errs"
)

// TestCompactionUnderLoadNeverShowsAWrongPastValue: while one goroutine
// applies revisions and compactions (the raft loop), the compactor deletes
// history (in batches far smaller than limits.CompactBatch, so that reads
// meet every partial state), and readers read at random revisions and
// watch from random revisions: every answer is the model's exactly, or
// ErrCompacted for a revision that is below the compaction revision.
func TestCompactionUnderLoadNeverShowsAWrongPastValue(t *testing.T) {
	s := openT(t, t.TempDir(), 0)
	defer s.Close()
	hm := newHistModel()
	const revs = 1500
	var done atomic.Bool
	var wg sync.WaitGroup
	wg.Add(4)
	go func() { // the raft loop
		defer wg.Done()
		defer done.Store(true)
		rng := rand.New(rand.NewPCG(21, 22))
		for hm.rev() < revs {
			writeHistory(t, s, hm, rng, awkwardKeys, 1)
			if r := hm.rev(); r%40 == 0 {
				compactTo(t, s, r-rng.Uint64N(30))
			}
		}
	}()
	go func() { // the compactor, in small batches
		defer wg.Done()
		for !done.Load() {
			s.rs.comp.mu.Lock()
			_, err := s.compactBatch(7)
			s.rs.comp.mu.Unlock()
			if err != nil {
				t.Error(err)
				return
			}
		}
	}()
	for g := range 2 {
		go func() {
			defer wg.Done()
			readPastRevisions(t, s, hm, rand.New(rand.NewPCG(23, uint64(g))), &done)
		}()
	}
	wg.Wait()
}

// readPastRevisions reads at random revisions from just below the
// compaction revision to the latest, and watches from random revisions,
// checking every answer against the model, until done.
func readPastRevisions(t *testing.T, s *Store, hm *histModel, rng *rand.Rand, done *atomic.Bool) {
	for n := 0; !done.Load() || n < 10; n++ {
		// The compaction revision first: a commit publishes the store
		// revision before it, so cur is at least compact.
		compact := s.CompactRevision()
		cur := s.Revision()
		if cur == 0 {
			continue
		}
		lo := compact - min(compact, 3)
		rev := lo + rng.Uint64N(cur-lo+1)
		got, at, err := rangeStore(s, "", "", rev)
		switch {
		case errors.Is(err, errs.ErrCompacted) && rev < committedCompact(t, s):
		case err != nil:
			t.Errorf("RangeAt at %d (compacted at %d then): %v", rev, compact, err)
			return
		case !slices.Equal(got, rangeModel(hm.state(at), "", "")) || (rev != 0 && at != rev):
			t.Errorf("RangeAt at %d (read at %d): %q, want %q", rev, at, got, rangeModel(hm.state(at), "", ""))
			return
		}
		from := compact + 1 + rng.Uint64N(cur-compact+1)
		evs, at, err := changesStore(s, from)
		switch {
		case errors.Is(err, errs.ErrCompacted) && from <= committedCompact(t, s):
		case err != nil:
			t.Errorf("Changes from %d: %v", from, err)
			return
		default:
			if want := changesModel(hm, from, at); !slices.Equal(evs, want) {
				t.Errorf("Changes from %d (at %d):\n got %q\nwant %q", from, at, evs, want)
				return
			}
		}
	}
}

// committedCompact is the published compaction revision now: at least
// the one a read that started before saw.
func committedCompact(t *testing.T, s *Store) uint64 {
	return s.CompactRevision()
}
