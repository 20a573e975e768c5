package client

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/kvd-project/kvd/internal/wire"
)

// HashKV is one member's hash of its key-value state at a revision
// (etcd's HashKV): members whose states agree hash alike at the same
// revision, whatever their compaction.
type HashKV = wire.HashKV

// HashKV asks the node at endpoint for the hash of its own key-value state
// at store revision rev (0: its latest), to compare members: the node
// answers from what it has applied, without asking the leader, so a
// lagging member may not have reached rev yet (ErrFutureRevision). A rev
// below the node's compaction revision fails with ErrCompacted.
func (c *Client) HashKV(ctx context.Context, endpoint string, rev uint64) (HashKV, error) {
	ctx, cancel := c.withTimeout(ctx)
	defer cancel()
	resp, err := c.callAt(ctx, endpoint, &wire.Request{Op: wire.OpHashKV, Value: binary.LittleEndian.AppendUint64(nil, rev)})
	switch {
	case errors.Is(err, ErrCompacted) || errors.Is(err, ErrFutureRevision) || errors.Is(err, ErrBadRequest):
		return HashKV{}, fmt.Errorf("%s: %w", endpoint, err) // the node's answer
	case err != nil:
		var f failures
		f.add(endpoint, err)
		return HashKV{}, f.err(ctx.Err())
	}
	h, err := wire.DecodeHashKV(resp.Value)
	if err != nil {
		return HashKV{}, fmt.Errorf("%w: %s: %w", ErrUnavailable, endpoint, err)
	}
	return h, nil
}
