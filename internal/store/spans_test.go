package store

import (
	"bytes"
	"errors"
	"testing"
)

// TestTablesEndAtKeyGroups: after a flush, no Pebble table holds keys of
// two groups of the layout (the KV state, the log, the metadata, a kind
// of revision-space record): the history's records by revision and the
// log are in tables of their own.
func TestTablesEndAtKeyGroups(t *testing.T) {
	s := openT(t, t.TempDir(), 0)
	defer s.Close()
	var rev uint64
	for range 20 {
		u := s.NewUpdate()
		if err := u.Append(ents(rev+1, rev+9, 1)); err != nil {
			t.Fatal(err)
		}
		for range 8 {
			rev++
			key := appendBenchKey(nil, rev%7)
			prev, err := u.Meta(key)
			if err != nil {
				t.Fatal(err)
			}
			if err := u.Put(key, []byte("value"), prev.Next(rev, 0)); err != nil {
				t.Fatal(err)
			}
		}
		if err := errors.Join(u.SetRevision(rev), u.SetApplied(rev), u.Commit(false)); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.db.Flush(); err != nil {
		t.Fatal(err)
	}
	levels, err := s.db.SSTables()
	if err != nil {
		t.Fatal(err)
	}
	tables := 0
	for _, level := range levels {
		for _, tb := range level {
			tables++
			lo, hi := tb.Smallest.UserKey, tb.Largest.UserKey
			_, end, _ := tableRegionEnd(lo)
			// A range deletion may end the table at its group's end,
			// exclusive.
			if c := bytes.Compare(hi, end); end != nil && (c > 0 || c == 0 && !tb.Largest.IsExclusiveSentinel()) {
				t.Errorf("table %s holds keys %x to %x, past their group's end %x", tb.FileNum, lo, hi, end)
			}
		}
	}
	if tables < 4 { // the KV state, the log, the metadata, the history
		t.Fatalf("%d tables after a flush; want one per group of keys", tables)
	}
}

// TestTableRegionEnd: the ends of the groups of keys.
func TestTableRegionEnd(t *testing.T) {
	for _, tc := range []struct {
		name       string
		start, end []byte
	}{
		{"empty", nil, nil},
		{"KV state", appendKVKey(nil, 3, []byte("a")), []byte{prefixKV + 1}},
		{"log", logKey(9), []byte{prefixLog + 1}},
		{"history index", appendHistKey(nil, 3, []byte("a"), 5), appendRevKey(nil, 3, revHistory+1)},
		{"history by revision", appendOrderKey(nil, 3, 5, 0, []byte("a")), appendRevKey(nil, 3, revOrder+1)},
		{"revision space's last kind", append(revGenPrefix(3), 0xff, 1), revGenPrefix(4)},
		{"short revision key", []byte{prefixRev, 1}, []byte{prefixRev + 1}},
		{"top byte 0xff", []byte{0xff, 1}, nil},
	} {
		_, end, err := tableRegionEnd(tc.start)
		if err != nil || !bytes.Equal(end, tc.end) {
			t.Errorf("%s: end of %x = %x, %v; want %x", tc.name, tc.start, end, err, tc.end)
		}
		if end != nil && bytes.Compare(end, tc.start) <= 0 {
			t.Errorf("%s: end %x not above %x", tc.name, end, tc.start)
		}
	}
}
