package etcdapi

import (
	"bytes"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
)

// keyRange is what one etcd watch covers, as kvd watches it: kvd watches
// a key or a prefix, so a range that is neither is watched as the
// longest prefix its keys share (every key k with start <= k < end
// starts with the common prefix of start and end) and its events are
// filtered to the range here.
type keyRange struct {
	start, end []byte // end nil: the key start alone; empty: every key >= start
	watchKey   []byte // the kvd watch's key
	prefix     bool   // the kvd watch is of a prefix
}

// rangeOf maps a create request's key and range_end with etcd's
// conventions: an empty key is "\x00", the smallest; an empty range_end
// the key alone; range_end "\x00" every key >= key. ok false: the range
// is empty (etcd refuses it).
func rangeOf(creq *pb.WatchCreateRequest) (r keyRange, ok bool) {
	r.start = creq.Key
	if len(r.start) == 0 {
		r.start = []byte{0}
	}
	switch end := creq.RangeEnd; {
	case len(end) == 0:
		r.watchKey = r.start
		return r, true
	case len(end) == 1 && end[0] == 0:
		r.end = []byte{}
		r.prefix = true // every key: the filter keeps those >= start
		return r, true
	case bytes.Compare(r.start, end) >= 0:
		return r, false
	default:
		r.end = end
		r.prefix = true
		r.watchKey = commonPrefix(r.start, end)
		return r, true
	}
}

func commonPrefix(a, b []byte) []byte {
	n := 0
	for n < len(a) && n < len(b) && a[n] == b[n] {
		n++
	}
	return a[:n:n]
}

// contains reports whether key is in the range.
func (r *keyRange) contains(key []byte) bool {
	switch {
	case r.end == nil:
		return bytes.Equal(key, r.start)
	case bytes.Compare(key, r.start) < 0:
		return false
	}
	return len(r.end) == 0 || bytes.Compare(key, r.end) < 0
}
