package redisapi

import (
	"context"
	"errors"
	"math"
	"strings"
	"time"

	"github.com/kvd-project/kvd/client"
)

// Expiry maps onto kvd's TTL leases, one per key: SET ... EX and EXPIRE
// grant a lease of the time left and attach the key to it, and the key is
// deleted when the lease expires. A lease lives at least its TTL and is
// at least client.MinLeaseTTL (1 s) long, so a key expires no earlier
// than asked and up to about a second later for shorter TTLs; a new
// leader gives every lease its full TTL again. At most limits.MaxLeases
// keys may have an expiry at once. A lease left without keys (its key
// was given another, or lost it to SET) is revoked.

// expiry is an expire option: the time left, from now.
type expiry struct {
	set bool
	ttl time.Duration // <= 0: already past
}

func isExpireOpt(opt string) bool {
	return opt == "EX" || opt == "PX" || opt == "EXAT" || opt == "PXAT"
}

// parseExpiry reads the value of an EX, PX, EXAT or PXAT option (or of
// EXPIRE/PEXPIRE, as EX/PX) as Redis does.
func parseExpiry(opt string, arg []byte, cmd string) (expiry, reply) {
	n, okInt := parseInt(arg)
	if !okInt {
		return expiry{}, errNotInt
	}
	invalid := errReply("ERR invalid expire time in '" + cmd + "' command")
	if cmd == "set" && n <= 0 {
		return expiry{}, invalid
	}
	ms := n
	if opt == "EX" || opt == "EXAT" {
		if n > math.MaxInt64/1000 || n < math.MinInt64/1000 {
			return expiry{}, invalid
		}
		ms = n * 1000
	}
	if opt == "EXAT" || opt == "PXAT" {
		ms -= time.Now().UnixMilli()
	}
	if ms > client.MaxLeaseTTL.Milliseconds() {
		return expiry{}, errReply("ERR kvd: an expiry more than " + client.MaxLeaseTTL.String() + " away is not supported")
	}
	return expiry{set: true, ttl: time.Duration(ms) * time.Millisecond}, nil
}

// grant makes the lease of a key that expires after ttl.
func (c *conn) grant(ctx context.Context, ttl time.Duration) (client.LeaseID, error) {
	return c.s.c.Grant(ctx, max(ttl, client.MinLeaseTTL))
}

// retireLease revokes lease id if no key is attached to it any more: it
// was a key's, and that key has another now, or none. Best effort: an
// unrevoked lease expires by itself.
func (c *conn) retireLease(ctx context.Context, id client.LeaseID) {
	if id == 0 {
		return
	}
	if info, err := c.s.c.TimeToLive(ctx, id); err == nil && info.Keys == 0 {
		c.s.c.Revoke(ctx, id)
	}
}

// setWithExpiry is SET with EX, PX, EXAT or PXAT: one transaction reads
// the old value and puts the new one with a fresh lease, under NX or XX.
// An expiry already past deletes the key instead, as Redis does.
func (c *conn) setWithExpiry(key, val []byte, a setArgs) reply {
	ctx, cancel := c.ctx()
	defer cancel()
	var lease client.LeaseID
	put := client.OpDelete(key)
	if a.expire.ttl > 0 {
		var err error
		if lease, err = c.grant(ctx, a.expire.ttl); err != nil {
			return kvdError(err)
		}
		put = client.OpPutLease(key, val, lease)
	}
	t := client.Txn{Then: []client.Op{client.OpGet(key), put}, Else: []client.Op{client.OpGet(key)}}
	switch {
	case a.nx:
		t.If = []client.Cmp{client.KeyMissing(key)}
	case a.xx:
		t.If = []client.Cmp{client.KeyExists(key)}
	}
	res, err := c.s.c.Txn(ctx, t)
	if err != nil {
		// A write that may have been applied keeps its lease, which
		// expires by itself; one that surely was not gives it back.
		if errors.Is(err, client.ErrNotApplied) || !errors.Is(err, client.ErrUnavailable) {
			c.retireLease(ctx, lease)
		}
		return kvdError(err)
	}
	old := res.Results[0]
	if !res.Succeeded {
		c.retireLease(ctx, lease)
	} else {
		c.retireLease(ctx, old.Lease)
	}
	switch {
	case a.get:
		return valueOrNull(old.Value, old.Found)
	case !res.Succeeded:
		return nullReply{}
	}
	return ok
}

// runExpire is EXPIRE and PEXPIRE, with Redis 7's NX (only a key without
// an expiry) and XX (only one with). A time not in the future deletes the
// key.
func runExpire(c *conn, args [][]byte) reply {
	name := strings.ToLower(string(args[0]))
	unit := "EX"
	if name == "pexpire" {
		unit = "PX"
	}
	e, bad := parseExpiry(unit, args[2], name)
	if bad != nil {
		return bad
	}
	var conds []client.Cmp
	for _, o := range args[3:] {
		switch strings.ToUpper(string(o)) {
		case "NX":
			conds = append(conds, client.CompareLease(args[1], client.CmpEqual, 0))
		case "XX":
			conds = append(conds, client.CompareLease(args[1], client.CmpNotEqual, 0))
		default:
			return errReply("ERR Unsupported option " + clip(o))
		}
	}
	if len(conds) > 1 {
		return errReply("ERR NX and XX, GT or LT options at the same time are not compatible")
	}
	ctx, cancel := c.ctx()
	defer cancel()
	key := args[1]
	var lease client.LeaseID
	put := client.OpDelete(key)
	if e.ttl > 0 {
		var err error
		if lease, err = c.grant(ctx, e.ttl); err != nil {
			return kvdError(err)
		}
		put = client.OpPut(key, nil, client.WithIgnoreValue(), client.WithLease(lease))
	}
	t := client.Txn{If: append([]client.Cmp{client.KeyExists(key)}, conds...),
		Then: []client.Op{client.OpGet(key), put}}
	res, err := c.s.c.Txn(ctx, t)
	if err != nil {
		if errors.Is(err, client.ErrNotApplied) || !errors.Is(err, client.ErrUnavailable) {
			c.retireLease(ctx, lease)
		}
		return kvdError(err)
	}
	if !res.Succeeded {
		c.retireLease(ctx, lease)
		return intReply(0)
	}
	c.retireLease(ctx, res.Results[0].Lease)
	return intReply(1)
}

// runTTL is TTL and PTTL: -2 for a missing key, -1 for one without an
// expiry, else the time its lease has left (rounded as Redis rounds).
func runTTL(c *conn, args [][]byte) reply {
	ctx, cancel := c.ctx()
	defer cancel()
	_, meta, _, err := c.s.c.GetMeta(ctx, args[1])
	if errors.Is(err, client.ErrNotFound) {
		return intReply(-2)
	}
	if err != nil {
		return kvdError(err)
	}
	if meta.Lease == 0 {
		return intReply(-1)
	}
	info, err := c.s.c.TimeToLive(ctx, meta.Lease)
	if errors.Is(err, client.ErrLeaseNotFound) {
		return intReply(-2)
	}
	if err != nil {
		return kvdError(err)
	}
	ms := max(info.Remaining.Milliseconds(), 0)
	if strings.EqualFold(string(args[0]), "pttl") {
		return intReply(ms)
	}
	return intReply((ms + 500) / 1000)
}

// runPersist removes a key's expiry: it is put back, value kept, with no
// lease, if it has one.
func runPersist(c *conn, args [][]byte) reply {
	ctx, cancel := c.ctx()
	defer cancel()
	key := args[1]
	t := client.Txn{If: []client.Cmp{client.CompareLease(key, client.CmpNotEqual, 0)},
		Then: []client.Op{client.OpGet(key), client.OpPut(key, nil, client.WithIgnoreValue())}}
	res, err := c.s.c.Txn(ctx, t)
	if err != nil {
		return kvdError(err)
	}
	if !res.Succeeded {
		return intReply(0)
	}
	c.retireLease(ctx, res.Results[0].Lease)
	return intReply(1)
}
