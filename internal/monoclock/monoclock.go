package monoclock

import "time"

// origin is the process's clock origin; time.Since and Time.Sub on values
// from time.Now use the monotonic reading, so wall-clock steps never move
// this clock.
var origin = time.Now()

// Now is the process's monotonic time in nanoseconds, always > 0.
func Now() int64 { return At(time.Now()) }

// At converts t (which must come from time.Now in this process, so that it
// carries a monotonic reading) to this clock. Times before the origin map
// to 1, so that 0 can mean "none".
func At(t time.Time) int64 {
	return max(int64(t.Sub(origin)), 1)
}
