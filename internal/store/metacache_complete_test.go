package store

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/kvd-project/kvd/internal/revision"
)

// readCounter counts the Pebble reads Updates make for keys' metadata and
// leases (Knobs.OnMetaRead).
type readCounter struct{ n int }

func (r *readCounter) open(t *testing.T, dir string, cacheBytes int) *Store {
	t.Helper()
	s, err := Open(dir, Options{WALSegmentSize: testSegmentSize,
		Knobs: Knobs{MetaCacheBytes: cacheBytes, OnMetaRead: func([]byte) { r.n++ }}})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	return s
}

// fillKeys commits k00..k(n-1), every third on lease 1, through one Update.
func fillKeys(t *testing.T, s *Store, n int) {
	t.Helper()
	commit(t, s, func(u *Update) error {
		if err := u.SetLease(Lease{ID: 1, TTL: 1}); err != nil {
			return err
		}
		for i := range n {
			var lease uint64
			if i%3 == 0 {
				lease = 1
			}
			if err := putOnLease(u, fmt.Appendf(nil, "k%02d", i), uint64(i+1), lease); err != nil {
				return err
			}
		}
		return nil
	})
}

// wantMeta fails t unless u sees key with Meta want (the zero Meta:
// absent) and on lease.
func wantMeta(t *testing.T, u *Update, key string, want revision.Meta, lease uint64) {
	t.Helper()
	if got, err := u.Meta([]byte(key)); err != nil || got != want {
		t.Fatalf("Meta(%s) = %+v, %v; want %+v", key, got, err, want)
	}
	if got, err := u.KeyLease([]byte(key)); err != nil || got != lease {
		t.Fatalf("KeyLease(%s) = %d, %v; want %d", key, got, err, lease)
	}
}

// A complete cache answers a key it lacks as absent and on no lease, and
// a key it holds with its Meta and lease, without a Pebble read: on a new
// store, on one reopened with keys, and after a snapshot install.
func TestCompleteMetaCacheAnswersWithoutPebbleReads(t *testing.T) {
	for _, tc := range []struct {
		name    string
		prepare func(t *testing.T, r *readCounter, dir string) *Store
		present string // a key the state holds, with its Meta and lease
		meta    revision.Meta
		lease   uint64
	}{
		{"new store", func(t *testing.T, r *readCounter, dir string) *Store {
			return r.open(t, dir, 0)
		}, "", revision.Meta{}, 0},
		{"reopened store", func(t *testing.T, r *readCounter, dir string) *Store {
			s := r.open(t, dir, 0)
			fillKeys(t, s, 30)
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			return r.open(t, dir, 0)
		}, "k03", revision.Meta{Create: 4, Mod: 4, Version: 1, Lease: 1}, 1},
		{"snapshot installed", func(t *testing.T, r *readCounter, dir string) *Store {
			s := r.open(t, dir, 0)
			fillKeys(t, s, 30)
			u := s.NewUpdate()
			installSnapshot(t, s, u, 1000, 40)
			if err := u.Commit(true); err != nil {
				t.Fatal(err)
			}
			return s
		}, "k04", revision.Meta{Create: 1000, Mod: 1000, Version: 7}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := &readCounter{}
			s := tc.prepare(t, r, t.TempDir())
			defer s.Close()
			if !s.MetaCacheStats().Complete {
				t.Fatal("cache incomplete")
			}
			r.n = 0
			before := s.MetaCacheStats().AbsentHits
			u := s.NewUpdate()
			defer u.Close()
			wantMeta(t, u, "absent", revision.Meta{}, 0)
			if existed, err := u.Delete([]byte("absent2"), 5000); err != nil || existed {
				t.Fatalf("Delete(absent2) = %t, %v", existed, err)
			}
			if tc.present != "" {
				wantMeta(t, u, tc.present, tc.meta, tc.lease)
			}
			if r.n != 0 {
				t.Fatalf("%d Pebble reads", r.n)
			}
			if got := s.MetaCacheStats().AbsentHits - before; got != 3 {
				t.Fatalf("%d lookups answered absent by completeness, want 3", got)
			}
		})
	}
}

// Completeness ends wherever a key of the KV state may lack an entry:
// afterwards, a key that is in Pebble and not in the cache is found
// present (the events leave such a key behind, named by the case).
func TestMetaCacheCompletenessEnds(t *testing.T) {
	k := func(i int) []byte { return fmt.Appendf(nil, "k%02d", i) }
	for _, tc := range []struct {
		name     string
		cacheFor int // keys the cache holds (0: all)
		// event does it and returns the key left in Pebble only.
		event      func(t *testing.T, s *Store) string
		regained   bool // the event ends complete again
		wantReads  bool // finding the key reads Pebble
		metaOfLeft revision.Meta
	}{
		{"eviction of a present key", 12, func(t *testing.T, s *Store) string {
			// k00..k09 were loaded; adding k10..k12 evicts k00.
			commit(t, s, func(u *Update) error {
				for i := 10; i < 13; i++ {
					if err := u.Put(k(i), []byte("v"), mod(uint64(100+i))); err != nil {
						return err
					}
				}
				return nil
			})
			return "k00"
		}, false, true, revision.Meta{Create: 1, Mod: 1, Version: 1, Lease: 1}},
		{"write of a key over the bound", 12, func(t *testing.T, s *Store) string {
			long := string(fmt.Appendf(nil, "%01200d", 7))
			commit(t, s, func(u *Update) error { return u.Put([]byte(long), []byte("v"), mod(100)) })
			return long
		}, false, true, mod(100)},
		{"reset", 0, func(t *testing.T, s *Store) string {
			s.mc.reset(s.gen)
			return "k05"
		}, false, true, revision.Meta{Create: 6, Mod: 6, Version: 1}},
		{"commit by an Update that is not the owner", 0, func(t *testing.T, s *Store) string {
			owner := s.NewUpdate()
			defer owner.Close()
			if _, err := owner.Meta(k(1)); err != nil {
				t.Fatal(err)
			}
			commit(t, s, func(u *Update) error { return u.Put([]byte("new"), []byte("v"), mod(200)) })
			return "new"
		}, false, true, mod(200)},
		{"Close without Commit after writing ahead", 0, func(t *testing.T, s *Store) string {
			u := s.NewUpdate()
			if _, err := u.Delete(k(5), 300); err != nil {
				t.Fatal(err)
			}
			u.Close()
			return "k05"
		}, false, true, revision.Meta{Create: 6, Mod: 6, Version: 1}},
		{"failed Commit after writing ahead", 0, func(t *testing.T, s *Store) string {
			u := s.NewUpdate()
			if _, err := u.Delete(k(5), 300); err != nil {
				t.Fatal(err)
			}
			s.fault.trip(errors.New("injected"))
			if err := u.Commit(true); !errors.Is(err, ErrFault) {
				t.Fatalf("Commit = %v, want a fault", err)
			}
			return "k05"
		}, false, true, revision.Meta{Create: 6, Mod: 6, Version: 1}},
		{"snapshot install, then writes, in one Update", 0, func(t *testing.T, s *Store) string {
			u := s.NewUpdate()
			installSnapshot(t, s, u, 1000, 10)
			// Inside the install the cache is the new generation's and
			// incomplete: the snapshot's keys are found in the batch.
			if m, err := u.Meta(k(2)); err != nil || m.Create != 1000 {
				t.Fatalf("Meta(k02) in the installing Update = %+v, %v", m, err)
			}
			if err := u.Put(k(1), []byte("v"), mod(1001)); err != nil {
				t.Fatal(err)
			}
			if err := u.Commit(true); err != nil {
				t.Fatal(err)
			}
			return "k04"
		}, true, false, revision.Meta{Create: 1000, Mod: 1000, Version: 7}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := &readCounter{}
			dir := t.TempDir()
			s := r.open(t, dir, 0)
			fillKeys(t, s, 10)
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			bound := 0
			if tc.cacheFor > 0 {
				bound = tc.cacheFor * (3 + metaSlotOverhead)
			}
			s = r.open(t, dir, bound)
			defer s.Close()
			if !s.MetaCacheStats().Complete {
				t.Fatal("cache incomplete after Open")
			}
			left := tc.event(t, s)
			complete := s.MetaCacheStats().Complete
			r.n = 0
			u := s.NewUpdate()
			defer u.Close()
			if m, err := u.Meta([]byte(left)); err != nil || m != tc.metaOfLeft {
				t.Fatalf("Meta(%.40s) = %+v, %v; Pebble has %+v", left, m, err, tc.metaOfLeft)
			}
			if (r.n > 0) != tc.wantReads {
				t.Fatalf("%d Pebble reads finding %.40s", r.n, left)
			}
			if complete != tc.regained {
				t.Fatalf("complete = %t after the event, want %t", complete, tc.regained)
			}
		})
	}
}

// A store whose keys do not all fit in the cache opens with it
// incomplete: every key, present, absent or on a lease, is still seen as
// Pebble has it, the absent ones by reading Pebble.
func TestOpenWithMoreKeysThanFitLeavesCacheIncomplete(t *testing.T) {
	r := &readCounter{}
	dir := t.TempDir()
	s := r.open(t, dir, 0)
	const keys = 40
	fillKeys(t, s, keys)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = r.open(t, dir, 10*(3+metaSlotOverhead))
	defer s.Close()
	if s.MetaCacheStats().Complete {
		t.Fatal("complete with 40 keys in a cache of 10")
	}
	if n := s.mc.len(); n != 10 {
		t.Fatalf("cache loaded %d keys, want the 10 that fit", n)
	}
	r.n = 0
	checkMetaCache(t, s, keys+5, "open")
	if r.n == 0 {
		t.Fatal("keys the cache lacks were answered without reading Pebble")
	}
}

// The complete cache agrees with Pebble over random writes, leases and
// revokes, snapshot installs and reopens, and stays complete while all
// keys fit.
func TestCompleteMetaCacheAgreesWithPebble(t *testing.T) {
	r := &readCounter{}
	dir := t.TempDir()
	s := r.open(t, dir, 0)
	defer func() { s.Close() }()
	const keys = 40
	rnd := newRand(3)
	var rev, index uint64
	for i := range 200 {
		u := s.NewUpdate()
		writeRandom(t, u, rnd, &rev, keys, 1+rnd.IntN(8))
		step := fmt.Sprintf("step %d", i)
		switch rnd.IntN(10) {
		case 0:
			index += 1000
			installSnapshot(t, s, u, index, keys)
			writeRandom(t, u, rnd, &rev, keys, 6)
			step += " (snapshot install)"
		case 1:
			if err := u.Commit(false); err != nil {
				t.Fatal(err)
			}
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			s = r.open(t, dir, 0)
			checkMetaCache(t, s, keys, step+" (reopened)")
			continue
		}
		if err := u.Commit(false); err != nil {
			t.Fatal(err)
		}
		if !s.MetaCacheStats().Complete {
			t.Fatalf("%s: cache incomplete", step)
		}
		checkMetaCache(t, s, keys, step)
	}
}

func newRand(seed uint64) *rand.Rand { return rand.New(rand.NewPCG(seed, seed)) }

// BenchmarkLoadMetaCache is what Open (and a snapshot install) spends
// loading the metadata cache of a state of 60,000 keys of 16 bytes with
// 256-byte values, a third of them on a lease.
func BenchmarkLoadMetaCache(b *testing.B) {
	s, err := Open(b.TempDir(), Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	value := make([]byte, 256)
	u := s.NewUpdate()
	if err := u.SetLease(Lease{ID: 1, TTL: 1}); err != nil {
		b.Fatal(err)
	}
	for i := range 60000 {
		k := fmt.Appendf(nil, "key:%012d", i)
		m := revision.Meta{Create: uint64(i + 1), Mod: uint64(i + 1), Version: 1}
		if err := u.Put(k, value, m); err != nil {
			b.Fatal(err)
		}
		if i%3 == 0 {
			if err := u.Attach(k, 1); err != nil {
				b.Fatal(err)
			}
		}
	}
	if err := u.Commit(true); err != nil {
		b.Fatal(err)
	}
	if err := s.db.Flush(); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for range b.N {
		if err := s.loadMetaCache(); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	if !s.MetaCacheStats().Complete || s.mc.len() != 60000 {
		b.Fatalf("complete %t with %d keys", s.MetaCacheStats().Complete, s.mc.len())
	}
}
