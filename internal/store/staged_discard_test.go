package store

import (
	"context"
	"encoding/binary"
	"fmt"
	"testing"

	"github.com/cockroachdb/pebble/v2"
)

// rangeDels counts the range deletions the store's Pebble holds.
func rangeDels(t *testing.T, s *Store) int {
	t.Helper()
	n := 0
	err := s.db.ScanInternal(context.Background(), 0, nil, []byte{0xff},
		func(*pebble.InternalKey, pebble.LazyValue, pebble.IteratorLevel) error { return nil },
		func(start, end []byte, _ pebble.SeqNum) error { n++; return nil },
		nil, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestAbandonedTransfersLeaveNoRangeDeletions: a peer session begins a
// snapshot transfer with a 25-byte 'B' frame and abandons it with the next
// 'B', or finishes one of a single record with an 'S' frame the filter
// drops; either way the transfer is Discarded. Each Discard wrote two
// range deletions (its generation's keys and leases), so a member could
// make the node's Pebble accumulate range tombstones at will, and every
// read of the store (scans, get-many, transactions, backups) slowed with
// them: a probe measured 1000 scans at 4 ms, then at 3 minutes after
// 200,000 abandoned empty transfers (about 5 MB of 'B' frames).
func TestAbandonedTransfersLeaveNoRangeDeletions(t *testing.T) {
	s, err := Open(t.TempDir(), Options{WALSegmentSize: testSegmentSize})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	base := rangeDels(t, s)
	for i := range 100 {
		if err := s.NewStaged(7, 2).Discard(); err != nil { // 'B', then another 'B'
			t.Fatal(err)
		}
		st := s.NewStaged(8, 2) // 'B', one 'C' record, 'S' dropped by the filter
		if err := st.Add(histRecord(fmt.Appendf(nil, "k%d", i), nil, mod(1))); err != nil {
			t.Fatal(err)
		}
		if err := st.Finish(); err != nil {
			t.Fatal(err)
		}
		if err := st.Discard(); err != nil {
			t.Fatal(err)
		}
	}
	if n := rangeDels(t, s) - base; n != 0 {
		t.Fatalf("200 abandoned transfers of at most one record left %d range deletions", n)
	}
	// Whatever reached Pebble is gone again, however the transfer was
	// deleted: a small one key by key, a large one by range.
	for _, keys := range []int{1, 100, discardPointBytes / 8} {
		st := s.NewStaged(9, 2)
		for i := range keys {
			if err := st.Add(histRecord(fmt.Appendf(nil, "x%d", i), nil, mod(1))); err != nil {
				t.Fatal(err)
			}
		}
		if err := st.AddLease([]byte{leaseRec, 0, 0, 0, 0, 0, 0, 0, 7}, make([]byte, 16)); err != nil {
			t.Fatal(err)
		}
		if err := st.Finish(); err != nil {
			t.Fatal(err)
		}
		if err := st.Discard(); err != nil {
			t.Fatal(err)
		}
		for _, span := range [][2][]byte{{genPrefix(st.gen), genEnd(st.gen)}, {leaseGenPrefix(st.gen), leaseGenEnd(st.gen)}} {
			it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: span[0], UpperBound: span[1]})
			if err != nil {
				t.Fatal(err)
			}
			if it.First() {
				t.Errorf("%d-key transfer: key %x survived its Discard", keys, it.Key())
			}
			it.Close()
		}
	}
}

// TestTransfersOfManySmallKeysLeaveNoRangeDeletions: abandoned transfers
// are deleted key by key by what their keys weigh, not by how many there
// are: a transfer of 100 one-byte keys (about 1.2 KB of frames) must not
// make the node write a pair of range deletions.
func TestTransfersOfManySmallKeysLeaveNoRangeDeletions(t *testing.T) {
	s, err := Open(t.TempDir(), Options{WALSegmentSize: testSegmentSize})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	base := rangeDels(t, s)
	const transfers, keys = 100, 100
	for i := range transfers {
		st := s.NewStaged(8, 2)
		for k := range keys {
			if err := st.Add(histRecord([]byte{byte(k)}, nil, mod(1))); err != nil {
				t.Fatal(err)
			}
		}
		if err := st.Finish(); err != nil {
			t.Fatal(err)
		}
		if err := st.Discard(); err != nil {
			t.Fatalf("transfer %d: %v", i, err)
		}
	}
	if n := rangeDels(t, s) - base; n != 0 {
		t.Fatalf("%d abandoned transfers of %d one-byte keys left %d range deletions", transfers, keys, n)
	}
}

// TestLargeAbandonedTransferDeletedByRange: past discardPointBytes of keys
// a transfer is deleted by range (two deletions: its leases and its
// revision space, which holds its history), and its data is gone.
func TestLargeAbandonedTransferDeletedByRange(t *testing.T) {
	s, err := Open(t.TempDir(), Options{WALSegmentSize: testSegmentSize})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	base := rangeDels(t, s)
	st := s.NewStaged(8, 2)
	key := make([]byte, 1000)
	for k := range discardPointBytes/len(key) + 1 {
		binary.BigEndian.PutUint32(key, uint32(k))
		if err := st.Add(histRecord(key, nil, mod(1))); err != nil {
			t.Fatal(err)
		}
	}
	if err := st.Finish(); err != nil {
		t.Fatal(err)
	}
	if err := st.Discard(); err != nil {
		t.Fatal(err)
	}
	if n := rangeDels(t, s) - base; n != 2 {
		t.Fatalf("a transfer past discardPointBytes left %d range deletions, want 2", n)
	}
}

// TestStagedDoneRunsOnce: the holder's accounting ends exactly once,
// whether the data is discarded (even twice) or installed.
func TestStagedDoneRunsOnce(t *testing.T) {
	s, err := Open(t.TempDir(), Options{WALSegmentSize: testSegmentSize})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	calls := 0
	st := s.NewStaged(8, 2)
	st.OnDone(func() { calls++ })
	st.Discard()
	st.Discard()
	if calls != 1 {
		t.Fatalf("done ran %d times, want 1", calls)
	}
}
