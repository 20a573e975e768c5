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
