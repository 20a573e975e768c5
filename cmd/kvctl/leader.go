package main

import (
	"context"
	"fmt"
	"strconv"
)

const moveLeaderUsage = "move-leader ID"

// runMoveLeader hands leadership to member ID and prints, as etcdctl does,
// "Leadership transferred from OLD to ID" (member IDs in decimal, as
// member list shows them).
func runMoveLeader(ctx context.Context, e *env, args []string) error {
	to, err := parseID(args[0])
	if err != nil {
		return err
	}
	from, err := e.c.MoveLeader(ctx, to)
	if err != nil {
		return err
	}
	return e.print(map[string]any{"from": jsonID(from), "to": jsonID(to)},
		fmt.Sprintf("Leadership transferred from %d to %d", from, to))
}

// runCompaction compacts the cluster's history to REV and prints, as
// etcdctl does, "compacted revision REV".
func runCompaction(ctx context.Context, e *env, args []string) error {
	rev, err := strconv.ParseUint(args[0], 10, 64)
	if err != nil || rev == 0 {
		return usageError{fmt.Sprintf("compaction: revision %q: want a positive integer", args[0])}
	}
	if err := e.c.Compact(ctx, rev); err != nil {
		return err
	}
	return e.print(map[string]any{"revision": rev}, fmt.Sprintf("compacted revision %d", rev))
}
