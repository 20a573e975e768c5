package concurrency

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/kvd-project/kvd/client"
	"github.com/kvd-project/kvd/internal/errs"
)

// Config configures a Session. The zero value takes the defaults.
type Config struct {
	// TTL is the session's lease TTL: how long after its holder dies (or
	// stops reaching the cluster) the locks it held are released. Default
	// DefaultTTL; at least client.MinLeaseTTL.
	TTL time.Duration
	// Poll is how often a waiting Lock tries again. Default DefaultPoll.
	Poll time.Duration
}

// Defaults.
const (
	DefaultTTL  = 10 * time.Second
	DefaultPoll = 50 * time.Millisecond
)

// ErrSessionExpired: the session's lease is gone or may be (see Held).
var ErrSessionExpired = errs.ErrSessionExpired

// withDefaults returns c with its zero fields set to their defaults.
func (c Config) withDefaults() Config {
	if c.TTL == 0 {
		c.TTL = DefaultTTL
	}
	if c.Poll == 0 {
		c.Poll = DefaultPoll
	}
	return c
}

// Validate reports whether c is usable. Zero fields are checked as their
// defaults; c itself is not changed.
func (c Config) Validate() error {
	c = c.withDefaults()
	switch {
	case c.TTL < client.MinLeaseTTL || c.TTL > client.MaxLeaseTTL:
		return fmt.Errorf("concurrency: TTL %v not in [%v, %v]", c.TTL, client.MinLeaseTTL, client.MaxLeaseTTL)
	case c.Poll < 0:
		return fmt.Errorf("concurrency: negative poll interval %v", c.Poll)
	}
	return nil
}

// Session is a lease kept alive in the background: the owner of the
// locks taken in it.
type Session struct {
	c      *client.Client
	cfg    Config
	id     client.LeaseID
	keeper *client.LeaseKeeper
	cancel context.CancelFunc
}

// NewSession grants a lease of cfg.TTL and keeps it alive until Close or
// until it is lost.
func NewSession(ctx context.Context, c *client.Client, cfg Config) (*Session, error) {
	cfg = cfg.withDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	id, err := c.Grant(ctx, cfg.TTL)
	if err != nil {
		return nil, err
	}
	// The keeper outlives ctx, but its first renewal is part of this call:
	// ctx ends that too.
	kctx, cancel := context.WithCancel(context.Background())
	stop := context.AfterFunc(ctx, cancel)
	k, err := c.KeepAlive(kctx, id)
	if !stop() {
		cancel()
		if err == nil {
			<-k.Done()
		}
		return nil, fmt.Errorf("concurrency: new session: %w", ctx.Err())
	}
	if err != nil {
		cancel()
		return nil, err
	}
	return &Session{c: c, cfg: cfg, id: id, keeper: k, cancel: cancel}, nil
}

// Lease is the session's lease.
func (s *Session) Lease() client.LeaseID { return s.id }

// Done is closed when the session ends: Close, or its lease lost.
func (s *Session) Done() <-chan struct{} { return s.keeper.Done() }

// ValidUntil is when the lease may end, by this process's clock: the
// send time of its last answered keepalive plus the TTL.
func (s *Session) ValidUntil() time.Time { return s.keeper.ValidUntil() }

// Alive reports whether the session's lease is certainly still there now.
func (s *Session) Alive() bool {
	select {
	case <-s.Done():
		return false
	default:
	}
	return time.Now().Before(s.ValidUntil())
}

// Close stops the keepalives and revokes the lease, releasing every lock
// held in the session.
func (s *Session) Close(ctx context.Context) error {
	s.cancel()
	<-s.keeper.Done()
	err := s.c.Revoke(ctx, s.id)
	if errors.Is(err, client.ErrLeaseNotFound) {
		return nil // already gone: its locks are released
	}
	return err
}
