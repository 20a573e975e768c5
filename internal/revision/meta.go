package revision

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// Meta is a key's revision metadata (see the package comment).
type Meta struct {
	Create  uint64 // create_revision
	Mod     uint64 // mod_revision
	Version uint64 // writes since creation: 1 when created
	Lease   uint64 // attached TTL lease, 0 for none
}

// Size is the length of an encoded Meta.
const Size = 32

// ErrShort is returned when fewer than Size bytes hold a Meta.
var ErrShort = errors.New("revision: metadata truncated")

// Append appends m's encoding to dst: create, mod, version and lease, each
// a little-endian uint64.
func (m Meta) Append(dst []byte) []byte {
	dst = binary.LittleEndian.AppendUint64(dst, m.Create)
	dst = binary.LittleEndian.AppendUint64(dst, m.Mod)
	dst = binary.LittleEndian.AppendUint64(dst, m.Version)
	return binary.LittleEndian.AppendUint64(dst, m.Lease)
}

// Put writes m's encoding into the first Size bytes of dst.
func (m Meta) Put(dst []byte) {
	_ = dst[Size-1]
	binary.LittleEndian.PutUint64(dst, m.Create)
	binary.LittleEndian.PutUint64(dst[8:], m.Mod)
	binary.LittleEndian.PutUint64(dst[16:], m.Version)
	binary.LittleEndian.PutUint64(dst[24:], m.Lease)
}

// Decode reads a Meta from the first Size bytes of b. It does not allocate
// unless b is short.
func Decode(b []byte) (Meta, error) {
	if len(b) < Size {
		return Meta{}, fmt.Errorf("%w: %d bytes", ErrShort, len(b))
	}
	le := binary.LittleEndian
	return Meta{Create: le.Uint64(b), Mod: le.Uint64(b[8:]), Version: le.Uint64(b[16:]), Lease: le.Uint64(b[24:])}, nil
}

// Next is the Meta of a write at revision rev of a key whose Meta was prev
// (the zero Meta if the key did not exist), attached to lease.
func (prev Meta) Next(rev, lease uint64) Meta {
	if prev.Version == 0 {
		return Meta{Create: rev, Mod: rev, Version: 1, Lease: lease}
	}
	return Meta{Create: prev.Create, Mod: rev, Version: prev.Version + 1, Lease: lease}
}
