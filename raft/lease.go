package raft

import (
	"sync"
	"time"
)

// lease tracks the leader's read lease and reports its changes to
// Config.OnLease from its own goroutine, so that a lease lapsing by time is
// reported even while the raft loop is busy or idle.
//
// The raft loop extends the lease when a quorum acknowledged a heartbeat
// sent after time t (extend(term, t+leaseDuration)) and revokes it when the
// node steps down or the term changes (setTerm). See the package comment for
// why an extended lease is safe.
type lease struct {
	onLease func(term uint64, valid bool)
	metrics *metrics

	mu     sync.Mutex
	term   uint64
	expiry time.Time // zero: no lease
	kick   chan struct{}
}

func newLease(onLease func(uint64, bool), m *metrics, term uint64) *lease {
	return &lease{onLease: onLease, metrics: m, term: term, kick: make(chan struct{}, 1)}
}

// extend makes the lease valid until at least until in term.
func (l *lease) extend(term uint64, until time.Time) {
	l.mu.Lock()
	if term != l.term {
		l.term, l.expiry = term, time.Time{}
	}
	if until.After(l.expiry) {
		l.expiry = until
	}
	l.mu.Unlock()
	l.wake()
}

// setTerm records the current term; a change revokes the lease.
func (l *lease) setTerm(term uint64) {
	l.mu.Lock()
	changed := term != l.term
	if changed {
		l.term, l.expiry = term, time.Time{}
	}
	l.mu.Unlock()
	if changed {
		l.wake()
	}
}

// revoke ends the lease now (stepping down).
func (l *lease) revoke() {
	l.mu.Lock()
	l.expiry = time.Time{}
	l.mu.Unlock()
	l.wake()
}

func (l *lease) wake() {
	select {
	case l.kick <- struct{}{}:
	default:
	}
}

// state is the lease as of now, and when it lapses if valid.
func (l *lease) state() (term uint64, valid bool, expiry time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.term, time.Now().Before(l.expiry), l.expiry
}

func (l *lease) valid() bool {
	_, v, _ := l.state()
	return v
}

// run reports changes until stop is closed, then reports the lease invalid.
func (l *lease) run(stop <-chan struct{}) {
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	var repTerm uint64
	repValid, reported := false, false
	report := func(term uint64, valid bool) {
		if reported && term == repTerm && valid == repValid {
			return
		}
		repTerm, repValid, reported = term, valid, true
		l.metrics.leaseValid.Set(boolGauge(valid))
		if l.onLease != nil {
			l.onLease(term, valid)
		}
	}
	for {
		term, valid, expiry := l.state()
		report(term, valid)
		if valid {
			timer.Reset(time.Until(expiry))
		}
		select {
		case <-l.kick:
		case <-timer.C:
		case <-stop:
			if repValid {
				report(repTerm, false)
			}
			return
		}
	}
}
