//go:build rdma

package rdma

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/kvd-project/kvd/transport"
)

// This file runs the handshake of auth.go on real connections: admission
// and deadlines on the listener, the remote access rights of queue pairs,
// the message size limit before authentication, and refusals.

// transportAuth is a Transport's loaded Config.Auth and its counters.
type transportAuth struct {
	keys     *keyring // nil: no authentication
	accepted atomic.Uint64
	refusals atomic.Uint64
	rawDial  bool // tests: Dial skips the handshake (an unauthenticated dialer)
	// dropEstablished, in tests, may drop a passive connection's
	// ESTABLISHED event, as if the connection had failed before it came.
	// Atomic: the test sets it while the listener runs, and the goroutine
	// that reads it learns of the connection through the kernel, which
	// the race detector cannot see.
	dropEstablished atomic.Pointer[func(*conn) bool]
}

// connAuth is a connection's authentication state.
type connAuth struct {
	// pending: the peer has not authenticated yet, so its messages may be
	// at most AuthMaxMessage bytes (read by the poller).
	pending atomic.Bool

	offer     nonce // the listener's nonce (sent in its accept)
	offered   bool  // dialer: the listener's accept carried an offer
	remoteQPN uint32

	// Listener side: admitted counts in listener.pending until settled;
	// listener settles a connection that fails before it authenticates.
	admitted bool
	listener *listener
	started  atomic.Bool // the handshake runs: it settles, not teardown
	settled  atomic.Bool
	remote   string
	deadline time.Time
	timer    atomic.Pointer[time.Timer]

	id AuthIdentity // set before the connection is handed out
}

// initAuth sets a new connection's state: with Auth, it accepts only small
// messages until the peer has authenticated.
func (c *conn) initAuth() { c.auth.pending.Store(c.t.auth.keys != nil) }

// initialAccess is the remote access a new queue pair gets: READ at once
// without Auth, nothing with it (grant adds READ once the peer has proved
// itself).
func (c *conn) initialAccess() int {
	if c.t.auth.keys != nil {
		return accessNone
	}
	return accessRemoteRead
}

// grant lifts the limits on a connection whose peer has just proved itself:
// its messages may be full size, and it may READ this end's regions.
func (c *conn) grant() error {
	c.auth.pending.Store(false)
	c.memMu.RLock()
	defer c.memMu.RUnlock()
	if c.freed {
		return c.closedErr()
	}
	if err := c.qp.setAccess(accessRemoteRead); err != nil {
		c.fail(fmt.Errorf("%w: %w", err, transport.ErrClosed))
		return c.closedErr()
	}
	return nil
}

// rxMaxMessage is the largest message accepted from the peer now.
func (c *conn) rxMaxMessage() int {
	if c.auth.pending.Load() {
		return AuthMaxMessage
	}
	return c.cfg.MaxMessage
}

// view is the connection as this end sees it (see authView).
func (c *conn) view(dialed bool) authView {
	// From what setup recorded, not from the id and the queue pair: the
	// connection may fail, and teardown free them, at any time.
	local, remote := c.local, c.remote
	if dialed {
		return authView{dialer: local, acceptor: remote, dialerQPN: c.qpn, acceptorQPN: c.auth.remoteQPN}
	}
	return authView{dialer: remote, acceptor: local, dialerQPN: c.auth.remoteQPN, acceptorQPN: c.qpn}
}

// AuthIdentity is who the peer proved to be (zero without Auth).
func (c *conn) AuthIdentity() AuthIdentity { return c.auth.id }

// Identity reports AuthIdentity in package transport's terms (see
// AuthIdentity.Transport).
func (c *conn) Identity() transport.Identity { return c.auth.id.Transport() }

var _ transport.Identified = (*conn)(nil)

// AuthStats counts incoming connections authenticated and refused.
func (t *Transport) AuthStats() AuthStats {
	return AuthStats{Accepted: t.auth.accepted.Load(), Refused: t.auth.refusals.Load()}
}

func (t *Transport) refused(remote string, err error) {
	t.auth.refusals.Add(1)
	if f := t.cfg.Auth.Refused; f != nil {
		f(remote, err)
	}
}

// dialAuth runs the dialer's half once the connection is up, if either end
// authenticates: both must.
func (c *conn) dialAuth(ctx context.Context) error {
	kr := c.t.auth.keys
	switch {
	case c.t.auth.rawDial:
		return nil // tests: an unauthenticated dialer
	case kr == nil && !c.auth.offered:
		return nil
	case kr == nil:
		return fmt.Errorf("%w: %s authenticates its peers and this end has no key (--rdma-auth-file): %w", ErrAuth, c.remote, transport.ErrAuthRefused)
	case !c.auth.offered:
		return fmt.Errorf("%w: %s does not authenticate (no --rdma-auth-file there?) and this end insists: %w", ErrAuth, c.remote, transport.ErrAuthRefused)
	case kr.self == nil:
		return fmt.Errorf("%w: no key to dial with: Auth.Name (--rdma-auth-name) names none of several", ErrConfig)
	}
	ctx, cancel := context.WithTimeout(ctx, c.t.cfg.Auth.timeout())
	defer cancel()
	id, err := dialAuth(ctx, c, kr.self, &c.auth.offer, c.view(true), rand.Reader, c.grant)
	if err != nil {
		return err
	}
	c.auth.id = id
	return nil
}

var errTooManyPending = fmt.Errorf("%w: too many connections authenticating at once (Config.Backlog); request rejected", ErrAuth)

// startAuth admits a requested connection, with Auth: it counts against
// the listener's bound on unauthenticated connections, gets its nonce, and
// is refused if it has not authenticated by the deadline, whatever it does.
// It returns the offer to append to the accept's private data.
func (l *listener) startAuth(c *conn) ([]byte, error) {
	if l.t.auth.keys == nil {
		return nil, nil
	}
	c.auth.remote = c.cm.peerAddr()
	if l.pending.Add(1) > int32(l.t.cfg.Backlog) {
		l.pending.Add(-1)
		return nil, errTooManyPending
	}
	c.auth.admitted = true
	c.auth.listener = l
	if _, err := rand.Read(c.auth.offer[:]); err != nil {
		return nil, fmt.Errorf("rdma: auth nonce: %w", err)
	}
	d := l.t.cfg.Auth.timeout()
	c.auth.deadline = time.Now().Add(d)
	c.auth.timer.Store(time.AfterFunc(d, func() {
		if l.settle(c, authTimeout(d)) {
			go c.Close()
		}
	}))
	return appendOffer(nil, &c.auth.offer), nil
}

func authTimeout(d time.Duration) error {
	return fmt.Errorf("%w: not authenticated within %v: %w", ErrAuth, d, context.DeadlineExceeded)
}

// settle ends a connection's authentication, once: err nil hands it out,
// otherwise it is counted and reported as refused (the caller closes it).
// It reports whether this call settled it. Without Auth it does nothing.
func (l *listener) settle(c *conn, err error) bool {
	if l.t.auth.keys == nil || !c.auth.settled.CompareAndSwap(false, true) {
		return false
	}
	if tm := c.auth.timer.Load(); tm != nil {
		tm.Stop()
	}
	if c.auth.admitted {
		l.pending.Add(-1)
	}
	if err != nil {
		l.t.refused(c.auth.remote, err)
	} else {
		l.t.auth.accepted.Add(1)
	}
	return true
}

// settleFailed refuses a passive connection that failed before its
// handshake began (teardown). The poller can fail it (an oversized message)
// before the connection manager reports it established, and then no
// handshake ever runs to say why: the refusal would otherwise be reported
// only at the deadline, as a timeout.
func (c *conn) settleFailed() {
	l := c.auth.listener
	if l == nil || c.auth.started.Load() {
		return
	}
	c.mu.Lock()
	cause := c.err
	c.mu.Unlock()
	l.settle(c, fmt.Errorf("%w: connection failed before authenticating: %w", ErrAuth, cause))
}

// onEstablished takes a passive connection once the connection manager has
// established it: without Auth it is queued for Accept at once; with Auth
// only after the dialer has authenticated.
func (l *listener) onEstablished(c *conn) {
	if l.t.auth.keys == nil {
		l.established(c)
		return
	}
	c.auth.started.Store(true)
	go l.authenticate(c)
}

func (l *listener) authenticate(c *conn) {
	ctx, cancel := context.WithDeadline(context.Background(), c.auth.deadline)
	defer cancel()
	id, err := acceptAuth(ctx, c, l.t.auth.keys, &c.auth.offer, c.view(false), c.grant)
	if err == nil {
		c.auth.id = id
	} else if errors.Is(err, context.DeadlineExceeded) {
		err = authTimeout(l.t.cfg.Auth.timeout()) // as the timer would say
	}
	if !l.settle(c, err) {
		return // the deadline won: it closes c
	}
	if err != nil {
		_ = c.Close()
		return
	}
	l.established(c)
}
