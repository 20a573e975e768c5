package backup

import (
	"bytes"
	"crypto/sha256"
	"fmt"
	"hash"
	"io"

	"github.com/kvd-project/kvd/internal/revision"
)

// Writer writes a backup: the header at NewWriter, leases with AddLease (in
// increasing id order, exactly Header.Leases of them), then records with
// Add (in increasing key order, exactly Header.Keys of them), the trailer
// at Close.
// It checks what it writes as strictly as the reader will, so a bug shows
// at save time rather than at restore.
type Writer struct {
	w    io.Writer
	sum  hash.Hash
	h    Header
	n    uint64
	last []byte
	buf  []byte

	leases    leaseSet
	nLeases   uint64
	lastLease Lease
}

// NewWriter writes h's header to w.
func NewWriter(w io.Writer, h Header) (*Writer, error) {
	if err := h.check(); err != nil {
		return nil, err
	}
	h.Format = Format
	bw := &Writer{w: w, sum: sha256.New(), h: h, leases: make(leaseSet, h.Leases)}
	return bw, bw.write(appendHeader(nil, h))
}

func (w *Writer) write(b []byte) error {
	w.sum.Write(b)
	_, err := w.w.Write(b)
	return err
}

// AddLease writes one lease; every lease comes before the first record.
func (w *Writer) AddLease(l Lease) error {
	if w.n > 0 {
		return fmt.Errorf("%w: lease %d after a record", ErrFormat, l.ID)
	}
	if err := checkLease(w.h, w.nLeases, w.lastLease, l); err != nil {
		return err
	}
	w.nLeases++
	w.lastLease = l
	w.leases[l.ID] = 0
	return w.write(appendLease(w.buf[:0], l))
}

// Add writes one record: a key, its value and its revision metadata,
// whose lease (0: none) AddLease wrote.
func (w *Writer) Add(key, value []byte, m revision.Meta) error {
	if w.nLeases != w.h.Leases {
		return fmt.Errorf("%w: a record after %d leases, header says %d", ErrFormat, w.nLeases, w.h.Leases)
	}
	if err := checkRecord(w.h, w.n, w.last, key, len(value), m); err != nil {
		return err
	}
	if err := w.leases.attach(w.n, m.Lease); err != nil {
		return err
	}
	w.n++
	w.last = append(w.last[:0], key...)
	w.buf = appendRecordHead(w.buf[:0], len(key), len(value), m)
	w.buf = append(w.buf, key...)
	w.buf = append(w.buf, value...)
	return w.write(w.buf)
}

// Close writes the trailer; the records written must number Header.Keys.
// It does not close the underlying writer.
func (w *Writer) Close() error {
	if w.nLeases != w.h.Leases {
		return fmt.Errorf("%w: %d leases written, header says %d", ErrFormat, w.nLeases, w.h.Leases)
	}
	if w.n != w.h.Keys {
		return fmt.Errorf("%w: %d records written, header says %d", ErrFormat, w.n, w.h.Keys)
	}
	_, err := w.w.Write(w.sum.Sum(nil))
	return err
}

// checkRecord is the rule both sides enforce for the n-th record (0-based)
// after the key last: a key's metadata is that of writes at revisions up
// to the backup's (one each), since it was created.
func checkRecord(h Header, n uint64, last, key []byte, valueLen int, m revision.Meta) error {
	switch {
	case n >= h.Keys:
		return fmt.Errorf("%w: more than the %d records the header announces", ErrFormat, h.Keys)
	case len(key) == 0 || len(key) > MaxKeyLen:
		return fmt.Errorf("%w: record %d: key of %d bytes", ErrFormat, n, len(key))
	case valueLen > MaxValueLen:
		return fmt.Errorf("%w: record %d: value of %d bytes (max %d)", ErrFormat, n, valueLen, MaxValueLen)
	case m.Mod == 0 || m.Mod > h.Revision:
		return fmt.Errorf("%w: record %d: mod revision %d outside 1..%d (the backup's revision)", ErrFormat, n, m.Mod, h.Revision)
	case m.Create == 0 || m.Create > m.Mod:
		return fmt.Errorf("%w: record %d: create revision %d outside 1..%d (its mod revision)", ErrFormat, n, m.Create, m.Mod)
	case m.Version == 0 || m.Version-1 > m.Mod-m.Create:
		return fmt.Errorf("%w: record %d: version %d outside 1..%d (one per revision from create %d to mod %d)",
			ErrFormat, n, m.Version, m.Mod-m.Create+1, m.Create, m.Mod)
	case n > 0 && bytes.Compare(last, key) >= 0:
		return fmt.Errorf("%w: record %d: key %q not after %q", ErrFormat, n, key, last)
	}
	return nil
}
