package peer

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/kvd-project/kvd/internal/store"
	"github.com/kvd-project/kvd/transport"
)

// Telling a removed member it was removed.
//
// etcd raft stops talking to a node the moment its removal is applied, so
// a removed node that had not applied the removal itself (it was behind,
// or cut off) would never learn of it: it would campaign without end and
// serve its last state to readers forever. Two messages close that gap,
// both the frame
//
//	'R' le64 id      member id was removed from the cluster
//
// which only the removed member takes (a frame naming another id is
// ignored):
//
//   - the farewell: every member that applies a removal opens a session to
//     the removed member and sends it 'R' (Remove). The removed member
//     stops serving, then closes the session; the member waits for that
//     close (FarewellDone), so the leader can tell the operator the
//     removed node has stopped serving before it acknowledges the removal.
//   - the refusal: a member that refuses a session because its sender was
//     removed answers the hello with 'R' before closing, and the dialer
//     reads its sessions for it (watchRefusal). That reaches a member that
//     was cut off during its removal, or restarted from a copy of its data
//     directory, as soon as it talks to any member.
//
// A node of an older version takes 'R' for an unknown frame and drops the
// session (the farewell), or never reads its dialled sessions (the
// refusal): it goes on as before, refused.

// FrameRemoved tags the frame telling a member it was removed.
const FrameRemoved byte = 'R'

const removedFrameLen = 1 + 8

// errRemovedNotice ends the session that told this node it was removed.
var errRemovedNotice = errors.New("raft: this member was removed from the cluster")

func appendRemoved(dst []byte, id uint64) []byte {
	return binary.LittleEndian.AppendUint64(append(dst, FrameRemoved), id)
}

// parseRemoved returns the id an 'R' frame names.
func parseRemoved(frame []byte) (uint64, error) {
	if len(frame) != removedFrameLen || frame[0] != FrameRemoved {
		return 0, fmt.Errorf("raft: malformed removal frame (%d bytes)", len(frame))
	}
	return binary.LittleEndian.Uint64(frame[1:]), nil
}

// handleRemoved takes an 'R' frame from member r.from's session: if it
// names this node, the host stops (Host.Removed returns once it serves
// nothing more), and the session ends, which is the farewell's answer.
func (r *Reader) handleRemoved(frame []byte) error {
	id, err := parseRemoved(frame)
	if err != nil {
		return err
	}
	if id != r.ps.cfg.ID {
		return nil
	}
	r.ps.host.Removed(r.from)
	return errRemovedNotice
}

// refuseRemoved answers the hello of a removed member with 'R', and holds
// the connection until the dialer closes it (a bounded wait): closing at
// once could lose the frame on its way.
func (ps *Set) refuseRemoved(conn transport.Conn, from uint64) {
	ps.refuse(RefuseRemoved, conn, fmt.Errorf("%w: node %d was removed from the cluster", ErrRefused, from))
	ctx, cancel := context.WithTimeout(ps.ctx, ps.cfg.ElectionTimeout)
	defer cancel()
	if conn.Send(ctx, appendRemoved(nil, from)) != nil {
		return
	}
	var buf []byte
	for {
		var err error
		if buf, err = conn.Recv(ctx, buf); err != nil {
			return
		}
	}
}

// watchRefusal reads a dialled session, on which a member sends nothing
// but a refusal: 'R' naming this node means it was removed. It returns
// when the connection closes.
func (p *peer) watchRefusal(conn transport.Conn) {
	defer p.ps.wg.Done()
	var buf []byte
	for {
		msg, err := conn.Recv(p.ps.ctx, buf)
		if err != nil {
			return
		}
		buf = msg
		if id, err := parseRemoved(msg); err == nil && id == p.ps.cfg.ID {
			p.ps.host.Removed(p.id)
			conn.Close()
			return
		}
	}
}

// farewell tells removed member id it was removed (the farewell above)
// and records whether it acknowledged (closed the session) in time.
func (ps *Set) farewell(id uint64, addr string, f *farewellState) {
	defer ps.wg.Done()
	defer close(f.done)
	if addr == "" {
		return
	}
	ctx, cancel := context.WithTimeout(ps.ctx, farewellTimeouts*ps.cfg.ElectionTimeout)
	defer cancel()
	conn, err := ps.cfg.Transport.Dial(ctx, addr)
	if err != nil {
		ps.log.Info("could not tell the removed member it was removed", "peer", id, "err", err)
		return
	}
	defer conn.Close()
	h := AppendHello(nil, Hello{From: ps.cfg.ID, Cluster: ps.ident.get(), Addr: ps.cfg.Addr, Format: store.DataFormat})
	if conn.Send(ctx, h) != nil || conn.Send(ctx, appendRemoved(nil, id)) != nil {
		return
	}
	// The removed member sends nothing on a session it serves: Recv
	// returns when it closes the session, or when the wait ends.
	_, err = conn.Recv(ctx, nil)
	f.acked = ctx.Err() == nil && err != nil
	if !f.acked {
		ps.log.Info("the removed member did not acknowledge its removal", "peer", id, "err", err)
	}
}

// farewellTimeouts bounds a farewell, in election timeouts: the removal
// waits that long at most for a removed node that does not answer (one
// that is down refuses the dial at once). A loaded machine may take a
// while to dial, and a removed node's answer is what lets the removal
// promise no stale reads from it.
const farewellTimeouts = 5

// farewellState is one farewell's outcome: acked is set before done closes.
type farewellState struct {
	done  chan struct{}
	acked bool
}

// startFarewell starts the farewell to removed member id, once.
func (ps *Set) startFarewell(id uint64, addr string) {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	if ps.closed || ps.farewells[id] != nil {
		return
	}
	f := &farewellState{done: make(chan struct{})}
	ps.farewells[id] = f
	ps.wg.Add(1)
	go ps.farewell(id, addr, f)
}

// FarewellDone waits until removed member id acknowledged its removal
// (true: it serves nothing more), or the farewell gave up (false: the
// member is unreachable, or of a version that does not answer), or ctx
// ends. A member this node never told returns false at once.
func (ps *Set) FarewellDone(ctx context.Context, id uint64) bool {
	ps.mu.Lock()
	f := ps.farewells[id]
	ps.mu.Unlock()
	if f == nil {
		return false
	}
	select {
	case <-f.done:
		return f.acked
	case <-ctx.Done():
		return false
	case <-time.After((farewellTimeouts + 1) * ps.cfg.ElectionTimeout): // the farewell's own bound, and then some
		return false
	}
}
