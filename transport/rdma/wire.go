//go:build rdma

package rdma

import (
	"encoding/binary"
	"fmt"

	"github.com/kvd-project/kvd/transport"
)

var le = binary.LittleEndian

// Every SEND starts with a 16-byte header:
//
//	0  kind      1 data, 2 credits only
//	1  flags     1 first fragment, 2 last fragment
//	2  retBuf    data receive buffers the sender has reposted for us
//	4  retCtl    credit-message buffers the sender has reposted for us
//	6  retMsg    messages the sender's application has consumed
//	8  total     length of the whole message (first fragment)
//	12 reserved
//
// The payload follows; its length is the completion's byte count minus the
// header.
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

func (h header) put(b []byte) {
	b[0], b[1] = h.kind, h.flags
	le.PutUint16(b[2:], h.retBuf)
	le.PutUint16(b[4:], h.retCtl)
	le.PutUint16(b[6:], h.retMsg)
	le.PutUint32(b[8:], h.total)
	le.PutUint32(b[12:], 0)
}

func parseHeader(b []byte) header {
	return header{
		kind: b[0], flags: b[1],
		retBuf: le.Uint16(b[2:]), retCtl: le.Uint16(b[4:]), retMsg: le.Uint16(b[6:]),
		total: le.Uint32(b[8:]),
	}
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

func parseHello(b []byte) (hello, error) {
	if len(b) < helloSize || le.Uint32(b) != helloMagic {
		return hello{}, fmt.Errorf("rdma: peer is not a kvd rdma transport: %w", transport.ErrProtocol)
	}
	if v := le.Uint16(b[4:]); v != helloVersion {
		return hello{}, fmt.Errorf("rdma: peer speaks version %d, want %d: %w", v, helloVersion, transport.ErrProtocol)
	}
	h := hello{
		ctl:         int(le.Uint16(b[6:])),
		bufSize:     int(le.Uint32(b[8:])),
		recvBuffers: int(le.Uint32(b[12:])),
		credits:     int(le.Uint32(b[16:])),
		maxMessage:  int(le.Uint32(b[20:])),
	}
	if h.ctl < 1 || h.bufSize < minBufSize || h.recvBuffers < 1 || h.credits < 1 {
		return hello{}, fmt.Errorf("rdma: peer sent bad parameters %+v: %w", h, transport.ErrProtocol)
	}
	return h, nil
}
