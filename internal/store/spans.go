package store

import "github.com/cockroachdb/pebble/v2"

// tableRegionEnd is the store's Pebble SpanPolicyFunc: it uses the default
// policy everywhere and only tells Pebble where a table must end, so that
// no table holds keys of two regions. The regions are the key groups of
// the layout (doc.go): each prefix, and in the revision space each kind of
// record of a generation. It matters for the history's by-revision
// records and the raft log, whose keys only ever grow: in tables of their
// own, a flush's new ones overlap no older table, and Pebble moves them
// down the levels instead of rewriting them with the keys written all over
// the key space (the KV state, the history's index) at every compaction
// into the base level.
func tableRegionEnd(start []byte) (pebble.SpanPolicy, []byte, error) {
	switch {
	case len(start) == 0:
		return pebble.SpanPolicy{}, nil, nil
	case start[0] == prefixRev && len(start) > revKeyHeader:
		end := append([]byte(nil), start[:revKeyHeader+1]...)
		if end[revKeyHeader]++; end[revKeyHeader] == 0 { // kind 0xff
			return pebble.SpanPolicy{}, revGenEnd(beU64(start[1:revKeyHeader])), nil
		}
		return pebble.SpanPolicy{}, end, nil
	case start[0] == 0xff:
		return pebble.SpanPolicy{}, nil, nil
	}
	return pebble.SpanPolicy{}, []byte{start[0] + 1}, nil
}
