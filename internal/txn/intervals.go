package txn

import (
	"bytes"
	"fmt"
	"slices"
)

// span is the keys k with start <= k < end (end nil: no bound).
type span struct{ start, end []byte }

// opSpan is the keys a DeleteRange (or a Range) covers, as etcd reads
// range_end: empty, Key alone; "\x00", every key from Key on.
func opSpan(key, rangeEnd []byte) span {
	switch {
	case len(rangeEnd) == 0:
		return span{key, append(append(make([]byte, 0, len(key)+1), key...), 0)}
	case len(rangeEnd) == 1 && rangeEnd[0] == 0:
		return span{key, nil}
	}
	return span{key, rangeEnd}
}

func (s span) contains(k []byte) bool {
	return bytes.Compare(k, s.start) >= 0 && (s.end == nil || bytes.Compare(k, s.end) < 0)
}

// empty reports whether s holds no key.
func (s span) empty() bool { return s.end != nil && bytes.Compare(s.start, s.end) >= 0 }

// spans is a set of key spans.
type spans []span

func (ss spans) contains(k []byte) bool {
	for _, s := range ss {
		if s.contains(k) {
			return true
		}
	}
	return false
}

// checkIntervals applies etcd's rule on duplicate keys to a branch, as
// etcd checks it when the request arrives, over both branches of every
// nested transaction (not only the one that will run): no key is put
// twice, and no key is put that a DELETE of the branch, or of a nested
// transaction before, covers. A key put in both branches of a nested
// transaction counts once (only one of them runs). It returns the keys
// the branch puts and the spans it deletes, for its parent's check.
func checkIntervals(ops []Op) (puts map[string]struct{}, dels spans, err error) {
	for i := range ops {
		if op := &ops[i]; op.Type == Delete || op.Type == DeleteRange {
			if s := opSpan(op.Key, op.RangeEnd); !s.empty() {
				dels = append(dels, s)
			}
		}
	}
	puts = make(map[string]struct{})
	for i := range ops {
		op := &ops[i]
		if op.Type != Nested || op.Txn == nil {
			continue
		}
		putsThen, delsThen, err := checkIntervals(op.Txn.Then)
		if err != nil {
			return nil, nil, err
		}
		putsElse, delsElse, err := checkIntervals(op.Txn.Else)
		if err != nil {
			return nil, nil, err
		}
		for _, k := range sortedStrings(putsThen) {
			if _, ok := puts[k]; ok || dels.contains([]byte(k)) {
				return nil, nil, fmt.Errorf("%w: %q", ErrDuplicateKey, k)
			}
			puts[k] = struct{}{}
		}
		for _, k := range sortedStrings(putsElse) {
			_, dup := puts[k]
			_, inThen := putsThen[k]
			if dup && !inThen || dels.contains([]byte(k)) {
				return nil, nil, fmt.Errorf("%w: %q", ErrDuplicateKey, k)
			}
			puts[k] = struct{}{}
		}
		dels = append(append(dels, delsThen...), delsElse...)
	}
	for i := range ops {
		if op := &ops[i]; op.Type == Put {
			if _, ok := puts[string(op.Key)]; ok || dels.contains(op.Key) {
				return nil, nil, fmt.Errorf("%w: %q", ErrDuplicateKey, op.Key)
			}
			puts[string(op.Key)] = struct{}{}
		}
	}
	return puts, dels, nil
}

// sortedStrings is m's keys in order, so that the key an error names is
// the same on every run.
func sortedStrings(m map[string]struct{}) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
