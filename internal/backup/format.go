package backup

import (
	"encoding/binary"
	"fmt"
	"time"

	"github.com/kvd-project/kvd/internal/errs"
	"github.com/kvd-project/kvd/internal/limits"
	"github.com/kvd-project/kvd/internal/revision"
)

// Format is the format version this package writes: each key with its
// revision.Meta, the header with the store revision. It also reads the
// formats before it (a key of theirs gets legacyMeta).
const (
	Format            = 3
	FormatNoRevisions = 2 // a version per key (its last write's index) and its lease
	FormatNoLeases    = 1 // a version per key, no leases
)

// Sizes of the fixed parts.
const (
	HeaderLen    = 60 // HeaderLenV2 in FormatNoRevisions, HeaderLenV1 in FormatNoLeases
	HeaderLenV2  = 44
	HeaderLenV1  = 36
	leaseLen     = 8 + 8
	recordHead   = 2 + 4 + revision.Size // recordHeadV2, recordHeadV1 in the older formats
	recordHeadV2 = 2 + 4 + 8 + 8
	recordHeadV1 = 2 + 4 + 8
	TrailerLen   = 32 // SHA-256
	magic        = "KVDSNAP\n"
	MaxKeyLen    = limits.MaxKey
	MaxValueLen  = limits.MaxValue
	MaxRecordLen = recordHead + MaxKeyLen + MaxValueLen
)

// MaxIndex bounds a backup's index: half the largest log index kvd's
// peers may name (2^62; raft refuses messages beyond it), so that the
// cluster restored from it has room to grow its log. A cluster restored
// at a larger one could elect no leader, one near 2^64 wraps the log, and
// one at 2^62 itself elects a leader whose first entry no follower takes:
// it commits nothing.
const MaxIndex = 1 << 61

// Errors. A reader's errors wrap one of them.
var (
	ErrFormat    = errs.ErrBackupFormat
	ErrTruncated = errs.ErrBackupTruncated
	ErrChecksum  = errs.ErrBackupChecksum
)

// Header describes a backup.
type Header struct {
	Index uint64 // applied Raft index of the state
	Keys  uint64 // number of records
	// Cluster is the id of the cluster the backup was taken from (0:
	// unknown).
	Cluster uint64
	// Leases is the number of TTL leases (0 in a FormatNoLeases file).
	Leases uint64
	// Revision is the store revision of the state: every key's Mod is at
	// most it, and a cluster restored from the backup goes on from it.
	// Compacted is the state's compaction revision (0: none). A file of
	// an older format has neither: its Revision is its Index (revisions
	// stay above every restored version), Compacted 0.
	Revision, Compacted uint64
	// Format is the file's format version (a writer writes Format
	// whatever it says).
	Format uint16
}

// Lease is one TTL lease of a backup: its id and its TTL as granted. Its
// keys are the records that name it.
type Lease struct {
	ID  uint64
	TTL time.Duration
}

// check checks what a header says on its own.
func (h Header) check() error {
	switch {
	case h.Index > MaxIndex:
		return fmt.Errorf("%w: index %d beyond %d", ErrFormat, h.Index, uint64(MaxIndex))
	case h.Leases > limits.MaxLeases:
		return fmt.Errorf("%w: %d leases (at most %d may exist)", ErrFormat, h.Leases, limits.MaxLeases)
	case h.Revision > MaxIndex:
		return fmt.Errorf("%w: revision %d beyond %d", ErrFormat, h.Revision, uint64(MaxIndex))
	case h.Compacted > h.Revision:
		return fmt.Errorf("%w: compaction revision %d after the revision %d", ErrFormat, h.Compacted, h.Revision)
	}
	return nil
}

// checkLease is the rule both sides enforce for the n-th lease (0-based)
// after the lease last.
func checkLease(h Header, n uint64, last, l Lease) error {
	switch {
	case n >= h.Leases:
		return fmt.Errorf("%w: more than the %d leases the header announces", ErrFormat, h.Leases)
	case l.ID == 0:
		return fmt.Errorf("%w: lease %d: id 0", ErrFormat, n)
	case n > 0 && l.ID <= last.ID:
		return fmt.Errorf("%w: lease %d: id %d not after %d", ErrFormat, n, l.ID, last.ID)
	case l.TTL < limits.MinLeaseTTL || l.TTL > limits.MaxLeaseTTL:
		return fmt.Errorf("%w: lease %d: TTL %v outside %v..%v", ErrFormat, l.ID, l.TTL, limits.MinLeaseTTL, limits.MaxLeaseTTL)
	}
	return nil
}

func appendHeader(b []byte, h Header) []byte {
	b = append(b, magic...)
	b = binary.LittleEndian.AppendUint16(b, Format)
	b = binary.LittleEndian.AppendUint16(b, 0)
	b = binary.LittleEndian.AppendUint64(b, h.Index)
	b = binary.LittleEndian.AppendUint64(b, h.Keys)
	b = binary.LittleEndian.AppendUint64(b, h.Cluster)
	b = binary.LittleEndian.AppendUint64(b, h.Leases)
	b = binary.LittleEndian.AppendUint64(b, h.Revision)
	return binary.LittleEndian.AppendUint64(b, h.Compacted)
}

func appendLease(b []byte, l Lease) []byte {
	b = binary.LittleEndian.AppendUint64(b, l.ID)
	return binary.LittleEndian.AppendUint64(b, uint64(l.TTL))
}

func appendRecordHead(b []byte, keyLen, valueLen int, m revision.Meta) []byte {
	b = binary.LittleEndian.AppendUint16(b, uint16(keyLen))
	b = binary.LittleEndian.AppendUint32(b, uint32(valueLen))
	return m.Append(b)
}

// legacyMeta is the Meta of a key of a file of an older format, which has
// only the index of the key's last write (its version then) and its lease:
// created and last modified at that index, once.
func legacyMeta(version, lease uint64) revision.Meta {
	return revision.Meta{Create: version, Mod: version, Version: 1, Lease: lease}
}

// leaseSet is what both sides know of the leases while they check the
// records: each lease's id and how many records named it so far.
type leaseSet map[uint64]uint64

// attach checks that record n may name lease id (0: none) and counts it.
func (s leaseSet) attach(n, id uint64) error {
	if id == 0 {
		return nil
	}
	keys, ok := s[id]
	switch {
	case !ok:
		return fmt.Errorf("%w: record %d: lease %d is not among the backup's leases", ErrFormat, n, id)
	case keys >= limits.MaxLeaseKeys:
		return fmt.Errorf("%w: record %d: lease %d holds more than %d keys", ErrFormat, n, id, limits.MaxLeaseKeys)
	}
	s[id] = keys + 1
	return nil
}
