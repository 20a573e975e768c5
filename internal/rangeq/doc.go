// Package rangeq is kvd's range read: etcd's RangeRequest (a key range,
// a revision, a limit, a sort, revision filters, keys only, count only),
// its one binary encoding, and its one evaluation.
//
// The evaluation (Eval) runs over any Source that visits (key, value,
// meta) in key order: the applied state in Pebble, the history at a
// revision, or a transaction's Update, so that a scan (wire.OpScan) and a
// range read inside a transaction answer alike. One encoding serves the
// body of an OpScan request and a range operation embedded in a
// transaction.
//
// # Semantics
//
// As etcd's (server/etcdserver/txn/range.go), with one difference below:
//
//   - The filters keep the keys whose mod revision lies in [MinMod,
//     MaxMod] and whose create revision lies in [MinCreate, MaxCreate]; a
//     bound of 0 is no bound.
//   - Sort target KEY with order NONE or ASCEND is key order, ascending;
//     DESCEND is descending key order. Any other target with NONE is
//     ASCEND. Ties (same version, create or mod revision, or value) come
//     in ascending key order: etcd leaves their order unspecified.
//   - Count is the number of keys in the range at the revision, whatever
//     the filters and the limit (etcd counts before it filters), when the
//     request sets Total or CountOnly; a page without them counts its own
//     entries. More says that matching entries remain after the ones
//     returned.
//   - KeysOnly leaves the values out (a sort by value still sorts by
//     them); CountOnly returns no entries and More is false.
//
// The difference: etcd, given a target other than KEY with order NONE
// and no filter, applies the limit before the sort it defaults to, so it
// sorts only the first limit+1 keys of the range; kvd sorts the whole
// range, as it does (and etcd does) with ASCEND given explicitly: a sorted
// answer should not depend on how the caller spelled its order.
//
// # Paging
//
// One result is bounded (Bounds: a reply's keys and bytes, at least one
// entry when one remains). In key order a read pages statelessly, as kvd's
// scans always have: ascending, the following page starts at Next;
// descending, it ends (exclusively) at Next. A descending page walks the
// range from its start, keeping only the last page's worth. A read sorted
// by another target holds every matching key in memory, bounded by
// Bounds.SortKeys and SortBytes (limits.MaxSortKeys, MaxSortBytes; past
// them it fails with ErrTooLarge), sorts it, and returns the entries from
// Offset on: the following page asks for Offset plus the entries received.
// The client reads every page at the first one's revision, so the pages
// are one snapshot and one order.
//
// # Encoding
//
// All integers little-endian; the lengths must account for every byte:
//
//	request = flags:u8 limit:u32 startLen:u16 start endLen:u16 end [rev:u64 [ext]]
//	ext     = target:u8 order:u8 minMod:u64 maxMod:u64 minCreate:u64 maxCreate:u64 offset:u32
//	flags   = 1 keys only | 2 count only | 4 meta (the reply carries each entry's
//	          whole revision.Meta) | 8 total (Count is the range's, not the page's) |
//	          16 current (the reply carries the store's current revision too)
//
// rev is present when it is not 0 or when ext follows; ext is present
// when it asks for something (Request.Extended), and only then. Targets
// and orders are etcd's numbers (target 0 key, 1 version, 2 create, 3
// mod, 4 value; order 0 none, 1 ascend, 2 descend). A kvd that predates
// ext, the total or the current flag refuses a request with one
// (trailing bytes, an unknown flag) instead of ignoring it. Flags are
// added, never reused.
package rangeq
