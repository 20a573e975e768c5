package ratelog

import (
	"testing"
	"time"
)

func TestLimiter(t *testing.T) {
	var l Limiter
	now := time.Now()
	if ok, _ := l.Allow("x", now); !ok {
		t.Fatal("first line held back")
	}
	for i := 1; i <= 5; i++ {
		if ok, _ := l.Allow("x", now.Add(time.Duration(i)*time.Second)); ok {
			t.Fatalf("line %d within the interval let through", i)
		}
	}
	if ok, _ := l.Allow("y", now); !ok {
		t.Fatal("another key held back")
	}
	if ok, held := l.Allow("x", now.Add(DefaultEvery)); !ok || held != 5 {
		t.Fatalf("after the interval: ok %v held %d, want true 5", ok, held)
	}
	fast := Limiter{Every: time.Second}
	fast.Allow("x", now)
	if ok, _ := fast.Allow("x", now.Add(time.Second)); !ok {
		t.Fatal("Every not honoured")
	}
}
