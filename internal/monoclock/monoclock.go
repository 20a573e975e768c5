package monoclock

import (
	"time"
	_ "unsafe" // for go:linkname
)

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

// Raw reads the Go runtime's monotonic clock (the one time.Now's monotonic
// reading comes from), in nanoseconds from an arbitrary origin. It makes
// one clock_gettime(CLOCK_MONOTONIC) where time.Now makes two (it reads the
// wall clock as well): where the kernel's clock source has no vDSO fast
// path (HPET, as in a QEMU/TCG guest) each is a system call, and a one-sided
// GET reads the clock twice.
func Raw() int64 { return nanotime() }

// runtime.nanotime is one of the runtime functions it keeps linkable for
// outside use (go.dev/issue/67401).
//
//go:linkname nanotime runtime.nanotime
func nanotime() int64
