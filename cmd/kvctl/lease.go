package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/kvd-project/kvd/client"
)

const leaseUsage = "lease grant TTL | keepalive ID | revoke ID | ttl ID | list"

// runLease runs the lease subcommands. grant prints the new lease's id
// alone (so scripts can take it: ID=$(kvctl lease grant 10s)); keepalive
// renews the lease every third of its TTL, printing the TTL each time,
// until interrupted (exit 0) or the lease is gone (exit 1).
func runLease(ctx context.Context, e *env, args []string) error {
	if len(args) == 1 && args[0] == "list" {
		return listLeases(ctx, e)
	}
	if len(args) != 2 {
		return usageError{"usage: kvctl " + leaseUsage}
	}
	if args[0] == "grant" {
		ttl, err := parseTTL(args[1])
		if err != nil {
			return err
		}
		id, err := e.c.Grant(ctx, ttl)
		if err != nil {
			return err
		}
		return e.print(map[string]any{"id": jsonID(id), "ttl": ttl.String()}, id.String())
	}

	id, err := parseLeaseID(args[1])
	if err != nil {
		return err
	}
	switch args[0] {
	case "revoke":
		if err := e.c.Revoke(ctx, id); err != nil {
			return err
		}
		return e.print(map[string]any{"ok": true, "id": jsonID(id)}, "OK")
	case "ttl", "timetolive": // timetolive: etcdctl's name
		info, err := e.c.TimeToLive(ctx, id)
		if err != nil {
			return err
		}
		return e.print(map[string]any{"id": jsonID(id), "ttl": info.TTL.String(), "remaining": info.Remaining.String(), "keys": info.Keys},
			fmt.Sprintf("lease %v: granted TTL %v, remaining %v, %d keys", id, info.TTL, info.Remaining.Round(time.Millisecond), info.Keys))
	case "keepalive":
		return keepAlive(e, id)
	}
	return usageError{"usage: kvctl " + leaseUsage}
}

// listLeases prints the leases that exist as etcdctl does: "found N
// leases", then an ID a line; -w json: {"leases": [{"id": ...}...]}.
func listLeases(ctx context.Context, e *env) error {
	ids, err := e.c.Leases(ctx)
	if err != nil {
		return err
	}
	if e.o.write == "json" {
		type leaseJSON struct {
			ID jsonID `json:"id"`
		}
		out := struct {
			Leases []leaseJSON `json:"leases"`
		}{[]leaseJSON{}}
		for _, id := range ids {
			out.Leases = append(out.Leases, leaseJSON{jsonID(id)})
		}
		return e.json(out)
	}
	w := bufio.NewWriter(e.out)
	fmt.Fprintf(w, "found %d leases\n", len(ids))
	for _, id := range ids {
		fmt.Fprintln(w, id)
	}
	return w.Flush()
}

// keepAlive renews id until interrupted: each renewal bounded by
// --timeout, the whole loop by nothing but an interrupt.
func keepAlive(e *env, id client.LeaseID) error {
	for {
		ctx, cancel := context.WithTimeout(e.base, e.o.timeout)
		ttl, err := e.c.KeepAliveOnce(ctx, id)
		cancel()
		switch {
		case e.base.Err() != nil:
			return nil // interrupted
		case errors.Is(err, client.ErrLeaseNotFound):
			return err
		case err != nil:
			fmt.Fprintf(e.errOut, "kvctl: keepalive failed (retrying): %v\n", err)
			ttl = 3 * time.Second // retry in a second
		default:
			if err := e.print(map[string]any{"id": jsonID(id), "ttl": ttl.String()}, fmt.Sprintf("lease %v kept alive with TTL %v", id, ttl)); err != nil {
				return err
			}
		}
		select {
		case <-e.base.Done():
			return nil
		case <-time.After(ttl / 3):
		}
	}
}

// parseTTL is lease grant's TTL: a duration (10s, 1m), or a bare
// integer of seconds as etcdctl takes it.
func parseTTL(s string) (time.Duration, error) {
	if n, err := strconv.ParseUint(s, 10, 32); err == nil {
		return time.Duration(n) * time.Second, nil
	}
	ttl, err := time.ParseDuration(s)
	if err != nil {
		return 0, usageError{fmt.Sprintf("lease grant: TTL %q: want seconds (10) or a duration (10s, 1m)", s)}
	}
	return ttl, nil
}

// parseLeaseID reads a lease ID as lease grant prints it, in simple or
// JSON output (parseUint64ID).
func parseLeaseID(s string) (client.LeaseID, error) {
	v, ok := parseUint64ID(s)
	if !ok {
		return 0, usageError{idUsage("lease ID", s)}
	}
	return client.LeaseID(v), nil
}

// leaseFlag is put's --lease.
type leaseFlag struct{ id client.LeaseID }

func (f *leaseFlag) String() string {
	if f.id == 0 {
		return ""
	}
	return f.id.String()
}

func (f *leaseFlag) Set(s string) error {
	id, err := parseLeaseID(s)
	if err != nil {
		return errors.New("want a lease ID (as lease grant printed)")
	}
	f.id = id
	return nil
}

// print writes v as JSON with -w json, else line.
func (e *env) print(v any, line string) error {
	if e.o.write == "json" {
		return e.json(v)
	}
	_, err := fmt.Fprintln(e.out, line)
	return err
}
