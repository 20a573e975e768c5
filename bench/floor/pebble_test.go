package floor

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
)

// frame is a batch frame body of the requests reqs.
func frame(reqs ...[]byte) []byte {
	var b []byte
	for _, r := range reqs {
		b = binary.BigEndian.AppendUint32(b, uint32(len(r)))
		b = append(b, r...)
	}
	return b
}

// scanPrefix returns the values under prefix p, in key order.
func scanPrefix(t *testing.T, db *pebble.DB, p byte) (keys, vals [][]byte) {
	t.Helper()
	it, err := db.NewIter(&pebble.IterOptions{LowerBound: []byte{p}, UpperBound: []byte{p + 1}})
	if err != nil {
		t.Fatal(err)
	}
	defer it.Close()
	for it.First(); it.Valid(); it.Next() {
		keys = append(keys, bytes.Clone(it.Key()))
		vals = append(vals, bytes.Clone(it.Value()))
	}
	return keys, vals
}

func openPebbleLog(t *testing.T, keys int) *PebbleLog {
	t.Helper()
	l, err := OpenPebbleLog(t.TempDir(), keys, false)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

// Each request is a log entry at the next index and a state write; the
// batch rewrites the hard-state key.
func TestPebbleLogWritesEntriesAndState(t *testing.T) {
	l := openPebbleLog(t, 1000)
	reqs := [][]byte{[]byte("aaaa"), []byte("bbbbbb"), []byte("c")}
	if err := l.Append(frame(reqs...)); err != nil {
		t.Fatal(err)
	}
	if err := l.Append(frame([]byte("dd"))); err != nil {
		t.Fatal(err)
	}
	keys, vals := scanPrefix(t, l.db, 'l')
	want := append(reqs, []byte("dd"))
	if len(vals) != len(want) {
		t.Fatalf("%d log entries, want %d", len(vals), len(want))
	}
	for i := range want {
		if idx := binary.BigEndian.Uint64(keys[i][1:]); idx != uint64(i+1) || !bytes.Equal(vals[i], want[i]) {
			t.Fatalf("entry %d: index %d, %q; want %d, %q", i, idx, vals[i], i+1, want[i])
		}
	}
	keys, _ = scanPrefix(t, l.db, 'k')
	if len(keys) == 0 || len(keys) > len(want) {
		t.Fatalf("%d state keys after %d writes", len(keys), len(want))
	}
	for _, k := range keys {
		if binary.BigEndian.Uint64(k[1:]) >= 1000 {
			t.Fatalf("state key %d outside the key set of 1000", binary.BigEndian.Uint64(k[1:]))
		}
	}
	if _, vals = scanPrefix(t, l.db, 'm'); len(vals) != 1 {
		t.Fatalf("%d hard-state keys, want 1", len(vals))
	}
}

// The log keeps its newest pebbleKeepEntries once it has grown by
// pebbleTruncateEvery beyond them, as kvd's log compaction does.
func TestPebbleLogTruncates(t *testing.T) {
	l := openPebbleLog(t, 10)
	req := frame(slices.Repeat([][]byte{[]byte("x")}, 100)...)
	total := pebbleTruncateEvery + pebbleKeepEntries
	for range total / 100 {
		if err := l.Append(req); err != nil {
			t.Fatal(err)
		}
	}
	keys, _ := scanPrefix(t, l.db, 'l')
	if len(keys) != pebbleKeepEntries {
		t.Fatalf("%d log entries after %d appends, want the newest %d", len(keys), total, pebbleKeepEntries)
	}
	if first := binary.BigEndian.Uint64(keys[0][1:]); first != uint64(total-pebbleKeepEntries+1) {
		t.Fatalf("oldest entry %d, want %d", first, total-pebbleKeepEntries+1)
	}
}

// A malformed frame is refused whole: nothing of it is written.
func TestPebbleLogRefusesMalformedFrames(t *testing.T) {
	for _, tc := range []struct {
		name string
		b    []byte
	}{
		{"stray bytes", append(frame([]byte("ok")), 0, 0)},
		{"length past the end", append(frame([]byte("ok")), 0, 0, 0, 9, 'a')},
		{"huge length", []byte{0xff, 0xff, 0xff, 0xff, 'a'}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := openPebbleLog(t, 10)
			if err := l.Append(tc.b); !errors.Is(err, errBadFrame) {
				t.Fatalf("Append: %v, want errBadFrame", err)
			}
			if l.next != 1 {
				t.Fatalf("next index %d after a refused frame, want 1", l.next)
			}
			for _, p := range []byte{'l', 'k', 'm'} {
				if keys, _ := scanPrefix(t, l.db, p); len(keys) != 0 {
					t.Fatalf("%d keys under %q after a refused frame", len(keys), p)
				}
			}
		})
	}
}

// The state floor logs each frame to the file and then writes, per
// request, a history record at its index and a state write; the history
// is never truncated (kvd's grows until a compaction).
func TestStateLogWritesLogThenStateAndHistory(t *testing.T) {
	path := filepath.Join(t.TempDir(), "log")
	l, err := OpenStateLog(path, 10, false)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	req := frame(slices.Repeat([][]byte{[]byte("x")}, 100)...)
	total := pebbleTruncateEvery + pebbleKeepEntries
	for range total / 100 {
		if err := l.Append(req); err != nil {
			t.Fatal(err)
		}
	}
	head := make([]byte, len(req))
	if _, err := l.log.f.ReadAt(head, 0); err != nil || !bytes.Equal(head, req) {
		t.Fatalf("file log starts %x (%v), want the first frame", head[:8], err)
	}
	keys, vals := scanPrefix(t, l.state.db, 'w')
	if len(keys) != total {
		t.Fatalf("%d history records after %d writes, want all", len(keys), total)
	}
	for i, k := range keys {
		if idx := binary.BigEndian.Uint64(k[1:]); idx != uint64(i+1) || string(vals[i]) != "x" {
			t.Fatalf("history record %d: index %d, %q", i, idx, vals[i])
		}
	}
	if keys, _ = scanPrefix(t, l.state.db, 'k'); len(keys) == 0 || len(keys) > 10 {
		t.Fatalf("%d state keys over a key set of 10", len(keys))
	}
	if keys, _ = scanPrefix(t, l.state.db, 'l'); len(keys) != 0 {
		t.Fatalf("%d log entries in the state database", len(keys))
	}
}

// runSmall runs a small floor of cfg's kind in a fresh directory, which
// it returns with the result.
func runSmall(t *testing.T, cfg Config) (string, Result) {
	t.Helper()
	cfg.Dir, cfg.Clients, cfg.Keys, cfg.Command = t.TempDir(), 4, 500, nodeCommand
	cfg.Warmup, cfg.Duration = 100*time.Millisecond, 500*time.Millisecond
	res, err := Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if res.Ops == 0 || res.Pebble != cfg.Pebble || res.State != cfg.State {
		t.Fatalf("ops %d, pebble %t, state %t", res.Ops, res.Pebble, res.State)
	}
	return cfg.Dir, res
}

// With Pebble, every node's log is a Pebble database holding the clients'
// requests as entries.
func TestRunPebble(t *testing.T) {
	dir, _ := runSmall(t, Config{Pebble: true})
	for i := range 3 {
		db, err := pebble.Open(filepath.Join(dir, fmt.Sprintf("log%d", i)), &pebble.Options{ErrorIfNotExists: true})
		if err != nil {
			t.Fatalf("node %d: %v", i, err)
		}
		_, vals := scanPrefix(t, db, 'l')
		db.Close()
		if len(vals) == 0 || len(vals[0]) != 16+256 {
			t.Fatalf("node %d: %d entries, want requests of %d bytes", i, len(vals), 16+256)
		}
	}
}

// With State, every node logs to its file and keeps a Pebble database of
// state and history beside it. (The nodes are killed, and Pebble runs
// without its log: what they wrote there is not on disk.)
func TestRunState(t *testing.T) {
	dir, _ := runSmall(t, Config{State: true})
	for i := range 3 {
		log := filepath.Join(dir, fmt.Sprintf("log%d", i))
		db, err := pebble.Open(log+".state", &pebble.Options{ErrorIfNotExists: true})
		if err != nil {
			t.Fatalf("node %d: %v", i, err)
		}
		db.Close()
		raw, err := os.ReadFile(log)
		if err != nil {
			t.Fatal(err)
		}
		if n := binary.BigEndian.Uint32(raw); n != 16+256 {
			t.Fatalf("node %d: the log begins with a request of %d bytes, want %d", i, n, 16+256)
		}
	}
}
