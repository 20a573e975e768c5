package monoclock

import (
	"testing"
	"time"
)

func TestMonotonicAndPositive(t *testing.T) {
	a := Now()
	time.Sleep(time.Millisecond)
	b := Now()
	if a <= 0 || b <= a {
		t.Fatalf("clock not increasing: %d then %d", a, b)
	}
	if At(origin.Add(-time.Hour)) != 1 {
		t.Fatalf("times before the origin must map to 1")
	}
	if d := At(origin.Add(time.Second)); d != int64(time.Second) {
		t.Fatalf("At(origin+1s) = %d", d)
	}
}

// TestRawIsTimesClock: Raw runs with the monotonic clock time.Now reads.
func TestRawIsTimesClock(t *testing.T) {
	r0, t0 := Raw(), time.Now()
	time.Sleep(10 * time.Millisecond)
	t1, r1 := time.Now(), Raw()
	if d, dr := t1.Sub(t0), time.Duration(r1-r0); dr < d {
		t.Fatalf("Raw advanced %v over an interval inside which time.Now advanced %v", dr, d)
	}
}
