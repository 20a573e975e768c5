package backup

import (
	"bytes"
	"crypto/sha256"
	"fmt"
	"hash"
	"io"
)

// Writer writes a backup: the header at NewWriter, records with Add (in
// increasing key order, exactly Header.Keys of them), the trailer at Close.
// It checks what it writes as strictly as the reader will, so a bug shows
// at save time rather than at restore.
type Writer struct {
	w    io.Writer
	sum  hash.Hash
	h    Header
	n    uint64
	last []byte
	buf  []byte
}

// NewWriter writes h's header to w.
func NewWriter(w io.Writer, h Header) (*Writer, error) {
	if err := h.check(); err != nil {
		return nil, err
	}
	bw := &Writer{w: w, sum: sha256.New(), h: h}
	return bw, bw.write(appendHeader(nil, h))
}

func (w *Writer) write(b []byte) error {
	w.sum.Write(b)
	_, err := w.w.Write(b)
	return err
}

// Add writes one record.
func (w *Writer) Add(key, value []byte, version uint64) error {
	if err := checkRecord(w.h, w.n, w.last, key, len(value), version); err != nil {
		return err
	}
	w.n++
	w.last = append(w.last[:0], key...)
	w.buf = appendRecordHead(w.buf[:0], len(key), len(value), version)
	w.buf = append(w.buf, key...)
	w.buf = append(w.buf, value...)
	return w.write(w.buf)
}

// Close writes the trailer; the records written must number Header.Keys.
// It does not close the underlying writer.
func (w *Writer) Close() error {
	if w.n != w.h.Keys {
		return fmt.Errorf("%w: %d records written, header says %d", ErrFormat, w.n, w.h.Keys)
	}
	_, err := w.w.Write(w.sum.Sum(nil))
	return err
}

// checkRecord is the rule both sides enforce for the n-th record (0-based)
// after the key last.
func checkRecord(h Header, n uint64, last, key []byte, valueLen int, version uint64) error {
	switch {
	case n >= h.Keys:
		return fmt.Errorf("%w: more than the %d records the header announces", ErrFormat, h.Keys)
	case len(key) == 0 || len(key) > MaxKeyLen:
		return fmt.Errorf("%w: record %d: key of %d bytes", ErrFormat, n, len(key))
	case valueLen > MaxValueLen:
		return fmt.Errorf("%w: record %d: value of %d bytes (max %d)", ErrFormat, n, valueLen, MaxValueLen)
	case version == 0 || version > h.Index:
		return fmt.Errorf("%w: record %d: version %d outside 1..%d (the backup's index)", ErrFormat, n, version, h.Index)
	case n > 0 && bytes.Compare(last, key) >= 0:
		return fmt.Errorf("%w: record %d: key %q not after %q", ErrFormat, n, key, last)
	}
	return nil
}
