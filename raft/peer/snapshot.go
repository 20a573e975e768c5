package peer

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"

	"github.com/kvd-project/kvd/transport"
)

// streamSnapshot sends om's checkpoint to the peer over conn in chunks of
// at most SnapshotChunkSize bytes, then the MsgSnap itself, all tagged with
// a fresh transfer id, and reports the outcome to raft. It runs beside the
// peer's sender, sharing conn (sends from two goroutines interleave whole),
// so heartbeats keep flowing. It sends nothing before prev, the transfer it
// replaces (already aborted), has stopped, and nothing once ctx ends (the
// transfer was aborted).
func (p *peer) streamSnapshot(ctx context.Context, t, prev *transfer, conn transport.Conn, om outMsg) {
	defer p.ps.wg.Done()
	ps := p.ps
	if prev != nil {
		<-prev.done
	}
	id := TransferID{Index: om.cp.Index(), Term: om.cp.Term(), Nonce: rand.Uint64()}
	err := p.sendTransfer(ctx, conn, id, om)
	p.endTransfer(t)
	om.cp.Release()
	switch {
	case err == nil:
		ps.log.Info("snapshot sent", "peer", p.id, "index", id.Index)
		ps.host.ReportSnapshot(p.id, om.seq, true)
		return
	case errors.Is(err, context.Canceled) && p.ctx.Err() == nil:
		ps.log.Info("snapshot transfer aborted", "peer", p.id, "index", id.Index)
	default:
		ps.log.Warn("snapshot transfer failed", "peer", p.id, "index", id.Index, "err", err)
	}
	ps.host.ReportSnapshot(p.id, om.seq, false)
}

// sendTransfer sends transfer id: the begin frame, the checkpoint's data
// and the MsgSnap.
func (p *peer) sendTransfer(ctx context.Context, conn transport.Conn, id TransferID, om outMsg) error {
	timeout := p.ps.cfg.Knobs.SnapshotFrameTimeout
	send := func(frame []byte) error {
		if err := ctx.Err(); err != nil {
			return err // an aborted transfer sends nothing more
		}
		fctx, cancel := context.WithTimeout(ctx, timeout)
		defer cancel()
		if err := conn.Send(fctx, frame); err != nil {
			if ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded) {
				return fmt.Errorf("raft: the peer took no snapshot frame for %v: %w", timeout, err)
			}
			return err
		}
		return nil
	}
	if err := send(AppendSnapshotBegin(nil, id)); err != nil {
		return err
	}
	limit := min(p.ps.cfg.SnapshotChunkSize, conn.MaxMessage())
	if err := sendRecords(send, limit, FrameSnapshotChunk, id, om.cp.ForEach); err != nil {
		return err
	}
	// The TTL leases and their keys' attachments travel after the keys.
	if err := sendRecords(send, limit, FrameSnapshotLease, id, om.cp.ForEachLease); err != nil {
		return err
	}
	// Then the revisions and the history of past values.
	if err := sendRecords(send, limit, FrameSnapshotRevision, id, om.cp.ForEachRevision); err != nil {
		return err
	}
	end, err := AppendSnapshotEnd(nil, id, om.m)
	if err != nil {
		return err
	}
	return send(end)
}

// sendRecords sends the pairs forEach yields in frames of type tag, each
// of at most limit bytes (a larger pair alone).
func sendRecords(send func([]byte) error, limit int, tag byte, id TransferID,
	forEach func(fn func(key, raw []byte) error) error) error {
	chunk := AppendSnapshotHeader(make([]byte, 0, max(limit, SnapshotHeaderLen)), tag, id)
	flush := func() error {
		if len(chunk) == SnapshotHeaderLen {
			return nil
		}
		err := send(chunk)
		chunk = chunk[:SnapshotHeaderLen]
		return err
	}
	err := forEach(func(key, raw []byte) error {
		if len(chunk)+chunkRecordSize(key, raw) > limit {
			if err := flush(); err != nil {
				return err
			}
		}
		chunk = AppendChunkRecord(chunk, key, raw)
		return nil
	})
	if err != nil {
		return err
	}
	return flush()
}
