package bench

import (
	"context"
	"testing"
	"time"

	"github.com/kvd-project/kvd/bench/workload"
)

// The CAS workload reads each key's version and writes it back on that
// condition: one client never conflicts with itself; many on a few keys
// do, and a conflict is counted as such, not as an error. Every CAS that
// succeeded bumped its key's version once, so the versions add up.
func TestCASWorkload(t *testing.T) {
	for _, tc := range []struct {
		clients, keys int
		conflicts     bool
	}{{1, 50, false}, {16, 2, true}} {
		f := newFake()
		r := newRunner(t, Config{}, f, f.another(), f.another(), f.another())
		w := workload.Config{Mix: workload.CASOnly, Keys: tc.keys, KeySize: 8, ValueSize: 16}
		run, err := r.Run(context.Background(), Point{Workload: w, Clients: tc.clients, Duration: 200 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		if run.Mix != "cas" || run.Gets != 0 || run.Puts == 0 || run.Errors != 0 {
			t.Fatalf("%d clients: mix %q, %d gets, %d CAS, %d errors; want only CASes, no errors", tc.clients, run.Mix, run.Gets, run.Puts, run.Errors)
		}
		if (run.Conflicts > 0) != tc.conflicts || run.Conflicts >= run.Puts {
			t.Fatalf("%d clients on %d keys: %d conflicts in %d CASes", tc.clients, tc.keys, run.Conflicts, run.Puts)
		}
		// The fake's versions count the CASes that succeeded, warmup and
		// edges included, so at least the measured ones.
		if won := f.next; won < run.Puts-run.Conflicts {
			t.Fatalf("%d CASes applied; the run counted %d successes", won, run.Puts-run.Conflicts)
		}
		t.Logf("%d clients on %d keys: %d CASes, %d conflicts", tc.clients, tc.keys, run.Puts, run.Conflicts)
	}
}

func TestParseCASMix(t *testing.T) {
	m, err := workload.ParseMix("cas")
	if err != nil || m != workload.CASOnly || m.String() != "cas" {
		t.Fatalf("ParseMix(cas) = %v (%s), %v", int(m), m, err)
	}
	c := workload.Config{Mix: m}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	if op, _ := workload.New(c, 1, 1).Next(); op != workload.CAS {
		t.Fatalf("a CAS mix drew %v", op)
	}
}
