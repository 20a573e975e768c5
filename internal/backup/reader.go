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
)

// Record is one key of a backup. Key and Value are valid until the next
// call of Next.
type Record struct {
	Key     []byte
	Value   []byte
	Version uint64
	Lease   uint64 // the lease the key is attached to (0: none)
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

	leases     []Lease
	leaseKeys  leaseSet
	recordHead int
}

// NewReader reads and checks the header and the leases. It reads the
// formats Format and FormatNoLeases; a newer one fails with ErrFormat
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
	if f != Format && f != FormatNoLeases {
		return nil, fmt.Errorf("%w: format version %d (this kvd reads %d and %d): written by a newer kvd; restore it with that version",
			ErrFormat, f, FormatNoLeases, Format)
	}
	if binary.LittleEndian.Uint16(b[10:]) != 0 {
		return nil, fmt.Errorf("%w: reserved header field set", ErrFormat)
	}
	br.h = Header{Index: binary.LittleEndian.Uint64(b[12:]), Keys: binary.LittleEndian.Uint64(b[20:]),
		Cluster: binary.LittleEndian.Uint64(b[28:]), Format: f}
	br.recordHead = recordHeadV1
	if f == Format {
		br.recordHead = recordHead
		if b, err = br.read(HeaderLen-HeaderLenV1, "header"); err != nil {
			return nil, err
		}
		br.h.Leases = binary.LittleEndian.Uint64(b)
	}
	if err := br.h.check(); err != nil {
		return nil, err
	}
	if err := br.readLeases(); err != nil {
		return nil, err
	}
	return br, nil
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
	version := binary.LittleEndian.Uint64(head[6:])
	var lease uint64
	if r.recordHead == recordHead {
		lease = binary.LittleEndian.Uint64(head[14:])
	}
	if vl > MaxValueLen {
		return Record{}, fmt.Errorf("%w: record %d: value of %d bytes (max %d)", ErrFormat, r.n, vl, MaxValueLen)
	}
	body, err := r.read(kl+int(vl), fmt.Sprintf("record %d", r.n))
	if err != nil {
		return Record{}, err
	}
	key, value := body[:kl:kl], body[kl:]
	if err := checkRecord(r.h, r.n, r.last, key, len(value), version); err != nil {
		return Record{}, err
	}
	if err := r.leaseKeys.attach(r.n, lease); err != nil {
		return Record{}, err
	}
	r.n++
	r.last = append(r.last[:0], key...)
	return Record{Key: key, Value: value, Version: version, Lease: lease}, nil
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
	if _, err := r.r.ReadByte(); err == nil {
		return fmt.Errorf("%w: bytes after the checksum", ErrFormat)
	} else if !errors.Is(err, io.EOF) {
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
