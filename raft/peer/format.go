package peer

import (
	"encoding/binary"
	"fmt"
	"time"

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

// formatPause is how long a node does not dial a member whose hello named
// another data format. That member drops this node's sessions (at the
// 'F' frame, if it is of the previous build), and each message would dial
// it anew: a line in its log (unlimited, in the previous build) at every
// heartbeat. The pause ends early when a hello of the member names this
// node's format (it was upgraded).
const formatPause = time.Minute

// noteFormat records what member id's latest hello said of its data
// format: this node's (same), or another.
func (ps *Set) noteFormat(id uint64, same bool) {
	if same {
		ps.mu.Lock()
		p := ps.peers[id]
		ps.mu.Unlock()
		if p != nil {
			p.otherFormat.Store(0)
		}
		return
	}
	if p := ps.get(id); p != nil {
		p.otherFormat.Store(time.Now().UnixNano())
	}
}

// pausedForFormat reports whether the peer is not to be dialled: its hello
// named another data format less than formatPause ago.
func (p *peer) pausedForFormat() bool {
	at := p.otherFormat.Load()
	return at != 0 && time.Since(time.Unix(0, at)) < formatPause
}
