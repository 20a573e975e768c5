// Package txn is kvd's transaction: etcd's shape (compares on any keys, then
// one list of operations or the other), its binary encoding, its limits and
// its evaluation against the applied state.
//
// One encoding serves both the client RPC (the body of a wire.OpTxn
// request) and the Raft log (the body of a txn command, internal/kv/command.go),
// so the server checks exactly what the log will hold, and every node
// decodes and evaluates the same bytes. Compare-and-swap is a transaction
// too: one version compare and one PUT or DELETE.
//
// # Semantics
//
// A transaction is evaluated when its entry is applied, on every node,
// against the applied state: never when it is proposed. Its compares are
// all true or the transaction did not succeed; then Then (succeeded) or
// Else (not) runs, its operations in order, a GET seeing the writes made
// before it in the same branch. A version compare takes an absent key's
// version as 0, so "version = 0" means "does not exist"; a value compare
// on an absent key is false whatever its operator (as in etcd: an absent
// value is not the empty value). Every PUT of the transaction gets the
// same version, the entry's Raft index.
//
// A branch whose GETs would return more than MaxReadBytes of values
// together fails as a whole (ErrReadTooLarge) and applies nothing, so a
// reply always fits a message; the check is made on the applied state, so
// every node decides alike.
//
// # Encoding
//
// All integers little-endian; the lengths must account for every byte
// (trailing bytes are an error):
//
//	txn     = nCompares:u16 nThen:u16 nElse:u16 compare{nCompares} op{nThen} op{nElse}
//	compare = target:u8 cmp:u8 keyLen:u16 key operand
//	          operand = version:u64          (target 1, version)
//	                  | valueLen:u32 value   (target 2, value)
//	op      = type:u8 keyLen:u16 valueLen:u32 key value   (type 1 put, 2 delete, 3 get)
//	        | 4:u8 keyLen:u16 valueLen:u32 key lease:u64 value
//	                                    (a put with a lease; valueLen counts the lease)
//
//	response = succeeded:u8 nCompares:u16 version:u64{nCompares} nResults:u16 result{nResults}
//	result   = type:u8 found:u8 version:u64 valueLen:u32 value
//
// A response's compare versions are the versions the compared keys had
// when the transaction was evaluated (0: absent), so that a failed
// compare-and-swap can say what it met. Numbers (targets, comparisons, op
// types) are appended, never reused.
package txn
