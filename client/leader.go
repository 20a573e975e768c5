package client

import (
	"context"
	"strconv"

	"github.com/kvd-project/kvd/internal/wire"
)

// MoveLeader makes voter to the cluster's leader (etcd's MoveLeader) and
// returns the id of the member that led before, once to leads. The leader
// first gives up its read lease (linearizable GETs go by RPC meanwhile)
// and for a moment drops writes, which the client retries. A learner, or
// an id that is not a member, is a bad request; a target that does not
// take over fails with ErrUnavailable, the old leader (or another) leading
// on. Moving leadership to the leader itself does nothing.
func (c *Client) MoveLeader(ctx context.Context, to uint64) (from uint64, err error) {
	ctx, cancel := c.withTimeout(ctx)
	defer cancel()
	resp, err := c.leaderCall(ctx, &wire.Request{Op: wire.OpMoveLeader, Key: strconv.AppendUint(nil, to, 10)}, false)
	if err != nil {
		return 0, err
	}
	return resp.Version, nil
}
