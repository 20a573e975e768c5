package tcp

import (
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"time"

	"github.com/kvd-project/kvd/internal/errs"
	"github.com/kvd-project/kvd/transport"
)

const (
	helloMagic   = "KVDT"
	helloVersion = 1
	helloSize    = 24 // without the node name
)

// hello is what each end announces when a connection opens.
type hello struct {
	version    uint16
	maxMessage uint32 // largest MSG this end accepts
	credits    uint32 // MSGs this end queues, so the peer's send window
	maxReads   uint32 // READ_REQs this end serves at once
	node       string
}

func (h hello) marshal() []byte {
	b := make([]byte, helloSize+len(h.node))
	copy(b, helloMagic)
	binary.LittleEndian.PutUint16(b[4:], h.version)
	binary.LittleEndian.PutUint16(b[6:], uint16(len(h.node)))
	binary.LittleEndian.PutUint32(b[8:], h.maxMessage)
	binary.LittleEndian.PutUint32(b[12:], h.credits)
	binary.LittleEndian.PutUint32(b[16:], h.maxReads)
	copy(b[helloSize:], h.node)
	return b
}

// readHello reads and checks the peer's hello. Errors about its contents
// wrap transport.ErrProtocol.
func readHello(r io.Reader) (hello, error) {
	var b [helloSize]byte
	if n, err := io.ReadFull(r, b[:]); err != nil {
		if n >= 3 && isTLSRecord(b[:n]) {
			return hello{}, fmt.Errorf("%w: the peer speaks TLS and this end does not (configure TLS here)", ErrTLS)
		}
		if n > len(refuseMagic) && string(b[:len(refuseMagic)]) == refuseMagic {
			return hello{}, refusedErr(b[len(refuseMagic)])
		}
		if n == 0 && errors.Is(err, os.ErrDeadlineExceeded) {
			return hello{}, fmt.Errorf("%w: %w", errNoHello, err)
		}
		return hello{}, err
	}
	if string(b[:len(refuseMagic)]) == refuseMagic {
		return hello{}, refusedErr(b[len(refuseMagic)])
	}
	if isTLSRecord(b[:]) {
		return hello{}, fmt.Errorf("%w: the peer speaks TLS and this end does not (configure TLS here): %w",
			ErrTLS, transport.ErrProtocol)
	}
	if string(b[:4]) != helloMagic {
		return hello{}, fmt.Errorf("%w: it sent %q where a kvd hello starts %q: %w",
			errs.ErrNotEndpoint, b[:4], helloMagic, transport.ErrProtocol)
	}
	h := hello{
		version:    binary.LittleEndian.Uint16(b[4:]),
		maxMessage: binary.LittleEndian.Uint32(b[8:]),
		credits:    binary.LittleEndian.Uint32(b[12:]),
		maxReads:   binary.LittleEndian.Uint32(b[16:]),
	}
	nameLen := binary.LittleEndian.Uint16(b[6:])
	switch {
	case h.version != helloVersion:
		return h, protoErr("peer speaks protocol version %d, this end speaks %d", h.version, helloVersion)
	case h.maxMessage < 1 || h.maxMessage > maxMaxMessage:
		return h, protoErr("peer's max message %d not in [1, %d]", h.maxMessage, maxMaxMessage)
	case h.credits < 1 || h.credits > maxCredits:
		return h, protoErr("peer's credits %d not in [1, %d]", h.credits, maxCredits)
	case h.maxReads < 1 || h.maxReads > maxReads:
		return h, protoErr("peer's outstanding reads %d not in [1, %d]", h.maxReads, maxReads)
	case nameLen > maxNodeName:
		return h, protoErr("peer's node name is %d bytes, max %d", nameLen, maxNodeName)
	case binary.LittleEndian.Uint32(b[20:]) != 0:
		return h, protoErr("reserved hello field is set")
	}
	name := make([]byte, nameLen)
	if _, err := io.ReadFull(r, name); err != nil {
		return h, err
	}
	h.node = string(name)
	return h, nil
}

// handshake exchanges hellos on a fresh socket (after a TLS handshake, if
// the transport has TLS) and, if they agree, returns the running
// connection. remote is what RemoteAddr will report; ln is the listener
// that accepted the socket, nil if this end dialed. On error the socket is
// closed.
func (t *Transport) handshake(ctx context.Context, nc net.Conn, remote string, ln *listener) (*conn, error) {
	dialed := ln == nil
	if tc, ok := nc.(*net.TCPConn); ok {
		// Frames are flushed whole; Nagle would only add latency to them.
		_ = tc.SetNoDelay(true)
	}
	sock := nc // closed to end the connection, TLS or not
	// A past deadline wakes the blocked socket calls when ctx ends (so that
	// the error reported is ctx's, not a socket timeout). It is set on the
	// socket, which TLS wraps: nc is replaced below, and the callback runs
	// on another goroutine, which must not read nc as it changes.
	stop := context.AfterFunc(ctx, func() { _ = sock.SetDeadline(time.Unix(1, 0)) })
	var id *transport.Identity
	var err error
	if t.cfg.TLS != nil {
		var tc *tls.Conn
		if tc, id, err = t.secure(ctx, sock, remote, dialed); err == nil {
			nc = tc
		}
	}
	local := t.hello()
	if err == nil {
		_, err = nc.Write(local.marshal())
	}
	var peer hello
	if err == nil {
		peer, err = readHello(nc)
		if err != nil && id != nil {
			err = remoteTLSErr(err)
		}
	}
	if !stop() || err != nil {
		sock.Close()
		return nil, handshakeErr(ctx, remote, err)
	}
	if err := sock.SetDeadline(time.Time{}); err != nil {
		sock.Close()
		return nil, handshakeErr(ctx, remote, err)
	}
	c := newConn(t, nc, remote, local, peer)
	if ln != nil {
		c.ln = ln
		if d := t.cfg.IdleTimeout; d > 0 {
			c.idle.Store(int64(d))
		}
	}
	if id != nil {
		c.sock, c.id = sock, id
	}
	if err := t.adopt(c); err != nil {
		sock.Close()
		return nil, err
	}
	c.start()
	return c, nil
}

// remoteTLSErr marks a TLS alert from the peer: in TLS 1.3 a dialer's
// handshake is done before the listener has checked its certificate, so a
// refusal arrives as the first read after it.
func remoteTLSErr(err error) error {
	var oe *net.OpError
	if errors.As(err, &oe) && oe.Op == "remote error" {
		return fmt.Errorf("%w: the peer refused this end: %w: %w", ErrTLS, transport.ErrAuthRefused, err)
	}
	return err
}

// isTLSRecord reports whether b starts like a TLS record (a handshake or an
// alert, version 3.x): what a TLS peer sends where a hello belongs.
func isTLSRecord(b []byte) bool {
	return (b[0] == 0x15 || b[0] == 0x16) && b[1] == 3 && b[2] <= 4
}

// errNoHello: the peer accepted the connection and sent nothing until the
// handshake's deadline. Every kvd listener sends its hello at once, without
// waiting for the dialer's, so silence is the mark of another protocol
// whose server waits for its client to speak first (an HTTP port, such as
// kvd's own --metrics-listen), or of a stopped process.
var errNoHello = errors.New("no hello")

func handshakeErr(ctx context.Context, remote string, err error) error {
	switch {
	case ctx.Err() != nil && errors.Is(err, errNoHello):
		return fmt.Errorf("tcp: handshake with %s: %w: it accepted the connection but sent no kvd hello "+
			"(an HTTP or metrics port? a stopped process?): %w", remote, errs.ErrNotEndpoint, ctx.Err())
	case ctx.Err() != nil:
		return fmt.Errorf("tcp: handshake with %s: %w", remote, ctx.Err())
	case errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF):
		return fmt.Errorf("tcp: handshake with %s: peer hung up (it may have rejected this end's hello, or expect TLS): %w",
			remote, transport.ErrClosed)
	}
	return fmt.Errorf("tcp: handshake with %s: %w", remote, err)
}
