package wire

import (
	"encoding/binary"
	"fmt"
)

// Consistency levels, carried in a GET request's Flags and chosen by clients.
const (
	// Linearizable reads are served only by a leader holding a valid lease
	// (one-sided) or after a ReadIndex barrier (two-sided).
	Linearizable uint16 = 0
	// Serializable reads come from any replica's applied state: never torn,
	// possibly stale.
	Serializable uint16 = 1
	// ReadIndex reads are two-sided and confirmed with the quorum; they need
	// no clock assumption.
	ReadIndex uint16 = 2
)

// Hello is a server's answer to OpHello: where its table region is and who it
// believes leads. The client reads the table's geometry from the region
// itself.
type Hello struct {
	NodeID     uint64
	LeaderID   uint64
	RegionAddr uint64
	RegionLen  uint64
	RegionKey  uint32
	LeaderAddr string
}

const helloFixed = 8 + 8 + 8 + 8 + 4 + 2

// AppendHello appends h's encoding to b.
func AppendHello(b []byte, h *Hello) []byte {
	b = binary.LittleEndian.AppendUint64(b, h.NodeID)
	b = binary.LittleEndian.AppendUint64(b, h.LeaderID)
	b = binary.LittleEndian.AppendUint64(b, h.RegionAddr)
	b = binary.LittleEndian.AppendUint64(b, h.RegionLen)
	b = binary.LittleEndian.AppendUint32(b, h.RegionKey)
	b = binary.LittleEndian.AppendUint16(b, uint16(len(h.LeaderAddr)))
	return append(b, h.LeaderAddr...)
}

// DecodeHello parses a Hello payload.
func DecodeHello(b []byte, h *Hello) error {
	if len(b) < helloFixed {
		return fmt.Errorf("%w: hello of %d bytes", ErrShort, len(b))
	}
	n := int(binary.LittleEndian.Uint16(b[36:]))
	if len(b) != helloFixed+n {
		return fmt.Errorf("%w: hello says %d address bytes, has %d", ErrLength, n, len(b)-helloFixed)
	}
	*h = Hello{
		NodeID:     binary.LittleEndian.Uint64(b[0:]),
		LeaderID:   binary.LittleEndian.Uint64(b[8:]),
		RegionAddr: binary.LittleEndian.Uint64(b[16:]),
		RegionLen:  binary.LittleEndian.Uint64(b[24:]),
		RegionKey:  binary.LittleEndian.Uint32(b[32:]),
		LeaderAddr: string(b[helloFixed:]),
	}
	return nil
}
