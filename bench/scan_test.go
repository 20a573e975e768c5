package bench

import (
	"context"
	"testing"
	"time"

	"github.com/kvd-project/kvd/bench/workload"
)

// The scan workload (YCSB-E): about 95% of operations are scans, counted
// as reads and in Scans, with lengths within 1..ScanLength; the rest are
// inserts of keys past the preloaded ones. Concurrent clients share the
// fake; run with -race.
func TestScanWorkload(t *testing.T) {
	f := newFake()
	r := newRunner(t, Config{}, f, f.another(), f.another(), f.another())
	w := workload.Config{Mix: workload.ScanInsert, Keys: 200, KeySize: 8, ValueSize: 16, ScanLength: 10}
	if err := r.Preload(context.Background(), w); err != nil {
		t.Fatal(err)
	}
	run, err := r.Run(context.Background(), Point{Workload: w, Clients: 4, Duration: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if run.Mix != "scan" || run.Scans == 0 || run.Scans != run.Gets || run.Puts == 0 || run.Errors != 0 {
		t.Fatalf("mix %q: %d scans, %d gets, %d inserts, %d errors; want scans (all reads) and inserts, no errors",
			run.Mix, run.Scans, run.Gets, run.Puts, run.Errors)
	}
	if pct := 100 * float64(run.Scans) / float64(run.Ops); pct < 85 || pct > 99.5 {
		t.Errorf("%.1f%% of operations were scans, want about %d%%", pct, workload.ScanPercent)
	}
	if per := float64(run.ScanKeys) / float64(run.Scans); per < 1 || per > 10 {
		t.Errorf("%.1f keys per scan, want within 1..10", per)
	}
	f.mu.RLock()
	n := len(f.data)
	f.mu.RUnlock()
	if n <= 200 {
		t.Errorf("%d keys after the run: the inserts added none past the 200 preloaded", n)
	}
}

func TestParseScanMix(t *testing.T) {
	for _, s := range []string{"scan", "ycsb-e", "e"} {
		m, err := workload.ParseMix(s)
		if err != nil || m != workload.ScanInsert || m.String() != "scan" {
			t.Fatalf("ParseMix(%s) = %v (%s), %v", s, int(m), m, err)
		}
	}
	c := workload.Config{Mix: workload.ScanInsert, Keys: 100, KeySize: 4, ScanLength: 5}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	g := workload.New(c, 1, 1)
	scans := 0
	for range 1000 {
		op, idx := g.Next()
		switch op {
		case workload.Scan:
			scans++
			if idx >= c.Keys {
				t.Fatalf("a scan from key %d, past the %d preloaded", idx, c.Keys)
			}
			if n := g.ScanLen(); n < 1 || n > 5 {
				t.Fatalf("scan length %d outside 1..5", n)
			}
		case workload.Put:
			if idx < c.Keys || idx >= 2*c.Keys {
				t.Fatalf("an insert of key %d, want one in [%d, %d)", idx, c.Keys, 2*c.Keys)
			}
		default:
			t.Fatalf("a scan mix drew %v", op)
		}
	}
	if scans < 900 || scans > 990 {
		t.Errorf("%d scans in 1000 operations, want about 950", scans)
	}
	for _, bad := range []workload.Config{
		{Mix: workload.ScanInsert, Keys: 100, KeySize: 3}, // cannot name key 199
		{Mix: workload.ScanInsert, ScanLength: workload.MaxScanLength + 1},
	} {
		if err := bad.Validate(); err == nil {
			t.Errorf("Validate(%+v) accepted it", bad)
		}
	}
}
