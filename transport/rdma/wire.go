//go:build rdma

package rdma

import "encoding/binary"

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
