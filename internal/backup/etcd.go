package backup

import (
	"bytes"
	"crypto/sha256"
	"encoding"
	"fmt"
	"hash"
	"io"
)

// etcd's snapshot framing. etcd's Maintenance.Snapshot stream ends with
// the SHA-256 of every byte before it, and etcdctl's `snapshot save`
// refuses a file unless its size is 32 more than a multiple of 512 (etcd's
// database is whole pages). A kvd backup served through etcd's API
// (internal/etcdapi) is therefore followed by an envelope:
//
//	envelope = zero bytes to the next multiple of 512 (0 to 511)
//	         | SHA-256 of every byte before it, the backup included (32)
//
// The reader accepts a file with or without it, and nothing else after the
// backup's own trailer.
const etcdBlock = 512

// EtcdPadding is the number of zero bytes that follow an n-byte backup in
// etcd's framing, before the envelope's checksum.
func EtcdPadding(n int64) int {
	return int((etcdBlock - n%etcdBlock) % etcdBlock)
}

// finishEnvelope checks what follows the backup's trailer (got, after
// total bytes of the file): nothing, or etcd's envelope.
func (r *Reader) finishEnvelope(total int64, got []byte) error {
	rest, err := io.ReadAll(io.LimitReader(r.r, etcdBlock+sha256.Size))
	switch {
	case err != nil:
		return err
	case len(rest) == 0:
		return nil
	case len(rest) < sha256.Size || len(rest) > etcdBlock-1+sha256.Size:
		return fmt.Errorf("%w: %d bytes after the checksum", ErrFormat, len(rest))
	}
	pad, sum := rest[:len(rest)-sha256.Size], rest[len(rest)-sha256.Size:]
	if len(pad) != EtcdPadding(total) || !bytes.Equal(pad, make([]byte, len(pad))) {
		return fmt.Errorf("%w: bytes after the checksum (not etcd's snapshot padding)", ErrFormat)
	}
	whole, err := cloneSHA256(r.sum)
	if err != nil {
		return err
	}
	whole.Write(got)
	whole.Write(pad)
	if want := whole.Sum(nil); !bytes.Equal(sum, want) {
		return fmt.Errorf("%w: etcd snapshot checksum: stored %x, computed %x", ErrChecksum, sum, want)
	}
	return nil
}

// cloneSHA256 copies a running SHA-256 (the backup's, before its
// trailer), which the envelope's checksum goes on from.
func cloneSHA256(h hash.Hash) (hash.Hash, error) {
	state, err := h.(encoding.BinaryMarshaler).MarshalBinary()
	if err != nil {
		return nil, err
	}
	c := sha256.New()
	if err := c.(encoding.BinaryUnmarshaler).UnmarshalBinary(state); err != nil {
		return nil, err
	}
	return c, nil
}
