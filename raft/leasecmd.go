package raft

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/kvd-project/kvd/internal/txn"
	"github.com/kvd-project/kvd/raft/internal/store"
)

// TTL lease limits. They are checked when entries are applied, so they
// are constants: every node must decide alike.
const (
	// MaxLeases is the most leases that may exist at once; a grant beyond
	// it fails with ErrTooManyLeases.
	MaxLeases = 10000
	// MaxLeaseKeys is the most keys one lease may hold; a PUT that would
	// attach more fails with ErrLeaseFull. It bounds the keys one revoke
	// (or expiry) deletes in its single entry.
	MaxLeaseKeys = 1000
	// MinLeaseTTL and MaxLeaseTTL bound a lease's TTL.
	MinLeaseTTL = time.Second
	MaxLeaseTTL = 365 * 24 * time.Hour
)

// The limits the apply path checks; tests lower them (every node of a
// test shares them, as every node of a cluster shares the constants).
var (
	maxLeases    = MaxLeases
	maxLeaseKeys = MaxLeaseKeys
)

// A grant command's value is le64 id | le64 ttl (ns); a revoke's is
// le64 id | reason (1 byte: revokeByClient or revokeExpired). Both have no
// key.
const (
	revokeByClient byte = 0
	revokeExpired  byte = 1
)

func grantValue(id uint64, ttl time.Duration) []byte {
	b := binary.LittleEndian.AppendUint64(nil, id)
	return binary.LittleEndian.AppendUint64(b, uint64(ttl))
}

func parseGrant(v []byte) (id uint64, ttl time.Duration, err error) {
	if len(v) != 16 {
		return 0, 0, fmt.Errorf("%w: lease grant of %d bytes", errBadCommand, len(v))
	}
	return binary.LittleEndian.Uint64(v), time.Duration(binary.LittleEndian.Uint64(v[8:])), nil
}

func revokeValue(id uint64, reason byte) []byte {
	return append(binary.LittleEndian.AppendUint64(nil, id), reason)
}

func parseRevoke(v []byte) (id uint64, reason byte, err error) {
	if len(v) != 9 {
		return 0, 0, fmt.Errorf("%w: lease revoke of %d bytes", errBadCommand, len(v))
	}
	return binary.LittleEndian.Uint64(v), v[8], nil
}

// Grant replicates a new lease of ttl (rounded to whole milliseconds is
// not done: any ttl in [MinLeaseTTL, MaxLeaseTTL]) and returns its id: id
// if non-zero (ErrLeaseExists if taken), else one drawn at random.
func (n *Node) Grant(ctx context.Context, id uint64, ttl time.Duration) (uint64, error) {
	if ttl < MinLeaseTTL || ttl > MaxLeaseTTL {
		return 0, fmt.Errorf("%w: %v not in [%v, %v]", ErrLeaseTTL, ttl, MinLeaseTTL, MaxLeaseTTL)
	}
	for id == 0 {
		id = rand.Uint64() >> 1 // positive as an int64, as etcd's ids are
	}
	r := n.proposeCommand(ctx, command{op: opLeaseGrant, value: grantValue(id, ttl)})
	return id, r.err
}

// Revoke replicates the end of lease id: it and every key attached to it
// are deleted in one entry. ErrLeaseNotFound if there is no such lease.
func (n *Node) Revoke(ctx context.Context, id uint64) error {
	return n.proposeCommand(ctx, command{op: opLeaseRevoke, value: revokeValue(id, revokeByClient)}).err
}

// KeepAlive renews lease id on the leader: its deadline becomes now + TTL.
// It returns the TTL once a ReadIndex round begun after the renewal has
// confirmed this node still leads (see lessor.go for why that keeps a
// holder's view of the lease safe).
func (n *Node) KeepAlive(ctx context.Context, id uint64) (time.Duration, error) {
	if err := n.leaderHere(); err != nil {
		return 0, err
	}
	if err := n.ReadIndex(ctx); err != nil { // the lease's applied state is current
		return 0, err
	}
	ttl, err := n.leases.renew(id, n.leaseNow())
	if errors.Is(err, ErrNotLeader) {
		return 0, n.notLeader(n.Status().LeaderID)
	}
	if err != nil {
		return 0, fmt.Errorf("%w: %d", err, id)
	}
	if err := n.ReadIndex(ctx); err != nil {
		return 0, err
	}
	return ttl, nil
}

// TimeToLive reports lease id as the leader sees it.
func (n *Node) TimeToLive(ctx context.Context, id uint64) (LeaseInfo, error) {
	if err := n.leaderHere(); err != nil {
		return LeaseInfo{}, err
	}
	if err := n.ReadIndex(ctx); err != nil {
		return LeaseInfo{}, err
	}
	info, err := n.leases.info(id, n.leaseNow())
	switch {
	case errors.Is(err, ErrNotLeader):
		return info, n.notLeader(n.Status().LeaderID)
	case err != nil:
		return info, fmt.Errorf("%w: %d", err, id)
	}
	return info, nil
}

func (n *Node) leaderHere() error {
	if st := n.Status(); !st.IsLeader {
		return n.notLeader(st.LeaderID)
	}
	return nil
}

// LeaseCount is how many leases this node has applied.
func (n *Node) LeaseCount() int { return n.leases.count() }

func (n *Node) leaseNow() time.Time {
	if n.cfg.LeaseClock == nil { // a bare test node, without withDefaults
		return time.Now()
	}
	return n.cfg.LeaseClock()
}

// applyLeaseCommand applies a grant or a revoke.
func (l *loop) applyLeaseCommand(u *store.Update, index uint64, c command) error {
	var err error
	if c.op == opLeaseGrant {
		err = l.applyGrant(u, c)
	} else {
		err = l.applyRevoke(u, index, c)
	}
	var se *storeError
	if errors.As(err, &se) {
		return se.err // the store failed: the node stops
	}
	l.complete(c.proposer, c.reqID, result{version: index, err: err})
	return nil
}

// storeError marks an apply error as the store's (fatal), not the
// command's (answered to its proposer).
type storeError struct{ err error }

func (e *storeError) Error() string { return e.err.Error() }

func (l *loop) applyGrant(u *store.Update, c command) error {
	id, ttl, err := parseGrant(c.value)
	if err != nil {
		return err
	}
	if _, ok, err := u.Lease(id); err != nil {
		return &storeError{err}
	} else if ok {
		return fmt.Errorf("%w: %d", ErrLeaseExists, id)
	}
	// The lessor counts the leases of the batches committed before this
	// one, leaseDelta this batch's: exact, so every node decides alike
	// however its entries were batched.
	if l.n.leases.count()+l.scratch.leaseDelta >= maxLeases {
		l.n.metrics.leaseRefused("max_leases")
		return fmt.Errorf("%w: %d leases exist", ErrTooManyLeases, maxLeases)
	}
	if err := u.SetLease(store.Lease{ID: id, TTL: uint64(ttl)}); err != nil {
		return &storeError{err}
	}
	l.scratch.leaseDelta++
	l.scratch.grants++
	l.scratch.leaseOps = append(l.scratch.leaseOps, leaseOp{id: id, ttl: ttl, grant: true})
	return nil
}

func (l *loop) applyRevoke(u *store.Update, index uint64, c command) error {
	id, reason, err := parseRevoke(c.value)
	if err != nil {
		return err
	}
	keys, existed, err := u.RevokeLease(id)
	if err != nil {
		return &storeError{err}
	}
	if !existed {
		return fmt.Errorf("%w: %d", ErrLeaseNotFound, id)
	}
	for _, k := range keys {
		l.scratch.applies = append(l.scratch.applies, Write{Version: index, Key: k, Deleted: true})
	}
	if len(keys) > 1 {
		l.scratch.atomic = true // the keys go together, for one-sided readers too
	}
	if reason == revokeExpired {
		l.n.metrics.leasesExpired.Inc()
	}
	l.scratch.leaseDelta--
	l.scratch.leaseOps = append(l.scratch.leaseOps, leaseOp{id: id})
	return nil
}

// leaseOp is an applied grant or revoke, mirrored into the lessor once
// the batch is durable.
type leaseOp struct {
	id    uint64
	ttl   time.Duration
	grant bool
}

// leaseKeys is a lease's key count changed in the batch being built.
type leaseKeys struct{ id, keys uint64 }

// attach updates key's lease in u for a PUT: attach to lease (0: none),
// detaching from any other first.
func attachKey(u *store.Update, key []byte, lease uint64, changed *[]leaseKeys) error {
	old, err := u.Detach(key)
	if err != nil {
		return err
	}
	if old != 0 {
		if err := noteKeys(u, old, changed); err != nil {
			return err
		}
	}
	if lease == 0 {
		return nil
	}
	if err := u.Attach(key, lease); err != nil {
		return err
	}
	return noteKeys(u, lease, changed)
}

func noteKeys(u *store.Update, id uint64, changed *[]leaseKeys) error {
	l, ok, err := u.Lease(id)
	if err == nil && ok {
		*changed = append(*changed, leaseKeys{id, l.Keys})
	}
	return err
}

// checkLease is the txn State's CheckLease: lease must exist in u and
// take keys (those already attached to it do not count again).
func checkLease(u *store.Update, lease uint64, keys [][]byte, onRefuse func(reason string)) error {
	l, ok, err := u.Lease(lease)
	switch {
	case err != nil:
		return err
	case !ok:
		return fmt.Errorf("%w: %d", txn.ErrLeaseNotFound, lease)
	}
	var n uint64
	for _, k := range keys {
		id, err := u.KeyLease(k)
		if err != nil {
			return err
		}
		if id != lease {
			n++
		}
	}
	if l.Keys+n > uint64(maxLeaseKeys) {
		onRefuse("max_lease_keys")
		return fmt.Errorf("%w: lease %d holds %d keys (at most %d)", txn.ErrLeaseFull, lease, l.Keys, maxLeaseKeys)
	}
	return nil
}

// mirrorLeases tells the lessor what the committed batch did.
func (l *loop) mirrorLeases() {
	sc := &l.scratch
	now := l.n.leaseNow()
	for _, op := range sc.leaseOps {
		if op.grant {
			l.n.leases.granted(op.id, op.ttl, now)
		} else {
			l.n.leases.revoked(op.id)
		}
	}
	for _, k := range sc.leaseKeys {
		l.n.leases.setKeys(k.id, k.keys)
	}
	clear(sc.leaseOps)
	sc.leaseOps, sc.leaseKeys, sc.grants, sc.leaseDelta = sc.leaseOps[:0], sc.leaseKeys[:0], 0, 0
}

// reloadLeases rebuilds the lessor from the applied state (at open, and
// after a snapshot install replaced it).
func (l *loop) reloadLeases() error {
	ls, err := l.st.Leases()
	if err != nil {
		return err
	}
	l.n.leases.reset(ls, l.n.leaseNow())
	return nil
}

// expireLeases is the leader's expiry check, run at every tick: it
// proposes the revoke of each lease whose deadline passed. A revoke that
// does not make it is proposed again after an election timeout.
func (l *loop) expireLeases() {
	if !l.isLeader {
		return
	}
	for _, id := range l.n.leases.expired(l.n.leaseNow(), l.cfg.electionTimeout()) {
		c := command{op: opLeaseRevoke, proposer: l.n.id, reqID: l.n.nextReq.Add(1), value: revokeValue(id, revokeExpired)}
		p := &proposal{reqID: c.reqID, data: appendCommand(nil, c), done: make(chan result, 1)}
		l.n.log.Info("lease expired; revoking it", "lease", id)
		l.propose(p) // nobody waits on p: its outcome is the lease gone, or a retry
	}
}

// leaseWrite updates key's lease for a write applied in u: a PUT attaches
// it to lease (0: none), a DELETE (deleted) detaches it. While no lease
// exists, none can have keys, and the lookup is skipped: PUTs pay for
// leases only once some exist.
func (l *loop) leaseWrite(u *store.Update, key []byte, lease uint64, deleted bool) error {
	if lease == 0 && l.n.leases.count() == 0 && l.scratch.grants == 0 {
		return nil
	}
	if deleted {
		old, err := u.Detach(key)
		if err != nil || old == 0 {
			return err
		}
		return noteKeys(u, old, &l.scratch.leaseKeys)
	}
	return attachKey(u, key, lease, &l.scratch.leaseKeys)
}
