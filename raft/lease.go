package raft

import (
	"sync"
	"time"
)

// lease tracks the leader's read lease and publishes its expiry through
// Config.OnLease.
//
// The raft loop extends the lease when a quorum acknowledged a heartbeat
// sent after time t (extend(term, t+leaseDuration)) and ends it when the
// node steps down or the term changes. Every change is published at once,
// from the caller's goroutine, as an absolute expiry: what a reader needs
// is when the lease ends, and that stays true however late the publication
// arrives or however long this process stalls afterwards. No goroutine has
// to run for a lease to lapse: it lapses by time (see the package comment).
type lease struct {
	onLease func(term uint64, expiry time.Time)

	mu     sync.Mutex
	term   uint64
	expiry time.Time // zero: no lease
	now    func() time.Time
}

// newLease returns a lease of term, judged by the clock now, with
// nothing granted yet.
func newLease(onLease func(uint64, time.Time), term uint64, now func() time.Time) *lease {
	return &lease{onLease: onLease, term: term, now: now}
}

// extend makes the lease valid until at least until in term.
func (l *lease) extend(term uint64, until time.Time) {
	l.mu.Lock()
	changed := term != l.term || until.After(l.expiry)
	if term != l.term {
		l.term, l.expiry = term, time.Time{}
	}
	if until.After(l.expiry) {
		l.expiry = until
	}
	term, exp := l.term, l.expiry
	l.mu.Unlock()
	if changed {
		l.publish(term, exp)
	}
}

// setTerm records the current term; a change ends the lease.
func (l *lease) setTerm(term uint64) {
	l.mu.Lock()
	changed := term != l.term
	if changed {
		l.term, l.expiry = term, time.Time{}
	}
	l.mu.Unlock()
	if changed {
		l.publish(term, time.Time{})
	}
}

// revoke ends the lease now (stepping down, shutting down).
func (l *lease) revoke() {
	l.mu.Lock()
	had := !l.expiry.IsZero()
	l.expiry = time.Time{}
	term := l.term
	l.mu.Unlock()
	if had {
		l.publish(term, time.Time{})
	}
}

func (l *lease) publish(term uint64, expiry time.Time) {
	if l.onLease != nil {
		l.onLease(term, expiry)
	}
}

// state is the lease as of now.
func (l *lease) state() (term uint64, valid bool, expiry time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.term, l.now().Before(l.expiry), l.expiry
}

func (l *lease) valid() bool {
	_, v, _ := l.state()
	return v
}
