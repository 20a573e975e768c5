package client

import (
	"context"
	"encoding/binary"

	"github.com/kvd-project/kvd/internal/wire"
)

// Compact compacts the cluster's history to revision rev, as etcd's
// Compact: reads at a revision below rev and watches from one fail with
// ErrCompacted from then on, on every member. It fails with
// ErrFutureRevision if rev is past the store revision, and with
// ErrCompacted if the history is already compacted at rev or later. Like a
// write, one that fails with ErrUnavailable may or may not have been
// applied (a retry of an applied one would fail as compacted).
func (c *Client) Compact(ctx context.Context, rev uint64) error {
	_, err := c.CompactRevision(ctx, rev)
	return err
}

// CompactRevision is Compact that also returns the store revision when
// the compaction was applied (etcd's Compact response header revision).
func (c *Client) CompactRevision(ctx context.Context, rev uint64) (uint64, error) {
	ctx, cancel := c.withTimeout(ctx)
	defer cancel()
	resp, err := c.leaderCall(ctx, &wire.Request{Op: wire.OpCompact, Value: binary.LittleEndian.AppendUint64(nil, rev)}, false)
	return resp.Version, err
}
