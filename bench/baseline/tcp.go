package baseline

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"sync"
	"time"

	"github.com/kvd-project/kvd/bench/latency"
	"github.com/kvd-project/kvd/bench/result"
	"github.com/kvd-project/kvd/internal/errs"
)

// ErrConfig wraps every invalid-configuration error of this package.
var ErrConfig = errs.ErrConfig

// TCPConfig configures the TCP ping-pong.
type TCPConfig struct {
	// Sizes are the payload sizes to measure (the value sizes of the kvd
	// runs to compare with). Required.
	Sizes []int
	// SmallSize is the size of the other direction: the key of a GET, or
	// the small reply to a PUT. Default 16.
	SmallSize int
	// Iters is how many round trips to measure per size and shape. Default
	// 20000.
	Iters int
	// Warmup is how many round trips to run first and not measure.
	// Default Iters/10.
	Warmup int
	// Host is the loopback address to listen on. Default 127.0.0.1.
	Host string
	// Series labels the results. Default "tcp".
	Series string
}

// maxTCPPayload bounds sizes so a typo cannot allocate gigabytes.
const maxTCPPayload = 64 << 20

// withDefaults returns c with its zero fields set to their defaults.
func (c TCPConfig) withDefaults() TCPConfig {
	if c.SmallSize == 0 {
		c.SmallSize = 16
	}
	if c.Iters == 0 {
		c.Iters = 20000
	}
	if c.Warmup == 0 {
		c.Warmup = c.Iters / 10
	}
	if c.Host == "" {
		c.Host = "127.0.0.1"
	}
	if c.Series == "" {
		c.Series = "tcp"
	}
	return c
}

// Validate reports whether c is usable. Zero fields are checked as their
// defaults; c itself is not changed.
func (c TCPConfig) Validate() error {
	c = c.withDefaults()
	if len(c.Sizes) == 0 {
		return fmt.Errorf("%w: no sizes", ErrConfig)
	}
	for _, s := range c.Sizes {
		if s < 0 || s > maxTCPPayload {
			return fmt.Errorf("%w: size %d outside 0..%d", ErrConfig, s, maxTCPPayload)
		}
	}
	if c.SmallSize < 0 || c.SmallSize > maxTCPPayload || c.Iters < 0 || c.Warmup < 0 {
		return fmt.Errorf("%w: small size %d, iters %d, warmup %d", ErrConfig, c.SmallSize, c.Iters, c.Warmup)
	}
	return nil
}

// The ping-pong frame: request length and reply length, then the request.
const headerSize = 8

// TCP measures request/response round trips over loopback for every size
// in both shapes, and returns one Baseline per size and shape.
func TCP(ctx context.Context, cfg TCPConfig) ([]result.Baseline, error) {
	cfg = cfg.withDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(cfg.Host, "0"))
	if err != nil {
		return nil, err
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); serveEcho(ln) }()
	defer wg.Wait()
	defer ln.Close()

	conn, err := (&net.Dialer{}).DialContext(ctx, "tcp", ln.Addr().String())
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	stop := context.AfterFunc(ctx, func() { conn.SetDeadline(time.Now()) })
	defer stop()

	var out []result.Baseline
	rec := latency.New()
	for _, size := range cfg.Sizes {
		for _, shape := range []struct {
			kind       string
			req, reply int
		}{{result.KindTCPRead, cfg.SmallSize, size}, {result.KindTCPWrite, size, cfg.SmallSize}} {
			rec.Reset()
			if err := pingPong(conn, shape.req, shape.reply, cfg.Warmup, nil); err != nil {
				return nil, ctxErr(ctx, err)
			}
			if err := pingPong(conn, shape.req, shape.reply, cfg.Iters, rec); err != nil {
				return nil, ctxErr(ctx, err)
			}
			out = append(out, result.Baseline{
				Series: cfg.Series, Transport: "tcp", Kind: shape.kind, Bytes: size, Iters: rec.Count(),
				Lat: rec.Summary(), RTTFactor: 1, Source: "kvbench baseline-tcp (loopback, in-process echo)",
			})
		}
	}
	return out, nil
}

func ctxErr(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return err
}

// pingPong sends n requests of req bytes, each answered with reply bytes,
// one at a time, recording each round trip in rec if it is not nil.
func pingPong(conn net.Conn, req, reply, n int, rec *latency.Recorder) error {
	msg := make([]byte, headerSize+req)
	binary.LittleEndian.PutUint32(msg, uint32(req))
	binary.LittleEndian.PutUint32(msg[4:], uint32(reply))
	buf := make([]byte, reply)
	for range n {
		start := time.Now()
		if _, err := conn.Write(msg); err != nil {
			return err
		}
		if _, err := io.ReadFull(conn, buf); err != nil {
			return err
		}
		if rec != nil {
			rec.Record(time.Since(start))
		}
	}
	return nil
}

// serveEcho answers every connection of ln until ln is closed.
func serveEcho(ln net.Listener) {
	var wg sync.WaitGroup
	defer wg.Wait()
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer c.Close()
			_ = answer(c)
		}()
	}
}

// answer reads framed requests from c and writes replies of the asked
// size until c fails or closes.
func answer(c net.Conn) error {
	var hdr [headerSize]byte
	var req, reply []byte
	for {
		if _, err := io.ReadFull(c, hdr[:]); err != nil {
			return err
		}
		rn, pn := int(binary.LittleEndian.Uint32(hdr[:])), int(binary.LittleEndian.Uint32(hdr[4:]))
		if rn > maxTCPPayload || pn > maxTCPPayload {
			return fmt.Errorf("baseline: frame of %d/%d bytes", rn, pn)
		}
		if cap(req) < rn {
			req = make([]byte, rn)
		}
		if cap(reply) < pn {
			reply = make([]byte, pn)
		}
		if _, err := io.ReadFull(c, req[:rn]); err != nil {
			return err
		}
		if _, err := c.Write(reply[:pn]); err != nil {
			return err
		}
	}
}
