// Package errs owns kvd's sentinel errors and the one table that turns them
// into wire statuses and back.
//
// Each sentinel is declared here once; the packages that return or export
// one (client, raft, internal/table, internal/txn, ...) refer to it, or
// re-export it as a variable of their own (client.ErrNotFound =
// errs.ErrNotFound), so errors.Is holds across the packages and a
// message reads the same wherever it comes from. A package that wants to
// say more wraps the sentinel: fmt.Errorf("%w: %d bytes", errs.ErrValueTooLarge, n).
//
// A lower layer's own error that a client must see as one of these
// (a taken lease id is a bad request; a dropped proposal may be retried)
// is declared with Classed, so the layer states what its error means
// without knowing the wire.
//
// The {sentinel, wire status} table (wire.go) is the only place statuses
// meet errors: the server encodes an error with Encode, the client decodes
// a response with Decode. A new status is a row there (and its constant in
// internal/wire); the wire format is internal/wire's.
package errs
