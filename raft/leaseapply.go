package raft

import (
	"errors"
	"fmt"
	"time"

	"github.com/kvd-project/kvd/internal/txn"
	"github.com/kvd-project/kvd/raft/internal/store"
)

// The apply side of TTL leases: grants and revokes applied into the
// Ready's batch, keys attached and detached as PUTs and DELETEs apply,
// the lessor mirrored once the batch is durable, and the leader's expiry
// proposals.

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
	if maxLeases := l.cfg.Knobs.MaxLeases; l.n.leases.count()+l.scratch.leaseDelta >= maxLeases {
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
// take keys (those already attached to it do not count again) once the
// detached keys that are on it have left, holding at most maxLeaseKeys.
func checkLease(u *store.Update, lease uint64, keys, detached [][]byte, maxLeaseKeys int, onRefuse func(reason string)) error {
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
	var freed uint64
	for _, k := range detached {
		id, err := u.KeyLease(k)
		if err != nil {
			return err
		}
		if id == lease {
			freed++
		}
	}
	if l.Keys+n > uint64(maxLeaseKeys)+freed {
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
