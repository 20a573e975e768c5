package main

import (
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kvd-project/kvd/client"
	"github.com/kvd-project/kvd/internal/redisapi"
	"github.com/kvd-project/kvd/internal/resp"
)

// redisFlags are --redis-listen and the limits of the Redis listener.
type redisFlags struct {
	listen string
	cfg    redisapi.Config
}

// registerRedisFlags adds the Redis listener's flags to fs.
func registerRedisFlags(fs *flag.FlagSet, r *redisFlags) {
	fs.StringVar(&r.listen, "redis-listen", "", "address to serve the Redis protocol on (host:port; empty: off); see docs/redis-compatibility.md")
	fs.IntVar(&r.cfg.MaxConns, "redis-max-conns", redisapi.DefaultMaxConns, "the most Redis connections open at once; more are refused with Redis' \"max number of clients reached\"")
	fs.DurationVar(&r.cfg.IdleTimeout, "redis-idle-timeout", redisapi.DefaultIdleTimeout, "close a Redis connection idle this long (0: never)")
	fs.IntVar(&r.cfg.MaxPipeline, "redis-max-pipeline", redisapi.DefaultMaxPipeline, "the most replies to pipelined Redis commands held before they are written out")
	fs.IntVar(&r.cfg.Limits.MaxArgs, "redis-max-args", resp.DefaultMaxArgs, "the most arguments of one Redis command")
	fs.IntVar(&r.cfg.Limits.MaxInline, "redis-max-inline", resp.DefaultMaxInline, "the longest inline Redis command, in bytes")
}

// redisZeroIsDefault are the Redis flags whose 0 would mean the default.
var redisZeroIsDefault = []string{"redis-max-conns", "redis-max-pipeline", "redis-max-args", "redis-max-inline"}

// checkRedisFlags refuses a Redis listener the node cannot serve: its
// client reaches the node over the node's transport, without TLS.
func checkRedisFlags(o *options) error {
	if o.redis.listen == "" {
		return nil
	}
	if _, _, err := net.SplitHostPort(o.redis.listen); err != nil {
		return fmt.Errorf("--redis-listen %q: want host:port", o.redis.listen)
	}
	switch {
	case o.tls.ServerFiles().Enabled():
		return errors.New("--redis-listen is not served with TLS on a node")
	case (o.transport.Name == "tcp" && sharePort(o.redis.listen, o.cfg.Listen)) || (o.metricsListen != "" && sharePort(o.redis.listen, o.metricsListen)):
		return fmt.Errorf("--redis-listen %q shares a port with --listen or --metrics-listen", o.redis.listen)
	}
	return nil
}

// startRedis serves Redis on --redis-listen, through a client of this
// node (which follows the leader by itself) over the node's transport:
// over rdma its GETs are one-sided. stop ends it.
func startRedis(o *options, reg prometheus.Registerer, log *slog.Logger) (stop func(), err error) {
	if o.redis.listen == "" {
		return func() {}, nil
	}
	l, err := net.Listen("tcp", o.redis.listen)
	if err != nil {
		return nil, &failure{fmt.Errorf("--redis-listen: %w", err)}
	}
	c, closeTr, err := newFrontClient(frontTransport(o), nil, client.Config{Endpoints: []string{selfAddr(o.cfg.Listen)}, LeaseDrift: o.cfg.LeaseDrift})
	if err != nil {
		l.Close()
		return nil, &failure{err}
	}
	closeClient := func() {
		c.Close()
		if closeTr != nil {
			closeTr()
		}
	}
	cfg := o.redis.cfg
	cfg.Role, cfg.Logger, cfg.Registerer = "node", log, reg
	if cfg.IdleTimeout == 0 {
		cfg.IdleTimeout = -1 // never, as the flag says
	}
	stopServe, err := ServeRedis(c, l, cfg, log)
	if err != nil {
		closeClient()
		l.Close()
		return nil, err
	}
	log.Info("serving the Redis protocol", "addr", l.Addr().String())
	return func() { stopServe(); closeClient() }, nil
}

// ServeRedis serves the Redis protocol for c on l with cfg (Client is
// set to c) until stop is called; c is not closed. A node and the gateway
// both serve Redis through it.
func ServeRedis(c *client.Client, l net.Listener, cfg redisapi.Config, log *slog.Logger) (stop func(), err error) {
	cfg.Client = c
	s, err := redisapi.New(cfg)
	if err != nil {
		return nil, err
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := s.Serve(l); err != nil {
			log.Error("the Redis listener failed", "err", err)
		}
	}()
	return func() {
		s.Close()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
		}
	}, nil
}

// selfAddr is an address this process can dial its own listener at: an
// unspecified host is loopback.
func selfAddr(listen string) string {
	h, p, err := net.SplitHostPort(listen)
	if err != nil || !anyHost(h) {
		return listen
	}
	return net.JoinHostPort("127.0.0.1", p)
}
