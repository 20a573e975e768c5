package main

import (
	"context"
	"fmt"
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
