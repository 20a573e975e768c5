package backup

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"hash"
	"io"
	"time"

	"github.com/kvd-project/kvd/internal/revision"
)

// Record is one key of a backup. Key and Value are valid until the next
// call of Next.
type Record struct {
	Key   []byte
	Value []byte
	Meta  revision.Meta // Meta.Lease: the lease the key is attached to (0: none)
}

// Reader reads a backup, checking it as it goes.
type Reader struct {
	r    *bufio.Reader
	sum  hash.Hash
	h    Header
	n    uint64
	last []byte
	buf  []byte
	done bool
	size int64 // the bytes read before the trailer

	leases     []Lease
	leaseKeys  leaseSet
	recordHead int
}

// NewReader reads and checks the header and the leases. It reads the
// format Format and the older ones; a newer one fails with ErrFormat
// naming its version.
func NewReader(r io.Reader) (*Reader, error) {
	br := &Reader{r: bufio.NewReaderSize(r, 256<<10), sum: sha256.New()}
	b, err := br.read(HeaderLenV1, "header")
	if err != nil {
		return nil, err
	}
	if string(b[:8]) != magic {
		return nil, fmt.Errorf("%w: not a kvd backup (bad magic %q)", ErrFormat, b[:8])
	}
	f := binary.LittleEndian.Uint16(b[8:])
	if f < FormatNoLeases || f > Format {
		return nil, fmt.Errorf("%w: format version %d (this kvd reads %d to %d): written by a newer kvd; restore it with that version",
			ErrFormat, f, FormatNoLeases, Format)
	}
	if binary.LittleEndian.Uint16(b[10:]) != 0 {
		return nil, fmt.Errorf("%w: reserved header field set", ErrFormat)
	}
	br.h = Header{Index: binary.LittleEndian.Uint64(b[12:]), Keys: binary.LittleEndian.Uint64(b[20:]),
		Cluster: binary.LittleEndian.Uint64(b[28:]), Format: f}
	if err := br.readHeaderTail(); err != nil {
		return nil, err
	}
	if err := br.h.check(); err != nil {
		return nil, err
	}
	if err := br.readLeases(); err != nil {
		return nil, err
	}
	return br, nil
}

// readHeaderTail reads what the header has after the format-1 fields, as
// the header's format has it, and sets the record layout.
func (r *Reader) readHeaderTail() error {
	r.h.Revision = r.h.Index // an older format's revisions: see Header
	n := HeaderLen
	switch r.h.Format {
	case FormatNoLeases:
		r.recordHead = recordHeadV1
		return nil
	case FormatNoRevisions:
		r.recordHead, n = recordHeadV2, HeaderLenV2
	default:
		r.recordHead = recordHead
	}
	b, err := r.read(n-HeaderLenV1, "header")
	if err != nil {
		return err
	}
	r.h.Leases = binary.LittleEndian.Uint64(b)
	if r.h.Format == Format {
		r.h.Revision, r.h.Compacted = binary.LittleEndian.Uint64(b[8:]), binary.LittleEndian.Uint64(b[16:])
	}
	return nil
}

// readLeases reads the leases, which precede the records.
func (r *Reader) readLeases() error {
	r.leases = make([]Lease, 0, r.h.Leases)
	r.leaseKeys = make(leaseSet, r.h.Leases)
	var last Lease
	for n := range r.h.Leases {
		b, err := r.read(leaseLen, fmt.Sprintf("lease %d", n))
		if err != nil {
			return err
		}
		l := Lease{ID: binary.LittleEndian.Uint64(b), TTL: time.Duration(binary.LittleEndian.Uint64(b[8:]))}
		if err := checkLease(r.h, n, last, l); err != nil {
			return err
		}
		r.leases = append(r.leases, l)
		r.leaseKeys[l.ID] = 0
		last = l
	}
	return nil
}

// Leases are the backup's leases, in id order.
func (r *Reader) Leases() []Lease { return r.leases }

// Header is the backup's header.
func (r *Reader) Header() Header { return r.h }

// read reads exactly n bytes into the reused buffer and hashes them.
func (r *Reader) read(n int, what string) ([]byte, error) {
	if cap(r.buf) < n {
		r.buf = make([]byte, n)
	}
	b := r.buf[:n]
	if _, err := io.ReadFull(r.r, b); err != nil {
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return nil, fmt.Errorf("%w: file ends inside the %s", ErrTruncated, what)
		}
		return nil, err
	}
	r.sum.Write(b)
	r.size += int64(n)
	return b, nil
}

// Next returns the next record. After the last one it checks the trailer
// and that the file ends there, and returns io.EOF: only then is the backup
// known to be whole.
func (r *Reader) Next() (Record, error) {
	if r.done {
		return Record{}, io.EOF
	}
	if r.n == r.h.Keys {
		return Record{}, r.finish()
	}
	head, err := r.read(r.recordHead, fmt.Sprintf("record %d", r.n))
	if err != nil {
		return Record{}, err
	}
	kl := int(binary.LittleEndian.Uint16(head))
	vl := uint64(binary.LittleEndian.Uint32(head[2:]))
	var m revision.Meta
	switch r.recordHead {
	case recordHead:
		m, _ = revision.Decode(head[6:]) // the head holds revision.Size bytes
	case recordHeadV2:
		m = legacyMeta(binary.LittleEndian.Uint64(head[6:]), binary.LittleEndian.Uint64(head[14:]))
	default:
		m = legacyMeta(binary.LittleEndian.Uint64(head[6:]), 0)
	}
	if vl > MaxValueLen {
		return Record{}, fmt.Errorf("%w: record %d: value of %d bytes (max %d)", ErrFormat, r.n, vl, MaxValueLen)
	}
	body, err := r.read(kl+int(vl), fmt.Sprintf("record %d", r.n))
	if err != nil {
		return Record{}, err
	}
	key, value := body[:kl:kl], body[kl:]
	if err := checkRecord(r.h, r.n, r.last, key, len(value), m); err != nil {
		return Record{}, err
	}
	if err := r.leaseKeys.attach(r.n, m.Lease); err != nil {
		return Record{}, err
	}
	r.n++
	r.last = append(r.last[:0], key...)
	return Record{Key: key, Value: value, Meta: m}, nil
}

func (r *Reader) finish() error {
	want := r.sum.Sum(nil)
	var got [TrailerLen]byte
	if _, err := io.ReadFull(r.r, got[:]); err != nil {
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return fmt.Errorf("%w: file ends inside the checksum", ErrTruncated)
		}
		return err
	}
	if !bytes.Equal(got[:], want) {
		return fmt.Errorf("%w: stored %x, computed %x", ErrChecksum, got, want)
	}
	if err := r.finishEnvelope(r.size+TrailerLen, got[:]); err != nil {
		return err
	}
	r.done = true
	return io.EOF
}

// Sum is the backup's checksum, available once Next returned io.EOF.
func (r *Reader) Sum() []byte {
	if !r.done {
		return nil
	}
	return r.sum.Sum(nil)
}

// Verify reads a whole backup and returns its header and checksum, or why
// it is not whole.
func Verify(rd io.Reader) (Header, []byte, error) {
	r, err := NewReader(rd)
	if err != nil {
		return Header{}, nil, err
	}
	for {
		if _, err := r.Next(); err != nil {
			if errors.Is(err, io.EOF) {
				return r.h, r.Sum(), nil
			}
			return r.h, nil, err
		}
	}
}
