package rdma

// The wire format, and the checks every received SEND goes through. This
// file has no build tag and no cgo: it is the part of the package that host
// tests (and fuzzing) can reach without an RDMA device.

import (
	"encoding/binary"
	"fmt"

	"github.com/kvd-project/kvd/transport"
)

var le = binary.LittleEndian

// Every SEND starts with a 16-byte header:
//
//	0  kind      1 data, 2 credits only
//	1  flags     1 first fragment, 2 last fragment (data); 0 (credits)
//	2  retBuf    data receive buffers the sender has reposted for us
//	4  retCtl    credit-message buffers the sender has reposted for us
//	6  retMsg    messages the sender's application has consumed
//	8  total     length of the whole message (first fragment; else ignored)
//	12 reserved  sent as zero, ignored
//
// The payload follows; its length is the completion's byte count minus the
// header. A credit-only message is just the header.
const (
	msgData = 1
	msgCtl  = 2

	flagFirst = 1
	flagLast  = 2
)

type header struct {
	kind, flags            uint8
	retBuf, retCtl, retMsg uint16
	total                  uint32
}

// put writes h into b[:headerSize].
func (h header) put(b []byte) {
	_ = b[headerSize-1]
	b[0], b[1] = h.kind, h.flags
	le.PutUint16(b[2:], h.retBuf)
	le.PutUint16(b[4:], h.retCtl)
	le.PutUint16(b[6:], h.retMsg)
	le.PutUint32(b[8:], h.total)
	le.PutUint32(b[12:], 0)
}

// parseHeader reads the header in b[:headerSize]. It does no validation:
// that is checkFragment's job.
func parseHeader(b []byte) header {
	_ = b[headerSize-1]
	return header{
		kind: b[0], flags: b[1],
		retBuf: le.Uint16(b[2:]), retCtl: le.Uint16(b[4:]), retMsg: le.Uint16(b[6:]),
		total: le.Uint32(b[8:]),
	}
}

// returned is the credits a header hands back.
func (h header) returned() credits {
	return credits{buf: int(h.retBuf), ctl: int(h.retCtl), msg: int(h.retMsg)}
}

// rxLimits is what a connection checks received fragments against.
type rxLimits struct {
	bufSize    int // our receive buffers: no SEND can be longer
	maxMessage int // the largest message we accept (what our hello says)
}

// asmState is where the reassembly of a fragmented message stands.
type asmState struct {
	active      bool // a first fragment arrived, its last has not
	have, total int  // bytes reassembled so far, of total
}

// checkFragment validates one received SEND, n bytes long (the completion's
// byte count) in receive buffer buf, against the connection's limits and
// reassembly state. It returns the header and the payload (a subslice of
// buf[:n]), or an error wrapping transport.ErrProtocol. It reads nothing
// beyond buf[:n] and never panics, whatever buf holds and whatever n is.
//
// A data fragment must be one of: a whole message (first|last, total equal
// to its payload) or the first, a middle, or the last fragment of a larger
// one, in order and adding up to exactly the first fragment's total, which
// must not exceed lim.maxMessage. A credit-only message is exactly a header
// with no flags and a zero total; it may arrive between fragments.
func checkFragment(buf []byte, n int, lim rxLimits, asm asmState) (header, []byte, error) {
	if n < headerSize || n > lim.bufSize || n > len(buf) {
		return header{}, nil, fmt.Errorf("rdma: received a SEND of %d bytes (header %d, buffers %d): %w",
			n, headerSize, lim.bufSize, transport.ErrProtocol)
	}
	h := parseHeader(buf)
	payload := buf[headerSize:n]
	switch h.kind {
	case msgCtl:
		if n != headerSize || h.flags != 0 || h.total != 0 {
			return header{}, nil, fmt.Errorf("rdma: malformed credit message (%d bytes, flags %#x, total %d): %w",
				n, h.flags, h.total, transport.ErrProtocol)
		}
		return h, payload, nil
	case msgData:
	default:
		return header{}, nil, fmt.Errorf("rdma: message kind %d: %w", h.kind, transport.ErrProtocol)
	}
	if h.flags&^(flagFirst|flagLast) != 0 {
		return header{}, nil, fmt.Errorf("rdma: unknown fragment flags %#x: %w", h.flags, transport.ErrProtocol)
	}
	first, last := h.flags&flagFirst != 0, h.flags&flagLast != 0
	if first {
		switch total := uint64(h.total); {
		case asm.active:
			return header{}, nil, fmt.Errorf("rdma: a new message began inside one of %d bytes: %w", asm.total, transport.ErrProtocol)
		case total > uint64(lim.maxMessage):
			return header{}, nil, fmt.Errorf("rdma: message of %d bytes exceeds the limit of %d: %w", total, lim.maxMessage, transport.ErrProtocol)
		case last && total != uint64(len(payload)):
			return header{}, nil, fmt.Errorf("rdma: message of %d bytes says %d: %w", len(payload), total, transport.ErrProtocol)
		case !last && uint64(len(payload)) >= total:
			return header{}, nil, fmt.Errorf("rdma: first fragment of %d bytes of a message of %d: %w", len(payload), total, transport.ErrProtocol)
		}
		return h, payload, nil
	}
	if !asm.active {
		return header{}, nil, fmt.Errorf("rdma: fragment without a first: %w", transport.ErrProtocol)
	}
	switch end := asm.have + len(payload); {
	case end > asm.total:
		return header{}, nil, fmt.Errorf("rdma: fragments overrun a message of %d bytes: %w", asm.total, transport.ErrProtocol)
	case last && end != asm.total:
		return header{}, nil, fmt.Errorf("rdma: message of %d bytes ended at %d: %w", asm.total, end, transport.ErrProtocol)
	case !last && end == asm.total:
		return header{}, nil, fmt.Errorf("rdma: message of %d bytes complete without a last fragment: %w", asm.total, transport.ErrProtocol)
	}
	return h, payload, nil
}

// credits counts send credits of each kind: the peer's data receive
// buffers, its credit-message buffers, and its queue slots for messages.
type credits struct{ buf, ctl, msg int }

// addReturned adds credits the peer returned to those we hold. The peer can
// only return credits we used (we count one off before every SEND), so
// what we hold can never exceed what it granted in its hello; a sum beyond
// that is a protocol violation, and then have is left unchanged.
func addReturned(have *credits, ret, granted credits) error {
	sum := credits{buf: have.buf + ret.buf, ctl: have.ctl + ret.ctl, msg: have.msg + ret.msg}
	if ret.buf < 0 || ret.ctl < 0 || ret.msg < 0 ||
		sum.buf > granted.buf || sum.ctl > granted.ctl || sum.msg > granted.msg {
		return fmt.Errorf("rdma: peer returned credits %+v, holding %+v of %+v: %w", ret, *have, granted, transport.ErrProtocol)
	}
	*have = sum
	return nil
}

// hello is the private data exchanged by rdma_connect/rdma_accept: what the
// sender of it can receive.
type hello struct {
	ctl, bufSize, recvBuffers, credits, maxMessage int
}

const (
	helloMagic   = 0x5244564b // "KVDR" little-endian
	helloVersion = 1
	helloSize    = 24
)

// granted is the credits a hello grants its receiver.
func (h hello) granted() credits {
	return credits{buf: h.recvBuffers, ctl: h.ctl, msg: h.credits}
}

func (h hello) encode() []byte {
	b := make([]byte, helloSize)
	le.PutUint32(b[0:], helloMagic)
	le.PutUint16(b[4:], helloVersion)
	le.PutUint16(b[6:], uint16(h.ctl))
	le.PutUint32(b[8:], uint32(h.bufSize))
	le.PutUint32(b[12:], uint32(h.recvBuffers))
	le.PutUint32(b[16:], uint32(h.credits))
	le.PutUint32(b[20:], uint32(h.maxMessage))
	return b
}

// parseHello parses a peer's hello. Private data may arrive padded (the
// connection manager rounds it up), so bytes past helloSize are ignored.
// The parameters must be ones a valid Config could produce; errors wrap
// transport.ErrProtocol.
func parseHello(b []byte) (hello, error) {
	if len(b) < helloSize || le.Uint32(b) != helloMagic {
		return hello{}, fmt.Errorf("rdma: peer is not a kvd rdma transport: %w", transport.ErrProtocol)
	}
	if v := le.Uint16(b[4:]); v != helloVersion {
		return hello{}, fmt.Errorf("rdma: peer speaks version %d, want %d: %w", v, helloVersion, transport.ErrProtocol)
	}
	// Through int64, so that 32-bit platforms see the same values.
	u32 := func(off int) int64 { return int64(le.Uint32(b[off:])) }
	ctl := int64(le.Uint16(b[6:]))
	bufSize, recvBuffers, credits, maxMessage := u32(8), u32(12), u32(16), u32(20)
	if ctl < 1 || ctl > maxBuffers ||
		bufSize < minBufSize || bufSize > maxBufSize ||
		recvBuffers < 1 || recvBuffers > maxBuffers-ctlBuffers ||
		credits < 1 || credits > maxCredits ||
		maxMessage > maxMaxMessage {
		return hello{}, fmt.Errorf("rdma: peer sent bad parameters (ctl %d, bufSize %d, recvBuffers %d, credits %d, maxMessage %d): %w",
			ctl, bufSize, recvBuffers, credits, maxMessage, transport.ErrProtocol)
	}
	return hello{ctl: int(ctl), bufSize: int(bufSize), recvBuffers: int(recvBuffers),
		credits: int(credits), maxMessage: int(maxMessage)}, nil
}
