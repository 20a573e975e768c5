package tcp

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"time"

	"github.com/kvd-project/kvd/transport"
)

// ALPN protocol names: the role a dialer announces in its TLS ClientHello.
const (
	alpnClient = "kvd"
	alpnPeer   = "kvd-peer"
)

// TLS runs every connection of a Transport over TLS 1.3 (Config.TLS). The
// functions are called for every handshake, so they may hand out material
// that was reloaded since (new connections use it; established ones keep
// what they were set up with).
//
// A listener serves both roles on one port: the dialer announces its role
// (RoleClient or RolePeer) in the handshake, Server picks the configuration
// for it (which certificate to show, and whether and against which CAs to
// verify the dialer's), and the accepted connection's Identity reports the
// role and the verified chain.
type TLS struct {
	// Server returns the configuration for an incoming connection whose
	// dialer announced role. It must provide a certificate; its ClientAuth
	// and ClientCAs decide how the dialer's certificate is checked. The
	// transport requires TLS 1.3 and sets NextProtos (on a copy, if the
	// returned configuration does not already have them right). Nil: the
	// transport cannot Listen.
	Server func(role transport.Role) (*tls.Config, error)
	// Client returns the configuration Dial uses: RootCAs to verify the
	// listener (whose certificate must name the dialed host), Certificates
	// or GetClientCertificate for the certificate this end shows. Dial works
	// on a copy, with ServerName defaulting to the dialed host. Nil: the
	// transport cannot Dial.
	Client func() (*tls.Config, error)
	// Role is what Dial announces: RolePeer for a server's transport (its
	// dials are Raft peers), RoleClient for clients. Default RoleClient.
	Role transport.Role
	// ReadOnly, if set, reports whether a verified certificate marks its
	// holder read-only (Identity.ReadOnly on accepted client connections). A
	// peer-role dialer whose certificate it marks read-only is refused.
	ReadOnly func(leaf *x509.Certificate) bool
	// HandshakeError, if set, hears of every accepted connection whose TLS
	// handshake failed (remote is its address): the dialer learns why from
	// the TLS alert, this is the listener's side's only trace.
	HandshakeError func(remote string, err error)
}

// refusedCredential reports whether a handshake failed on a certificate
// (this end's verification of the peer's, or the peer's alert about this
// end's): redialling with the same certificates cannot help.
func refusedCredential(err error) bool {
	var cv *tls.CertificateVerificationError
	var oe *net.OpError
	return errors.As(err, &cv) || (errors.As(err, &oe) && oe.Op == "remote error")
}

// ErrTLS: a TLS handshake failed, or the peer does not speak TLS (or speaks
// it where this end does not).
var ErrTLS = errors.New("tcp: TLS")

func (c *TLS) validate() error {
	switch {
	case c == nil:
		return nil
	case c.Server == nil && c.Client == nil:
		return fmt.Errorf("%w: TLS has neither Server nor Client", ErrConfig)
	case c.Role != transport.RoleNone && c.Role != transport.RoleClient && c.Role != transport.RolePeer:
		return fmt.Errorf("%w: TLS.Role %v", ErrConfig, c.Role)
	}
	return nil
}

// ALPN is the TLS application protocol (NextProtos) that names role in the
// handshake: "kvd-peer" for RolePeer, "kvd" otherwise. A Server
// configuration whose NextProtos is already exactly that, with MinVersion
// TLS 1.3, is used as is rather than copied at every handshake.
func ALPN(role transport.Role) string { return alpnFor(role) }

func alpnFor(r transport.Role) string {
	if r == transport.RolePeer {
		return alpnPeer
	}
	return alpnClient
}

// roleOf maps a dialer's ALPN offer onto the one role it must name.
func roleOf(protos []string) (transport.Role, error) {
	client, peer := slices.Contains(protos, alpnClient), slices.Contains(protos, alpnPeer)
	switch {
	case client && !peer:
		return transport.RoleClient, nil
	case peer && !client:
		return transport.RolePeer, nil
	}
	return transport.RoleNone, fmt.Errorf("dialer announced ALPN %q; want exactly one of %q (client) or %q (peer)",
		protos, alpnClient, alpnPeer)
}

// conform returns cfg, or a copy of it, requiring TLS 1.3 and offering only
// proto.
func conform(cfg *tls.Config, proto string) *tls.Config {
	if cfg.MinVersion >= tls.VersionTLS13 && len(cfg.NextProtos) == 1 && cfg.NextProtos[0] == proto {
		return cfg
	}
	cfg = cfg.Clone()
	cfg.MinVersion = max(cfg.MinVersion, tls.VersionTLS13)
	cfg.NextProtos = []string{proto}
	return cfg
}

// serverConfig is the listeners' tls.Config: it picks the configuration by
// the role the dialer announces.
func (t *Transport) serverConfig() *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS13,
		GetConfigForClient: func(hi *tls.ClientHelloInfo) (*tls.Config, error) {
			role, err := roleOf(hi.SupportedProtos)
			if err != nil {
				return nil, err
			}
			cfg, err := t.cfg.TLS.Server(role)
			if err != nil {
				return nil, err
			}
			cfg = conform(cfg, alpnFor(role))
			if role == transport.RolePeer && t.cfg.TLS.ReadOnly != nil {
				cfg = refuseReadOnly(cfg, t.cfg.TLS.ReadOnly)
			}
			return cfg, nil
		},
	}
}

// refuseReadOnly returns a copy of cfg that fails the handshake of a dialer
// whose verified certificate readOnly marks: such a holder may not be a
// peer, even when one CA issues both clients' and peers' certificates. The
// dialer sees a TLS alert.
func refuseReadOnly(cfg *tls.Config, readOnly func(*x509.Certificate) bool) *tls.Config {
	cfg = cfg.Clone()
	verify := cfg.VerifyConnection
	cfg.VerifyConnection = func(cs tls.ConnectionState) error {
		if len(cs.VerifiedChains) > 0 && readOnly(cs.VerifiedChains[0][0]) {
			return fmt.Errorf("tcp: certificate %q is read-only, so it cannot be a peer's",
				cs.VerifiedChains[0][0].Subject.CommonName)
		}
		if verify != nil {
			return verify(cs)
		}
		return nil
	}
	return cfg
}

// tellPlaintextDialer answers a dialer that sent a plaintext hello to this
// TLS listener with a refusal it can read (refuseNeedTLS), and drains what
// it sends meanwhile, briefly, so that closing does not reset the socket
// before the refusal arrives (as refuse does).
func tellPlaintextDialer(nc net.Conn) {
	_ = nc.SetDeadline(time.Now().Add(refuseLinger))
	if _, err := nc.Write(refusalFor(refuseNeedTLS)); err != nil {
		return
	}
	if tc, ok := nc.(*net.TCPConn); ok {
		_ = tc.CloseWrite()
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(nc, 64<<10))
}

// secure runs the TLS handshake on a fresh socket and returns the TLS
// connection and the remote end's Identity. dialed is whether this end
// dialed; addr is the dialed address, or the dialer's.
func (t *Transport) secure(ctx context.Context, nc net.Conn, addr string, dialed bool) (*tls.Conn, *transport.Identity, error) {
	var tc *tls.Conn
	if dialed {
		if t.cfg.TLS.Client == nil {
			return nil, nil, fmt.Errorf("%w: this transport has no TLS client configuration", ErrConfig)
		}
		cfg, err := t.cfg.TLS.Client()
		if err != nil {
			return nil, nil, fmt.Errorf("%w: client configuration: %w", ErrTLS, err)
		}
		cfg = cfg.Clone()
		cfg.MinVersion = max(cfg.MinVersion, tls.VersionTLS13)
		cfg.NextProtos = []string{alpnFor(t.cfg.TLS.Role)}
		if cfg.ServerName == "" {
			if host, _, err := net.SplitHostPort(addr); err == nil {
				cfg.ServerName = host
			}
		}
		tc = tls.Client(nc, cfg)
	} else {
		tc = tls.Server(nc, t.tlsServer)
	}
	// The caller's deadline bounds the handshake (and ends it with ctx).
	if err := tc.Handshake(); err != nil {
		var rh tls.RecordHeaderError
		plainDialer := false
		switch {
		case errors.As(err, &rh) && string(rh.RecordHeader[:4]) == helloMagic:
			err = fmt.Errorf("%w: the peer speaks plaintext kvd, not TLS (is TLS off on it?): %w: %w", ErrTLS, transport.ErrAuthRefused, err)
			plainDialer = !dialed
		case errors.As(err, &rh) && string(rh.RecordHeader[:4]) == refuseMagic:
			err = refusedErr(rh.RecordHeader[4])
		case refusedCredential(err):
			err = fmt.Errorf("%w: %w: %w", ErrTLS, transport.ErrAuthRefused, err)
		default:
			err = fmt.Errorf("%w: %w", ErrTLS, err)
		}
		if !dialed && t.cfg.TLS.HandshakeError != nil && ctx.Err() == nil {
			t.cfg.TLS.HandshakeError(addr, err)
		}
		if plainDialer {
			tellPlaintextDialer(nc)
		}
		return nil, nil, err
	}
	cs := tc.ConnectionState()
	role, err := roleOf([]string{cs.NegotiatedProtocol})
	if err != nil || (dialed && cs.NegotiatedProtocol != alpnFor(t.cfg.TLS.Role)) {
		return nil, nil, fmt.Errorf("%w: the peer did not agree to a kvd role (ALPN %q)", ErrTLS, cs.NegotiatedProtocol)
	}
	id := &transport.Identity{TLS: true, Role: role}
	if len(cs.VerifiedChains) > 0 {
		id.Certificates = cs.VerifiedChains[0]
		// Peers marked read-only were refused in the handshake.
		id.ReadOnly = !dialed && role == transport.RoleClient &&
			t.cfg.TLS.ReadOnly != nil && t.cfg.TLS.ReadOnly(id.Certificates[0])
	}
	return tc, id, nil
}
