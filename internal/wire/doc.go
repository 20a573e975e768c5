// Package wire owns kvd's client RPC framing: the binary encoding of requests
// and responses carried, one per transport message, between a client and a
// server. It knows nothing of transports or tables.
//
// Every frame starts with a version byte (Version) so that a future format can
// be told apart and refused with a clear error. Many requests may be in flight
// on one connection; a response carries the id of its request and responses
// may arrive in any order.
//
//	request  = version:u8 op:u8 flags:u16 id:u64 keyLen:u16 valueLen:u32 key value
//	response = version:u8 op:u8 status:u16 id:u64 version:u64 valueLen:u32 value
//
// A transaction (OpTxn) carries its compares and operations in the
// request's value, encoded by internal/txn, which is also how the Raft log
// holds it. A range scan (OpScan) carries its bounds and options in the
// request's value and one page of keys in the response's value (scan.go).
// A watch (OpWatch) is answered many times on its request's id: a first
// message, then bounded batches of events, until a non-OK status or a
// cancel (OpWatchCancel) ends it (watch.go).
//
// All integers are little-endian. The lengths must account for the whole
// frame exactly: trailing bytes are an error. Limits on key and value sizes
// are the table's (internal/table); the decoder enforces only what keeps it
// safe (frame bounds), and the server enforces the rest with clear statuses.
package wire
