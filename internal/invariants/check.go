package invariants

import "fmt"

// Check panics with the formatted message if cond is false and invariants
// are enabled. Callers still guard expensive conditions with Enabled.
func Check(cond bool, format string, args ...any) {
	if Enabled && !cond {
		panic("kvd invariant violated: " + fmt.Sprintf(format, args...))
	}
}
