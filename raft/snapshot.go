package raft

import (
	"github.com/kvd-project/kvd/transport"
)

// streamSnapshot sends om's checkpoint to the peer over conn in chunks of
// at most SnapshotChunkSize bytes, then the MsgSnap itself, and reports the
// outcome to raft. It runs beside the peer's sender, sharing conn (sends
// from two goroutines interleave whole), so heartbeats keep flowing.
func (p *peer) streamSnapshot(conn transport.Conn, om outMsg) {
	defer p.ps.wg.Done()
	defer om.cp.Release()
	n := p.ps.n
	err := p.sendSnapshotData(conn, om)
	if err == nil {
		var frame []byte
		if frame, err = appendMessageFrame(nil, om.m); err == nil {
			err = conn.Send(p.ctx, frame)
		}
	}
	if err != nil {
		n.log.Warn("snapshot transfer failed", "peer", p.id, "index", om.cp.Index(), "err", err)
		n.reportBlocking(report{to: p.id, kind: reportSnapshotFailed})
		return
	}
	n.log.Info("snapshot sent", "peer", p.id, "index", om.cp.Index())
	n.reportBlocking(report{to: p.id, kind: reportSnapshotDone})
}

func (p *peer) sendSnapshotData(conn transport.Conn, om outMsg) error {
	limit := min(p.ps.n.cfg.SnapshotChunkSize, conn.MaxMessage())
	if err := conn.Send(p.ctx, appendSnapshotBegin(nil, om.cp.Index(), om.cp.Term())); err != nil {
		return err
	}
	chunk := make([]byte, 1, limit)
	chunk[0] = frameSnapshotChunk
	flush := func() error {
		if len(chunk) == 1 {
			return nil
		}
		err := conn.Send(p.ctx, chunk)
		chunk = chunk[:1]
		return err
	}
	err := om.cp.ForEach(func(key, raw []byte) error {
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
