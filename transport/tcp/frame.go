package tcp

import (
	"encoding/binary"
	"fmt"

	"github.com/kvd-project/kvd/transport"
)

// frameType is the first byte of every frame header; doc.go describes each.
type frameType uint8

const (
	frameMsg      frameType = 1
	frameCredit   frameType = 2
	frameReadReq  frameType = 3
	frameReadResp frameType = 4
)

// status is the outcome of a served READ batch, or of one op in it.
type status uint8

const (
	statusOK          status = 0
	statusBadKey      status = 1
	statusOutOfRange  status = 2
	statusPartitioned status = 3
	numStatus                = 4
)

const (
	headerSize  = 16
	opSize      = 16 // one READ op in a READ_REQ: addr u64, len u32, key u32
	trailerSize = 2  // after READ_RESP data: status u8, op index u8
	maxReadLen  = 1<<32 - 1
)

// header is a decoded frame header. The meaning of a, b and id depends on
// typ (see doc.go); length is the number of payload bytes that follow.
type header struct {
	typ    frameType
	a, b   uint8
	id     uint32
	length uint64
}

func (h header) put(b []byte) {
	_ = b[headerSize-1]
	b[0], b[1], b[2], b[3] = byte(h.typ), h.a, h.b, 0
	binary.LittleEndian.PutUint32(b[4:], h.id)
	binary.LittleEndian.PutUint64(b[8:], h.length)
}

// parseHeader decodes and checks a frame header on its own; checks that
// need connection state (credits, request ids) are left to the caller.
// Errors wrap transport.ErrProtocol.
func parseHeader(b []byte, maxMessage int) (header, error) {
	if len(b) < headerSize {
		return header{}, fmt.Errorf("tcp: short frame header (%d bytes): %w", len(b), transport.ErrProtocol)
	}
	h := header{
		typ:    frameType(b[0]),
		a:      b[1],
		b:      b[2],
		id:     binary.LittleEndian.Uint32(b[4:]),
		length: binary.LittleEndian.Uint64(b[8:]),
	}
	if b[3] != 0 {
		return h, protoErr("frame type %d: reserved byte is %d", h.typ, b[3])
	}
	switch h.typ {
	case frameMsg:
		if h.a != 0 || h.b != 0 {
			return h, protoErr("MSG: non-zero flags %d, %d", h.a, h.b)
		}
		if h.length > uint64(maxMessage) {
			return h, protoErr("MSG of %d bytes exceeds the connection's max of %d", h.length, maxMessage)
		}
	case frameCredit:
		if h.a != 0 || h.b != 0 || h.length != 0 || h.id == 0 {
			return h, protoErr("CREDIT: malformed (flags %d, %d, credits %d, length %d)", h.a, h.b, h.id, h.length)
		}
	case frameReadReq:
		if h.a == 0 || h.a > transport.MaxBatch || h.b != 0 {
			return h, protoErr("READ_REQ: %d ops (max %d), flag %d", h.a, transport.MaxBatch, h.b)
		}
		if h.length != uint64(h.a)*opSize {
			return h, protoErr("READ_REQ: %d ops in %d bytes", h.a, h.length)
		}
	case frameReadResp:
		st := status(h.a)
		switch {
		case st >= numStatus:
			return h, protoErr("READ_RESP: unknown status %d", h.a)
		case h.b >= transport.MaxBatch:
			return h, protoErr("READ_RESP: op index %d", h.b)
		case st == statusOK && (h.b != 0 || h.length < trailerSize):
			return h, protoErr("READ_RESP: ok with op index %d and length %d", h.b, h.length)
		case st != statusOK && h.length != 0:
			return h, protoErr("READ_RESP: failure carrying %d bytes", h.length)
		}
	default:
		return h, protoErr("unknown frame type %d", h.typ)
	}
	return h, nil
}

// wireOp is one READ op as it travels in a READ_REQ.
type wireOp struct {
	addr uint64
	n    uint32
	key  uint32
}

func (o wireOp) put(b []byte) {
	_ = b[opSize-1]
	binary.LittleEndian.PutUint64(b, o.addr)
	binary.LittleEndian.PutUint32(b[8:], o.n)
	binary.LittleEndian.PutUint32(b[12:], o.key)
}

func parseOp(b []byte) wireOp {
	_ = b[opSize-1]
	return wireOp{
		addr: binary.LittleEndian.Uint64(b),
		n:    binary.LittleEndian.Uint32(b[8:]),
		key:  binary.LittleEndian.Uint32(b[12:]),
	}
}

func protoErr(format string, args ...any) error {
	return fmt.Errorf("tcp: "+format+": %w", append(args, transport.ErrProtocol)...)
}
