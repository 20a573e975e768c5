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
	// GetMeta, added to a GET's level, asks for the key's whole revision
	// metadata: the response's Value is then its revision.Meta (32 bytes)
	// followed by the value, and its Version the store revision the read
	// was served at (without it: the value, and its mod revision). A
	// server before revisions refuses it as a bad request.
	GetMeta uint16 = 1 << 8
)

// HelloClusterID, in an OpHello request's Flags, asks the server to end its
// Hello with its cluster id. A client that does not set it (one older than
// the field) gets the Hello it can decode: the older decoder refuses any
// bytes after the leader's address, so the server appends the id only when
// asked. A server older than the field ignores the flag and sends no id,
// which the client reads as 0 ("not known").
const HelloClusterID uint16 = 1

// HelloFeatures, in an OpHello request's Flags (with HelloClusterID),
// asks the server to end its Hello with the features it serves
// (Hello.Features). A client that does not set it gets the Hello it can
// decode; a server older than the flag ignores it and sends none, which
// the client reads as no features.
const HelloFeatures uint16 = 2

// Features a server announces in its Hello: requests that a server
// predating them would refuse by closing the connection.
const (
	// FeaturePutBatch: the server serves OpPutBatch.
	FeaturePutBatch uint64 = 1
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
	// ClusterID is the id of the server's cluster (raft/peer's, printed
	// as 16 hex digits), or 0: not known (a server older than the field,
	// or a joining node that has not heard from its cluster yet). It is
	// encoded only when not 0 or Features is not, as 8 bytes after
	// LeaderAddr.
	ClusterID uint64
	// Features are the Feature bits the server serves (0: none, or a
	// server older than the field). They are encoded only when not 0,
	// as 8 bytes after ClusterID, which is then encoded even if 0.
	Features uint64
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
	b = append(b, h.LeaderAddr...)
	if h.ClusterID != 0 || h.Features != 0 {
		b = binary.LittleEndian.AppendUint64(b, h.ClusterID)
	}
	if h.Features != 0 {
		b = binary.LittleEndian.AppendUint64(b, h.Features)
	}
	return b
}

// DecodeHello parses a Hello payload.
func DecodeHello(b []byte, h *Hello) error {
	if len(b) < helloFixed {
		return fmt.Errorf("%w: hello of %d bytes", ErrShort, len(b))
	}
	n := int(binary.LittleEndian.Uint16(b[36:]))
	var cluster, features uint64
	switch len(b) - helloFixed - n {
	case 0:
	case 8:
		// 0 is sent by leaving the field out: one encoding per Hello.
		if cluster = binary.LittleEndian.Uint64(b[helloFixed+n:]); cluster == 0 {
			return fmt.Errorf("%w: hello carries cluster id 0", ErrLength)
		}
	case 16:
		cluster = binary.LittleEndian.Uint64(b[helloFixed+n:])
		if features = binary.LittleEndian.Uint64(b[helloFixed+n+8:]); features == 0 {
			return fmt.Errorf("%w: hello carries features 0", ErrLength)
		}
	default:
		return fmt.Errorf("%w: hello says %d address bytes, has %d (or %d with a cluster id, %d with features)",
			ErrLength, n, len(b)-helloFixed, len(b)-helloFixed-8, len(b)-helloFixed-16)
	}
	*h = Hello{
		ClusterID:  cluster,
		Features:   features,
		NodeID:     binary.LittleEndian.Uint64(b[0:]),
		LeaderID:   binary.LittleEndian.Uint64(b[8:]),
		RegionAddr: binary.LittleEndian.Uint64(b[16:]),
		RegionLen:  binary.LittleEndian.Uint64(b[24:]),
		RegionKey:  binary.LittleEndian.Uint32(b[32:]),
		LeaderAddr: string(b[helloFixed : helloFixed+n]),
	}
	return nil
}
