package wire

import (
	"encoding/binary"
	"fmt"
	"time"

	"github.com/kvd-project/kvd/internal/limits"
)

// LeaseGrant is an OpLeaseGrant request's Value:
//
//	le64 ttl (nanoseconds) | le64 id (0: the server picks one)
type LeaseGrant struct {
	TTL time.Duration
	ID  uint64
}

const leaseGrantLen = 16

// AppendLeaseGrant appends g's encoding to b.
func AppendLeaseGrant(b []byte, g *LeaseGrant) []byte {
	b = binary.LittleEndian.AppendUint64(b, uint64(g.TTL))
	return binary.LittleEndian.AppendUint64(b, g.ID)
}

// DecodeLeaseGrant parses an OpLeaseGrant request's Value.
func DecodeLeaseGrant(b []byte, g *LeaseGrant) error {
	if len(b) != leaseGrantLen {
		return fmt.Errorf("%w: lease grant of %d bytes (want %d)", ErrLength, len(b), leaseGrantLen)
	}
	ttl := binary.LittleEndian.Uint64(b)
	if ttl > 1<<63-1 {
		return fmt.Errorf("%w: lease TTL %d ns", ErrLength, ttl)
	}
	*g = LeaseGrant{TTL: time.Duration(ttl), ID: binary.LittleEndian.Uint64(b[8:])}
	return nil
}

// AppendLeaseID appends the Value of an OpLeaseRevoke, OpLeaseKeepAlive
// or OpLeaseTimeToLive request: le64 id.
func AppendLeaseID(b []byte, id uint64) []byte { return binary.LittleEndian.AppendUint64(b, id) }

// DecodeLeaseID parses such a Value; the id is never 0.
func DecodeLeaseID(b []byte) (uint64, error) {
	if len(b) != 8 {
		return 0, fmt.Errorf("%w: lease id of %d bytes (want 8)", ErrLength, len(b))
	}
	id := binary.LittleEndian.Uint64(b)
	if id == 0 {
		return 0, fmt.Errorf("%w: lease id 0", ErrLength)
	}
	return id, nil
}

// AppendLeaseRenewal appends the Value of an OpLeaseKeepAlive response:
// le64 store revision.
func AppendLeaseRenewal(b []byte, rev uint64) []byte { return binary.LittleEndian.AppendUint64(b, rev) }

// DecodeLeaseRenewal parses such a Value: the store revision, or 0 if
// the Value is empty (a server that predates it sends none).
func DecodeLeaseRenewal(b []byte) (uint64, error) {
	switch len(b) {
	case 0:
		return 0, nil
	case 8:
		return binary.LittleEndian.Uint64(b), nil
	}
	return 0, fmt.Errorf("%w: lease renewal of %d bytes (want 8)", ErrLength, len(b))
}

// LeaseInfo is an OpLeaseTimeToLive response's Value, as the leader sees
// the lease:
//
//	le64 id | le64 granted ttl (ns) | le64 remaining (ns) | le64 keys attached
type LeaseInfo struct {
	ID        uint64
	TTL       time.Duration
	Remaining time.Duration
	Keys      uint64
}

const leaseInfoLen = 32

// AppendLeaseInfo appends i's encoding to b.
func AppendLeaseInfo(b []byte, i *LeaseInfo) []byte {
	b = binary.LittleEndian.AppendUint64(b, i.ID)
	b = binary.LittleEndian.AppendUint64(b, uint64(i.TTL))
	b = binary.LittleEndian.AppendUint64(b, uint64(i.Remaining))
	return binary.LittleEndian.AppendUint64(b, i.Keys)
}

// DecodeLeaseInfo parses an OpLeaseTimeToLive response's Value.
func DecodeLeaseInfo(b []byte, i *LeaseInfo) error {
	if len(b) != leaseInfoLen {
		return fmt.Errorf("%w: lease info of %d bytes (want %d)", ErrLength, len(b), leaseInfoLen)
	}
	ttl, rem := binary.LittleEndian.Uint64(b[8:]), binary.LittleEndian.Uint64(b[16:])
	if ttl > 1<<63-1 || rem > 1<<63-1 {
		return fmt.Errorf("%w: lease durations %d, %d ns", ErrLength, ttl, rem)
	}
	*i = LeaseInfo{ID: binary.LittleEndian.Uint64(b), TTL: time.Duration(ttl), Remaining: time.Duration(rem),
		Keys: binary.LittleEndian.Uint64(b[24:])}
	return nil
}

// MaxLeaseListIDs is the most lease ids one OpLeaseList reply holds.
const MaxLeaseListIDs = limits.MaxLeaseListIDs

// LeaseList is an OpLeaseList response's Value: one page of lease ids,
// ascending, and whether more follow the last one:
//
//	u8 more (0 or 1) | le64 id ... (at most MaxLeaseListIDs, each > 0)
type LeaseList struct {
	IDs  []uint64
	More bool
}

// AppendLeaseList appends l's encoding to b.
func AppendLeaseList(b []byte, l *LeaseList) []byte {
	more := byte(0)
	if l.More {
		more = 1
	}
	b = append(b, more)
	for _, id := range l.IDs {
		b = binary.LittleEndian.AppendUint64(b, id)
	}
	return b
}

// DecodeLeaseList parses an OpLeaseList response's Value.
func DecodeLeaseList(b []byte, l *LeaseList) error {
	if len(b) < 1 || (len(b)-1)%8 != 0 || b[0] > 1 {
		return fmt.Errorf("%w: lease list of %d bytes", ErrLength, len(b))
	}
	n := (len(b) - 1) / 8
	if n > MaxLeaseListIDs {
		return fmt.Errorf("%w: lease list of %d ids (at most %d)", ErrLength, n, MaxLeaseListIDs)
	}
	ids := make([]uint64, n)
	for i := range ids {
		ids[i] = binary.LittleEndian.Uint64(b[1+8*i:])
		if ids[i] == 0 || i > 0 && ids[i] <= ids[i-1] {
			return fmt.Errorf("%w: lease list ids not ascending and positive", ErrLength)
		}
	}
	*l = LeaseList{IDs: ids, More: b[0] == 1}
	return nil
}
