package store

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"

	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/kvd-project/kvd/internal/revision"
)

// checkMetaCache fails t unless every key's Meta and lease as a new
// Update sees them (through the cache where it has the key) are the ones
// Pebble holds, and every cached entry of the current generation is
// Pebble's.
func checkMetaCache(t *testing.T, s *Store, keys int, step string) {
	t.Helper()
	for _, sl := range s.mc.slots {
		if sl.key == "" || s.mc.gen != s.gen {
			continue
		}
		_, m, ok, err := s.Get([]byte(sl.key))
		if err != nil {
			t.Fatal(err)
		}
		if sl.hasMeta && (ok != sl.present || (ok && m != sl.m)) {
			t.Fatalf("%s: cached %q = %+v (present %t), Pebble has %+v (present %t)", step, sl.key, sl.m, sl.present, m, ok)
		}
		if id := pebbleKeyLease(t, s, []byte(sl.key)); sl.hasLease && sl.lease != id {
			t.Fatalf("%s: cached %q on lease %d, Pebble has %d", step, sl.key, sl.lease, id)
		}
	}
	u := s.NewUpdate()
	defer u.Close()
	for i := range keys {
		k := fmt.Appendf(nil, "k%02d", i)
		_, want, _, err := s.Get(k)
		if err != nil {
			t.Fatal(err)
		}
		if got, err := u.Meta(k); err != nil || got != want {
			t.Fatalf("%s: Update.Meta(%s) = %+v, %v; Pebble has %+v", step, k, got, err, want)
		}
		if got, err := u.KeyLease(k); err != nil || got != pebbleKeyLease(t, s, k) {
			t.Fatalf("%s: Update.KeyLease(%s) = %d, %v; Pebble has %d", step, k, got, err, pebbleKeyLease(t, s, k))
		}
	}
}

// pebbleKeyLease reads key's lease from Pebble, past every cache.
func pebbleKeyLease(t *testing.T, s *Store, key []byte) uint64 {
	t.Helper()
	raw, ok, err := s.getRaw(leaseKey(nil, s.gen, leaseOfKy, 0, key))
	if err != nil {
		t.Fatal(err)
	}
	if !ok {
		return 0
	}
	return binary.LittleEndian.Uint64(raw)
}

// writeRandom applies n random PUTs (each on a random lease or none),
// DELETEs and lease revokes through u, as the state machine does: each
// PUT's Meta follows the key's previous one, and the key leaves its old
// lease for its new one.
func writeRandom(t *testing.T, u *Update, r *rand.Rand, rev *uint64, keys, n int) {
	t.Helper()
	for range n {
		k := fmt.Appendf(nil, "k%02d", r.IntN(keys))
		*rev++
		var err error
		switch r.IntN(12) {
		case 0, 1, 2:
			_, err = u.Delete(k, *rev)
			if err == nil {
				_, err = u.Detach(k)
			}
		case 3:
			_, _, err = u.RevokeLease(1+r.Uint64N(3), *rev)
		default:
			err = putOnLease(u, k, *rev, r.Uint64N(4))
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}

func putOnLease(u *Update, k []byte, rev, lease uint64) error {
	prev, err := u.Meta(k)
	if err != nil {
		return err
	}
	if err := u.Put(k, fmt.Appendf(nil, "v%d", rev), prev.Next(rev, lease)); err != nil {
		return err
	}
	if _, err := u.Detach(k); err != nil || lease == 0 {
		return err
	}
	if _, ok, err := u.Lease(lease); err != nil || !ok {
		if err := errors.Join(err, u.SetLease(Lease{ID: lease, TTL: 1})); err != nil {
			return err
		}
	}
	return u.Attach(k, lease)
}

// installSnapshot installs, through u, a snapshot at index holding keys
// of the form Put writes under the names k00..k(keys-1), every other one.
func installSnapshot(t *testing.T, s *Store, u *Update, index uint64, keys int) {
	t.Helper()
	st := s.NewStaged(index, 1)
	for i := 0; i < keys; i += 2 {
		m := revision.Meta{Create: index, Mod: index, Version: 7}
		if err := st.Add(fmt.Appendf(nil, "k%02d", i), appendKVValue(nil, m, []byte("snap"))); err != nil {
			t.Fatal(err)
		}
	}
	if err := st.Finish(); err != nil {
		t.Fatal(err)
	}
	snap := &pb.Snapshot{Data: EncodeMembers(nil), Metadata: &pb.SnapshotMetadata{
		ConfState: &pb.ConfState{Voters: []uint64{1}}, Index: proto.Uint64(index), Term: proto.Uint64(1)}}
	if err := u.InstallSnapshot(snap, st); err != nil {
		t.Fatal(err)
	}
}

// The apply path's metadata cache answers exactly what Pebble would, over
// random writes with eviction, abandoned Updates, writes by an Update that
// does not own the cache, and snapshot installs followed by writes in the
// same Update.
func TestMetaCacheAgreesWithPebble(t *testing.T) {
	s := openT(t, t.TempDir(), 0)
	defer s.Close()
	const keys = 40
	s.mc.max = 12 * (3 + metaSlotOverhead) // a third of the keys: evictions
	r := rand.New(rand.NewPCG(1, 2))
	var rev, index uint64
	for i := range 300 {
		u := s.NewUpdate()
		writeRandom(t, u, r, &rev, keys, 1+r.IntN(8))
		step := fmt.Sprintf("step %d", i)
		switch r.IntN(8) {
		case 0: // never committed: its writes must not stay cached
			u.Close()
			step += " (abandoned)"
		case 1: // another Update writes and commits while u is open
			o := s.NewUpdate()
			writeRandom(t, o, r, &rev, keys, 4)
			if err := o.Commit(false); err != nil {
				t.Fatal(err)
			}
			writeRandom(t, u, r, &rev, keys, 4)
			if err := u.Commit(false); err != nil {
				t.Fatal(err)
			}
			step += " (two Updates)"
		case 2: // a snapshot, then writes, in one Update
			index += 1000
			installSnapshot(t, s, u, index, keys)
			writeRandom(t, u, r, &rev, keys, 6)
			if err := u.Commit(true); err != nil {
				t.Fatal(err)
			}
			step += " (snapshot install)"
		default:
			if err := u.Commit(false); err != nil {
				t.Fatal(err)
			}
		}
		checkMetaCache(t, s, keys, step)
	}
	if s.mc.len() == 0 {
		t.Fatal("the cache was never used")
	}
}

// A commit that fails leaves nothing of its writes in the cache.
func TestMetaCacheForgetsFailedCommit(t *testing.T) {
	s := openT(t, t.TempDir(), 0)
	defer s.Close()
	commit(t, s, func(u *Update) error { return u.Put([]byte("a"), []byte("1"), mod(1)) })
	u := s.NewUpdate()
	if err := u.Put([]byte("a"), []byte("2"), revision.Meta{Create: 1, Mod: 2, Version: 2}); err != nil {
		t.Fatal(err)
	}
	if _, err := u.Delete([]byte("a"), 3); err != nil {
		t.Fatal(err)
	}
	s.fault.trip(errors.New("injected"))
	if err := u.Commit(true); !errors.Is(err, ErrFault) {
		t.Fatalf("Commit = %v, want a fault", err)
	}
	if n := s.mc.len(); n != 0 {
		t.Fatalf("cache holds %d keys after a failed commit", n)
	}
	if s.mc.owner != nil {
		t.Fatal("the failed Update still owns the cache")
	}
}

// Eviction keeps the cache within its bound and drops the entries least
// recently used first (CLOCK).
func TestMetaCacheEvictsWithinBound(t *testing.T) {
	c := newMetaCache(4 * (2 + metaSlotOverhead))
	for i := range 4 {
		c.put(1, fmt.Appendf(nil, "k%d", i), revision.Meta{Mod: uint64(i + 1), Version: 1}, true)
	}
	if _, _, ok := c.get(1, []byte("k0")); !ok {
		t.Fatal("k0 not cached")
	}
	for i := 4; i < 7; i++ {
		c.put(1, fmt.Appendf(nil, "k%d", i), revision.Meta{Mod: uint64(i + 1), Version: 1}, true)
		if c.bytes > c.max {
			t.Fatalf("cache at %d bytes, bound %d", c.bytes, c.max)
		}
	}
	if c.len() != 4 {
		t.Fatalf("cache holds %d keys, want 4", c.len())
	}
	for _, k := range []string{"k0", "k6"} {
		if _, _, ok := c.get(1, []byte(k)); !ok {
			t.Errorf("%s evicted", k)
		}
	}
	if _, _, ok := c.get(2, []byte("k0")); ok {
		t.Error("an entry answered for another generation")
	}
}

// find tries the slot it returned last before the map; a slot freed since
// (its key "") must not answer for the empty key, nor an evicted key for
// itself.
func TestMetaCacheFindsNoFreedSlot(t *testing.T) {
	c := newMetaCache(1 * (2 + metaSlotOverhead))
	c.put(1, []byte("k0"), revision.Meta{Mod: 1, Version: 1}, true)
	if _, _, ok := c.get(1, []byte("k0")); !ok {
		t.Fatal("k0 not cached")
	}
	c.evict() // frees k0's slot, the one found last
	for _, k := range []string{"", "k0"} {
		if s := c.find([]byte(k)); s != nil {
			t.Errorf("find(%q) returned a slot holding %q", k, s.key)
		}
	}
}
