package raft

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

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
	n := p.ps.n
	if prev != nil {
		<-prev.done
	}
	id := transferID{index: om.cp.Index(), term: om.cp.Term(), nonce: rand.Uint64()}
	err := p.sendTransfer(ctx, conn, id, om)
	p.endTransfer(t)
	om.cp.Release()
	switch {
	case err == nil:
		n.log.Info("snapshot sent", "peer", p.id, "index", id.index)
		n.reportBlocking(report{to: p.id, kind: reportSnapshotDone, seq: om.seq})
		return
	case errors.Is(err, context.Canceled) && p.ctx.Err() == nil:
		n.log.Info("snapshot transfer aborted", "peer", p.id, "index", id.index)
	default:
		n.log.Warn("snapshot transfer failed", "peer", p.id, "index", id.index, "err", err)
	}
	n.reportBlocking(report{to: p.id, kind: reportSnapshotFailed, seq: om.seq})
}

// snapshotFrameTimeout bounds how long one frame of a snapshot transfer
// may wait to be sent. A peer that takes nothing for this long (its
// session open, its credits never returned) would otherwise hold the
// transfer, and the Pebble checkpoint it pins, until the next change of
// leadership; past it the transfer fails, the checkpoint is released and
// raft is told, to try again later. A frame is at most SnapshotChunkSize
// (1 MiB by default): a minute is slower than any link a cluster runs on.
// A variable so that tests can shorten it.
var snapshotFrameTimeout = time.Minute

// sendTransfer sends transfer id: the begin frame, the checkpoint's data
// and the MsgSnap.
func (p *peer) sendTransfer(ctx context.Context, conn transport.Conn, id transferID, om outMsg) error {
	send := func(frame []byte) error {
		if err := ctx.Err(); err != nil {
			return err // an aborted transfer sends nothing more
		}
		fctx, cancel := context.WithTimeout(ctx, snapshotFrameTimeout)
		defer cancel()
		if err := conn.Send(fctx, frame); err != nil {
			if ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded) {
				return fmt.Errorf("raft: the peer took no snapshot frame for %v: %w", snapshotFrameTimeout, err)
			}
			return err
		}
		return nil
	}
	if err := send(appendSnapshotBegin(nil, id)); err != nil {
		return err
	}
	limit := min(p.ps.n.cfg.SnapshotChunkSize, conn.MaxMessage())
	if err := sendRecords(send, limit, frameSnapshotChunk, id, om.cp.ForEach); err != nil {
		return err
	}
	// The TTL leases and their keys' attachments travel after the keys.
	if err := sendRecords(send, limit, frameSnapshotLease, id, om.cp.ForEachLease); err != nil {
		return err
	}
	end, err := appendSnapshotEnd(nil, id, om.m)
	if err != nil {
		return err
	}
	return send(end)
}

// sendRecords sends the pairs forEach yields in frames of type tag, each
// of at most limit bytes (a larger pair alone).
func sendRecords(send func([]byte) error, limit int, tag byte, id transferID,
	forEach func(fn func(key, raw []byte) error) error) error {
	chunk := appendSnapshotFrameHeader(make([]byte, 0, max(limit, snapshotFrameHeader)), tag, id)
	flush := func() error {
		if len(chunk) == snapshotFrameHeader {
			return nil
		}
		err := send(chunk)
		chunk = chunk[:snapshotFrameHeader]
		return err
	}
	err := forEach(func(key, raw []byte) error {
		if len(chunk)+chunkRecordSize(key, raw) > limit {
			if err := flush(); err != nil {
				return err
			}
		}
		chunk = appendChunkRecord(chunk, key, raw)
		return nil
	})
	if err != nil {
		return err
	}
	return flush()
}
