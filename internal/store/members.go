package store

import (
	"cmp"
	"encoding/binary"
	"fmt"
	"slices"
)

// Member is one entry of the address book.
type Member struct {
	ID        uint64
	Addr      string
	IsLearner bool
	// Removed marks a tombstone: id was a member and was removed, and is
	// never a member again (as in etcd). An id names one node's log and
	// votes for good: the removed node may still run with them, or its id
	// be handed to a new, empty node whose acknowledgements would count
	// for what the old one acknowledged. Tombstones are stored and carried
	// in snapshots with the book, but the book's readers (Members, Member,
	// NumMembers) never see one; Removed reports them.
	Removed bool
}

// Member flags, the first byte of a member's stored form.
const (
	memberVoter   = 0
	memberLearner = 1
	memberRemoved = 2 // a tombstone: no address follows
)

func encodeMember(m Member) []byte {
	if m.Removed {
		return []byte{memberRemoved}
	}
	b := make([]byte, 1, 1+len(m.Addr))
	if m.IsLearner {
		b[0] = memberLearner
	}
	return append(b, m.Addr...)
}

func decodeMember(id uint64, b []byte) (Member, error) {
	switch {
	case len(b) < 1 || b[0] > memberRemoved:
	case b[0] == memberRemoved && len(b) == 1:
		return Member{ID: id, Removed: true}, nil
	case b[0] != memberRemoved:
		return Member{ID: id, Addr: string(b[1:]), IsLearner: b[0] == memberLearner}, nil
	}
	return Member{}, fmt.Errorf("%w: member %d", ErrCorrupt, id)
}

// EncodeMembers is the form the address book takes inside a raft snapshot's
// Data, so a node installing the snapshot learns every member's address.
// Members are encoded in id order.
func EncodeMembers(ms []Member) []byte {
	ms = slices.Clone(ms)
	slices.SortFunc(ms, func(a, b Member) int { return cmp.Compare(a.ID, b.ID) })
	b := binary.AppendUvarint(nil, uint64(len(ms)))
	for _, m := range ms {
		b = binary.AppendUvarint(b, m.ID)
		enc := encodeMember(m)
		b = binary.AppendUvarint(b, uint64(len(enc)))
		b = append(b, enc...)
	}
	return b
}

// minMemberLen is the least a member takes in EncodeMembers' form: a
// one-byte id, a one-byte record length and the flags.
const minMemberLen = 3

// DecodeMembers reverses EncodeMembers. Empty input is an empty book.
func DecodeMembers(b []byte) ([]Member, error) {
	if len(b) == 0 {
		return nil, nil
	}
	n, k := binary.Uvarint(b)
	// Every member takes at least minMemberLen bytes: the count is checked
	// against what the bytes can hold before it sizes anything.
	if k <= 0 || n > uint64(len(b)-k)/minMemberLen {
		return nil, fmt.Errorf("%w: member list header", ErrCorrupt)
	}
	b = b[k:]
	ms := make([]Member, 0, min(n, 16)) // a cluster has a few: grown as they decode
	for range n {
		id, k := binary.Uvarint(b)
		if k <= 0 {
			return nil, fmt.Errorf("%w: member id", ErrCorrupt)
		}
		b = b[k:]
		l, k := binary.Uvarint(b)
		if k <= 0 || l > uint64(len(b)-k) {
			return nil, fmt.Errorf("%w: member record", ErrCorrupt)
		}
		m, err := decodeMember(id, b[k:k+int(l)])
		if err != nil {
			return nil, err
		}
		ms = append(ms, m)
		b = b[k+int(l):]
	}
	if len(b) != 0 {
		return nil, fmt.Errorf("%w: %d trailing bytes after member list", ErrCorrupt, len(b))
	}
	return ms, nil
}
