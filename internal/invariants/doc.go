// Package invariants switches on expensive self-checks in tests.
//
// Enabled is true in builds with the race detector (every `go test -race`,
// which is how `make test` runs) or with the `invariants` build tag, and
// false otherwise, so the checks cost nothing in production builds: code
// guards them with `if invariants.Enabled`, which the compiler removes.
// A failed check panics: it means kvd's own code broke a rule another part
// of kvd relies on (for example, the table writer touching a record that a
// remote reader may still be reading), never bad input from outside.
package invariants
