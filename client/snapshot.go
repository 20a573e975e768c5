package client

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/kvd-project/kvd/internal/backup"
	"github.com/kvd-project/kvd/internal/errs"
	"github.com/kvd-project/kvd/internal/wire"
	"github.com/kvd-project/kvd/transport"
)

// ErrSnapshotStream: a backup stream broke off or did not check out (a
// chunk out of place, a file that does not verify). What was written to
// the destination is incomplete and must be discarded.
var ErrSnapshotStream = errs.ErrSnapshotStream

// SnapshotInfo describes a backup Snapshot wrote.
type SnapshotInfo struct {
	Index uint64 // the applied index of the state
	// Revision is the store revision of the state, Compacted its
	// compaction revision (0: none).
	Revision, Compacted uint64
	Keys                uint64
	Leases              uint64 // TTL leases the backup carries
	Bytes               int64
	SHA256              []byte // the file's checksum (its trailer)
	Node                string // the node that streamed it (the leader)
}

// Snapshot writes a backup of the cluster's applied state to w: the state
// as of one index, taken by the leader after a ReadIndex (it holds every
// write acknowledged before Snapshot was called), in internal/backup's
// file format. The file is checked as it arrives (format and checksum);
// on any error what reached w is incomplete.
//
// The stream uses a connection of its own, so it holds up none of the
// client's other calls; ctx bounds the whole stream, and RequestTimeout
// bounds each wait for the next chunk. A node that is not the leader, or
// is busy with another backup (MaxSnapshotStreams), is moved past before
// anything was written to w; the first chunk commits the call to its node.
func (c *Client) Snapshot(ctx context.Context, w io.Writer) (SnapshotInfo, error) {
	if c.closed.Load() {
		return SnapshotInfo{}, ErrClosed
	}
	// Its stream's connection is its own, which Close does not know of.
	ctx, cancel := c.untilClosed(ctx, 0)
	defer cancel()
	info, err := c.snapshot(ctx, w)
	if err != nil && c.closed.Load() {
		err = fmt.Errorf("%w (%w)", ErrClosed, err)
	}
	return info, err
}

func (c *Client) snapshot(ctx context.Context, w io.Writer) (SnapshotInfo, error) {
	var lastErr error
	tried := map[string]bool{}
	queue := c.targets()
	for len(queue) > 0 {
		addr := queue[0]
		queue = queue[1:]
		if tried[addr] {
			continue
		}
		tried[addr] = true
		info, started, err := c.snapshotFrom(ctx, addr, w)
		if err == nil || started || ctx.Err() != nil {
			return info, err
		}
		lastErr = fromNode(addr, err)
		var nl *NotLeaderError
		switch {
		case errors.As(err, &nl) && nl.LeaderAddr != "":
			queue = append([]string{nl.LeaderAddr}, queue...)
		case !retryable(err):
			return info, lastErr
		}
	}
	return SnapshotInfo{}, fmt.Errorf("%w: no node streamed a snapshot (last error: %w)", ErrUnavailable, lastErr)
}

// snapshotFrom streams a backup from addr. started: chunks were written to
// w, so the call must not move on to another node.
func (c *Client) snapshotFrom(ctx context.Context, addr string, w io.Writer) (info SnapshotInfo, started bool, err error) {
	dctx, cancel := context.WithTimeout(ctx, c.cfg.DialTimeout)
	conn, err := c.tr.Dial(dctx, addr)
	cancel()
	if errors.Is(err, transport.ErrAuthRefused) {
		return info, false, fmt.Errorf("%w: dial %s: %w", ErrUnauthenticated, addr, err)
	}
	if err != nil {
		return info, false, fmt.Errorf("%w: dial %s: %w", ErrUnavailable, addr, err)
	}
	defer conn.Close()
	const id = 1
	if err := conn.Send(ctx, wire.AppendRequest(nil, &wire.Request{Op: wire.OpSnapshot, ID: id})); err != nil {
		return info, false, fmt.Errorf("%w: %s: %w", ErrUnavailable, addr, err)
	}
	chk := newStreamCheck(w)
	defer chk.abort()
	var buf []byte
	for {
		rctx, cancel := context.WithTimeout(ctx, c.cfg.RequestTimeout)
		buf, err = conn.Recv(rctx, buf[:0])
		cancel()
		if err != nil {
			return info, chk.started, c.streamErr(addr, chk.started, err)
		}
		var resp wire.Response
		if err := wire.DecodeResponse(buf, &resp); err != nil || resp.ID != id || resp.Op != wire.OpSnapshot {
			return info, chk.started, fmt.Errorf("%w: %s: unexpected response (%v)", ErrSnapshotStream, addr, err)
		}
		if err := statusError(&resp); err != nil {
			return info, chk.started, c.streamErr(addr, chk.started, err)
		}
		last, data, err := wire.DecodeSnapshotChunk(resp.Value)
		if err != nil {
			return info, chk.started, fmt.Errorf("%w: %s: %w", ErrSnapshotStream, addr, err)
		}
		if err := chk.write(data); err != nil {
			return info, true, fmt.Errorf("%w: %s: %w", ErrSnapshotStream, addr, err)
		}
		if last {
			h, sum, err := chk.finish()
			if err != nil {
				return info, true, fmt.Errorf("%w: %s: %w", ErrSnapshotStream, addr, err)
			}
			return SnapshotInfo{Index: h.Index, Revision: h.Revision, Compacted: h.Compacted, Keys: h.Keys, Leases: h.Leases,
				Bytes: chk.n, SHA256: sum, Node: addr}, true, nil
		}
	}
}

// streamErr wraps a failure: before the first chunk as the node's error
// (the caller may move on), after it as a broken stream.
func (c *Client) streamErr(addr string, started bool, err error) error {
	if started {
		return fmt.Errorf("%w: %s: %w", ErrSnapshotStream, addr, err)
	}
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		return fmt.Errorf("%w: %s: %w", ErrUnavailable, addr, err)
	}
	return err
}

// streamCheck writes the stream to its destination and, through a pipe,
// to backup.Verify, which checks it as it arrives.
type streamCheck struct {
	w       io.Writer
	pw      *io.PipeWriter
	done    chan verifyResult
	n       int64
	started bool
}

type verifyResult struct {
	h   backup.Header
	sum []byte
	err error
}

func newStreamCheck(w io.Writer) *streamCheck {
	pr, pw := io.Pipe()
	sc := &streamCheck{w: w, pw: pw, done: make(chan verifyResult, 1)}
	go func() {
		h, sum, err := backup.Verify(pr)
		pr.CloseWithError(err) // a writer blocked on a bad stream gets the error
		sc.done <- verifyResult{h, sum, err}
	}()
	return sc
}

func (sc *streamCheck) write(data []byte) error {
	sc.started = true
	if _, err := sc.w.Write(data); err != nil {
		return err
	}
	sc.n += int64(len(data))
	if _, err := sc.pw.Write(data); err != nil {
		return fmt.Errorf("backup does not verify: %w", err)
	}
	return nil
}

func (sc *streamCheck) finish() (backup.Header, []byte, error) {
	sc.pw.Close()
	r := <-sc.done
	sc.done = nil
	return r.h, r.sum, r.err
}

// abort stops the verifier if the stream ended early.
func (sc *streamCheck) abort() {
	if sc.done != nil {
		sc.pw.CloseWithError(ErrSnapshotStream)
		<-sc.done
	}
}
