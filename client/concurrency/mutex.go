package concurrency

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/kvd-project/kvd/client"
)

// Mutex is a lock on one key, held in a Session. A Mutex is used by one
// goroutine at a time.
type Mutex struct {
	s       *Session
	key     []byte
	version uint64 // the lock key's version while held; 0 otherwise
}

// NewMutex is the lock named key in session s.
func NewMutex(s *Session, key string) *Mutex {
	return &Mutex{s: s, key: []byte(key)}
}

// Lock waits until it holds the lock or ctx ends. The lock is the key
// created, only if missing, with the session's lease as value and lease:
// Unlock deletes it, and so does the lease's end.
func (m *Mutex) Lock(ctx context.Context) error {
	me := []byte(m.s.id.String())
	// maybe: an attempt of this call may have created the key. Its create
	// can commit after the check that followed it read the key missing,
	// and every later attempt then conflicts with the session's own key:
	// so while maybe, a conflict is checked too, or Lock would wait for a
	// lock it holds until its context ended (and keep it held meanwhile).
	maybe := false
	for {
		if !m.s.Alive() {
			return ErrSessionExpired
		}
		v, err := m.s.c.PutRevision(ctx, m.key, me, client.IfModRevision(0), client.WithLease(m.s.id))
		switch {
		case err == nil:
			m.version = v
			return nil
		case errors.Is(err, client.ErrConflict) && !maybe:
		case errors.Is(err, client.ErrConflict), errors.Is(err, client.ErrUnavailable):
			// Maybe applied: if the key is ours, it was.
			maybe = true
			if held, v := m.owned(ctx, me); held {
				m.version = v
				return nil
			}
		case errors.Is(err, client.ErrLeaseNotFound):
			return fmt.Errorf("%w: %w", ErrSessionExpired, err)
		default:
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-m.s.Done():
			return ErrSessionExpired
		case <-time.After(m.s.cfg.Poll):
		}
	}
}

// owned reports whether the lock key holds this session's mark, and its
// version.
func (m *Mutex) owned(ctx context.Context, me []byte) (bool, uint64) {
	v, ver, err := m.s.c.GetModRevision(ctx, m.key)
	if err != nil || !bytes.Equal(v, me) {
		return false, 0
	}
	return true, ver
}

// Unlock releases the lock: it deletes the lock key only if it is still
// the one Lock created (its version), so an Unlock after the lease was
// lost, and the lock taken by another, leaves the new holder's key alone
// and fails with client.ErrConflict.
func (m *Mutex) Unlock(ctx context.Context) error {
	if m.version == 0 {
		return errors.New("concurrency: unlock of a mutex not held")
	}
	v := m.version
	m.version = 0
	err := m.s.c.Delete(ctx, m.key, client.IfModRevision(v))
	if errors.Is(err, client.ErrNotFound) {
		return fmt.Errorf("%w: lock key %q is gone (lease lost)", client.ErrConflict, m.key)
	}
	return err
}

// Held reports whether this Mutex may still act as the holder: it was
// locked and not unlocked, and its session's lease is certainly alive.
func (m *Mutex) Held() bool { return m.version != 0 && m.s.Alive() }

// Version is the lock key's mod revision while held (not etcd's
// version: the name is kept for existing callers): a fencing token,
// larger for every later holder of the lock (see the package comment).
func (m *Mutex) Version() uint64 { return m.version }

// Key is the lock's key.
func (m *Mutex) Key() string { return string(m.key) }

func (m *Mutex) String() string {
	return "mutex " + strconv.Quote(string(m.key)) + " version " + strconv.FormatUint(m.version, 10)
}
