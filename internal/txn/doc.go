// Package txn is kvd's transaction: etcd's shape (compares on any keys, then
// one list of operations or the other), its binary encoding, its limits and
// its evaluation against the applied state.
//
// One encoding serves both the client RPC (the body of a wire.OpTxn
// request) and the Raft log (the body of a txn command, internal/kv/command.go),
// so the server checks exactly what the log will hold, and every node
// decodes and evaluates the same bytes. Compare-and-swap is a transaction
// too: one mod revision compare and one PUT or DELETE.
//
// # Semantics
//
// A transaction is evaluated when its entry is applied, on every node,
// against the applied state: never when it is proposed. Its compares are
// all true or the transaction did not succeed; then Then (succeeded) or
// Else (not) runs, its operations in order, a GET seeing the writes made
// before it in the same branch. Compares test what etcd's do: a key's
// mod_revision, version (writes since its creation), create_revision or
// lease, each 0 for an absent key, so "create = 0" means "does not exist";
// a value compare on an absent key is false whatever its operator (as in
// etcd: an absent value is not the empty value). Every PUT of the
// transaction gets the same revision, the transaction's.
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
//	          operand = num:u64              (target 1 mod, 3 version, 4 create, 5 lease)
//	                  | valueLen:u32 value   (target 2, value)
//	op      = type:u8 keyLen:u16 valueLen:u32 key value   (type 1 put, 2 delete, 3 get)
//	        | 4:u8 keyLen:u16 valueLen:u32 key lease:u64 value
//	                                    (a put with a lease; valueLen counts the lease)
//
//	response = succeeded:u8 nCompares:u16 mod:u64{nCompares} nResults:u16 result{nResults}
//	           revision:u64 rest{nCompares} rest{nResults}
//	result   = type:u8 found:u8 mod:u64 valueLen:u32 value
//	rest     = create:u64 version:u64 lease:u64
//
// A response's compare metadata is what the compared keys had when the
// transaction was evaluated (0: absent), so that a failed compare-and-swap
// can say what it met. The revision and the rest of each Meta follow as
// an extension, which a response from a kvd before revisions lacks (its
// decoding leaves them 0). Numbers (targets, comparisons, op
// types) are appended, never reused.
package txn
