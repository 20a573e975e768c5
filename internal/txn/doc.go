// Package txn is kvd's transaction: etcd's TxnRequest (compares on keys or
// ranges, then one list of operations or the other, whose operations are
// puts, deletes of a key or a range, reads of a key or a range, and
// transactions), its binary encoding, its limits and its evaluation
// against the applied state.
//
// One encoding serves both the client RPC (the body of a wire.OpTxn
// request) and the Raft log (the body of a txn command, internal/kv/command.go),
// so the server checks exactly what the log will hold, and every node
// decodes and evaluates the same bytes. Compare-and-swap is a transaction
// too: one mod revision compare and one PUT or DELETE; so is a PUT with a
// lease or with ignore_value / ignore_lease.
//
// # Semantics
//
// A transaction is evaluated when its entry is applied, on every node,
// against the applied state: never when it is proposed. Its compares are
// all true or the transaction did not succeed; then Then (succeeded) or
// Else (not) runs, its operations in order, each seeing the writes made
// before it on the path that runs (its branch, and the branches of the
// transactions nested in it, in order). Compares test what etcd's do: a
// key's mod_revision, version (writes since its creation),
// create_revision or lease, each 0 for an absent key, so "create = 0"
// means "does not exist"; a value compare on an absent key is false
// whatever its operator (as in etcd: an absent value is not the empty
// value). A compare with a RangeEnd holds if it holds for every key of
// the range; on a range without keys it compares the absent key, as
// etcd's does. Every PUT of the transaction gets the same revision, the
// transaction's, and so does every nested response.
//
// Range ends read as etcd's range_end: empty, the key alone; "\x00", every
// key from the key on; else the keys k with key <= k < end (none if end <=
// key). A DeleteRange returns how many keys it deleted and, with PrevKV,
// them (internal/kv's range delete uses the same CollectDeletes, and its
// bounds). A Range is the one range evaluation (internal/rangeq) over the
// path's view: etcd's count (every key of the range), limit, keys only,
// count only, sort and revision filters; a Range with a revision of its
// own reads the history instead, the state at that revision as committed
// before the transaction (none of the path's writes), as etcd's range at
// a revision in a transaction does. A Nested operation is a
// transaction whose compares are evaluated when it is reached; its
// response is its result.
//
// Validate applies etcd's request checks. The operation limit is etcd's
// --max-txn-ops as etcd counts it: the longest of a transaction's compares,
// Then and Else may hold MaxOps entries, and a nested transaction's lists
// what the longest list of its parent leaves ("too many operations in txn
// request"). etcd's duplicate-key rule (checkIntervals) is checked on each
// branch when the request arrives, over both branches of every nested
// transaction whether or not they will run: no key is put twice, and no
// key is put that a delete of the same list or of an earlier nested
// transaction covers ("duplicate key given in txn request"); a key put in
// both branches of one nested transaction is not a duplicate, and a key
// may be deleted twice. A Put with IgnoreValue carries no value and one
// with IgnoreLease no lease ("value is provided", "lease is provided").
//
// Apply evaluates the whole path before it writes anything, so a path
// that fails when applied writes nothing and takes no revision, on every
// node alike: one whose reads would return more than MaxReadBytes of keys
// and values or whose response would exceed MaxResponseBytes
// (ErrReadTooLarge), a DeleteRange over its bounds
// (ErrDeleteRangeTooLarge), a PUT of a lease that does not exist or is
// full (ErrLeaseNotFound, ErrLeaseFull), a PUT with IgnoreValue or
// IgnoreLease of a key that does not exist (ErrKeyNotFound, etcd's "key
// not found"), a Range at a compacted revision or one past the store's
// before the transaction (errs.ErrCompacted, errs.ErrFutureRevision).
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
//	        | target|0x80:u8 cmp:u8 keyLen:u16 key bodyLen:u32 endLen:u16 end operand
//	                                    (a compare on a range; end is not empty)
//	op      = type:u8 keyLen:u16 bodyLen:u32 key body
//	          type 1 put:           body = value
//	          type 2 delete, 3 get: body empty
//	          type 4 put:           body = lease:u64 value     (lease not 0)
//	          type 8 put:           body = flags:u8 lease:u64 value
//	                                flags: 1 ignore_value, 2 ignore_lease (not 0)
//	          type 5 delete range:  body = flags:u8 end        flags: 1 prev_kv
//	          type 6 txn:           key empty; body = txn      (nested)
//	          type 7 range:         body = a rangeq request (internal/rangeq)
//	                                whose start is empty (it is key) and whose
//	                                end is the range end as above
//
//	response = succeeded:u8 nCompares:u16 mod:u64{nCompares} nResults:u16 result{nResults}
//	           revision:u64 rest{nCompares} rest{nResults}
//	result   = type:u8 found:u8 mod:u64 bodyLen:u32 body
//	           type 1, 2, 3:  body = the value (a get's)
//	           type 5:        body = deleted:u64 kvs
//	           type 6:        body = response (the nested one, with its revision)
//	           type 7:        body = count:u64 more:u8 kvs
//	kvs      = n:u32 kv{n}
//	kv       = keyLen:u16 valueLen:u32 key value mod:u64 create:u64 version:u64 lease:u64
//	rest     = create:u64 version:u64 lease:u64
//
// A response's compare metadata is what the compared keys had when the
// transaction was evaluated (0: absent; a range compare: the first key it
// failed on), so that a failed compare-and-swap can say what it met. The
// revision and the rest of each Meta follow as an extension, which a
// response from a kvd before revisions lacks (its decoding leaves them 0).
// Numbers (targets, comparisons, op types, flags) are appended, never
// reused: a Put without a lease or options still encodes as type 1, and
// every new compare and operation keeps the first encoding's frame under
// a number it did not know, so a kvd built before them parses the
// transaction and refuses it as invalid ("unknown target 131", "unknown
// operation 5"; a nested transaction, whose key is empty: "empty key")
// rather than misreading it. A response carries the new result types only
// for the new operations, which an older client never sends.
package txn
