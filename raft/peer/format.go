package peer

import (
	"encoding/binary"
	"fmt"

	"github.com/kvd-project/kvd/internal/store"
)

// FrameDataFormat is the first frame a node sends on a session it dials,
// after the hello: 'F' | le16 data format. The hello already names the
// format, and a node that knows formats checks it there (admitHello); the
// frame is for a node of the previous build, which knows none: it takes
// 'F' for an unknown frame and drops the session before any raft message,
// so it never takes entries whose meaning it does not share.
const FrameDataFormat byte = 'F'

func appendDataFormat(dst []byte, format uint16) []byte {
	return binary.LittleEndian.AppendUint16(append(dst, FrameDataFormat), format)
}

// handleDataFormat checks an 'F' frame: the session's hello named the same
// format, so another one here is a broken peer.
func handleDataFormat(frame []byte) error {
	if len(frame) != 3 {
		return fmt.Errorf("raft: data format frame of %d bytes", len(frame))
	}
	if f := binary.LittleEndian.Uint16(frame[1:]); f != store.DataFormat {
		return fmt.Errorf("raft: data format frame names format %d; this node runs %d", f, store.DataFormat)
	}
	return nil
}
