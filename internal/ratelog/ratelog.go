package ratelog

import (
	"sync"
	"time"
)

// DefaultEvery is the interval of a Limiter whose Every is zero.
const DefaultEvery = 10 * time.Second

// Limiter lets one line per key through per Every. The zero value is ready
// to use; it is safe for concurrent use.
type Limiter struct {
	Every time.Duration

	mu         sync.Mutex
	next       map[string]time.Time
	suppressed map[string]int
}

// Allow reports whether a line for key may be logged now and, if so, how
// many lines for key were held back since the last one.
func (l *Limiter) Allow(key string, now time.Time) (ok bool, held int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.next == nil {
		l.next, l.suppressed = map[string]time.Time{}, map[string]int{}
	}
	if now.Before(l.next[key]) {
		l.suppressed[key]++
		return false, 0
	}
	every := l.Every
	if every <= 0 {
		every = DefaultEvery
	}
	held = l.suppressed[key]
	l.next[key], l.suppressed[key] = now.Add(every), 0
	return true, held
}
