package kv

import (
	"errors"
	"fmt"
	"time"

	"github.com/kvd-project/kvd/internal/revision"
	"github.com/kvd-project/kvd/internal/store"
	"github.com/kvd-project/kvd/internal/txn"
	"github.com/kvd-project/kvd/raft"
)

// The apply side of TTL leases: grants and revokes applied into the
// Ready's batch, keys attached and detached as PUTs and DELETEs apply,
// the lessor mirrored once the batch is durable, and the leader's expiry
// proposals.

// applyLeaseCommand applies a grant or a revoke.
func (m *machine) applyLeaseCommand(u *store.Update, index uint64, c command) error {
	var err error
	if c.op == opLeaseGrant {
		err = m.applyGrant(u, c)
	} else {
		err = m.applyRevoke(u, index, c)
	}
	var se *storeError
	if errors.As(err, &se) {
		return se.err // the store failed: the node stops
	}
	m.complete(c, raft.Outcome{Index: index, Err: err})
	return nil
}

// storeError marks an apply error as the store's (fatal), not the
// command's (answered to its proposer).
type storeError struct{ err error }

func (e *storeError) Error() string { return e.err.Error() }

func (m *machine) applyGrant(u *store.Update, c command) error {
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
	if max := m.cfg.Knobs.MaxLeases; m.leases.count()+m.sc.leaseDelta >= max {
		m.metrics.leaseRefused("max_leases")
		return fmt.Errorf("%w: %d leases exist", ErrTooManyLeases, max)
	}
	if err := u.SetLease(store.Lease{ID: id, TTL: uint64(ttl)}); err != nil {
		return &storeError{err}
	}
	m.sc.leaseDelta++
	m.sc.grants++
	m.sc.leaseOps = append(m.sc.leaseOps, leaseOp{id: id, ttl: ttl, grant: true})
	return nil
}

func (m *machine) applyRevoke(u *store.Update, index uint64, c command) error {
	id, reason, err := parseRevoke(c.value)
	if err != nil {
		return err
	}
	keys, existed, err := u.RevokeLease(id, m.next)
	if err != nil {
		return &storeError{err}
	}
	if !existed {
		return fmt.Errorf("%w: %d", ErrLeaseNotFound, id)
	}
	for _, k := range keys {
		m.sc.applies = append(m.sc.applies, Write{Meta: revision.Meta{Mod: m.next}, Key: k, Deleted: true})
	}
	m.changed = len(keys) > 0
	if len(keys) > 1 {
		m.sc.atomic = true // the keys go together, for one-sided readers too
	}
	if reason == revokeExpired {
		m.metrics.leasesExpired.Inc()
	}
	m.sc.leaseDelta--
	m.sc.leaseOps = append(m.sc.leaseOps, leaseOp{id: id})
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
// take keys (at most maxKeys in all) (those already attached to it do not count again) once the
// detached keys that are on it have left.
func checkLease(u *store.Update, lease uint64, keys, detached [][]byte, maxKeys int, onRefuse func(reason string)) error {
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
	if l.Keys+n > uint64(maxKeys)+freed {
		onRefuse("max_lease_keys")
		return fmt.Errorf("%w: lease %d holds %d keys (at most %d)", txn.ErrLeaseFull, lease, l.Keys, maxKeys)
	}
	return nil
}

// mirrorLeases tells the lessor what the committed batch did.
func (m *machine) mirrorLeases() {
	sc := &m.sc
	now := m.cfg.LeaseClock()
	for _, op := range sc.leaseOps {
		if op.grant {
			m.leases.granted(op.id, op.ttl, now)
		} else {
			m.leases.revoked(op.id)
		}
	}
	for _, k := range sc.leaseKeys {
		m.leases.setKeys(k.id, k.keys)
	}
	clear(sc.leaseOps)
	sc.leaseOps, sc.leaseKeys, sc.grants, sc.leaseDelta = sc.leaseOps[:0], sc.leaseKeys[:0], 0, 0
}

// reloadLeases rebuilds the lessor from the applied state (at open, and
// after a snapshot install replaced it).
func (m *machine) reloadLeases() error {
	ls, err := m.st.Leases()
	if err != nil {
		return err
	}
	m.leases.reset(ls, m.cfg.LeaseClock())
	return nil
}

// expireLeases is the leader's expiry check, run at every tick: it
// proposes the revoke of each lease whose deadline passed. A revoke that
// does not make it is proposed again after an election timeout.
func (m *machine) expireLeases(propose func(raft.Encode)) {
	for _, id := range m.leases.expired(m.cfg.LeaseClock(), m.retry) {
		m.log.Info("lease expired; revoking it", "lease", id)
		// Nobody waits on it: its outcome is the lease gone, or a retry.
		propose(command{op: opLeaseRevoke, value: revokeValue(id, revokeExpired)}.encoder())
	}
}

// leaseWrite updates key's lease for a write applied in u: a PUT attaches
// it to lease (0: none), a DELETE (deleted) detaches it. While no lease
// exists, none can have keys, and the lookup is skipped: PUTs pay for
// leases only once some exist.
func (m *machine) leaseWrite(u *store.Update, key []byte, lease uint64, deleted bool) error {
	if lease == 0 && m.leases.count() == 0 && m.sc.grants == 0 {
		return nil
	}
	if deleted {
		old, err := u.Detach(key)
		if err != nil || old == 0 {
			return err
		}
		return noteKeys(u, old, &m.sc.leaseKeys)
	}
	return attachKey(u, key, lease, &m.sc.leaseKeys)
}
