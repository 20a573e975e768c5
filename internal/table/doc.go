// Package table owns the table region's binary layout (docs/layout.md): the
// server-side writer that lays a key/value table out in registered memory,
// and the pure functions a client needs to find and verify records in bytes
// it READ remotely.
//
// The package works on []byte and imports no transport. The writer (Table)
// is driven by one goroutine at a time; its readers are remote, take no
// locks, and may observe any write half done. Everything they need to tell
// a good read from a torn, stale or reused one is in the bytes: checksummed
// immutable records, slot words published with single atomic stores, and a
// grace period during which a superseded record's bytes are left untouched.
//
// Space in the record area comes from a coalescing allocator (alloc.go),
// superseded records wait in limbo for the grace period before their space
// is reused, and Compact gathers free space that live records cut up
// (compact.go). A new key may move others between their two buckets to
// make room, in a way readers cannot mistake for a miss (place.go), and a
// server admits writes with Reserve, which sets their space aside until
// they are applied (reserve.go). The writer keeps no index of keys: it
// finds them in the region's own buckets, as readers do.
//
// Reader-side functions (ParseHeader, Hash, Buckets, Fingerprint,
// ScanBucket, DecodeSlot, VerifyRecord) do not allocate and return bare
// sentinel errors, so a client's retry path stays allocation-free.
package table
