package tcp

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kvd-project/kvd/internal/kvdtest/wait"
	"github.com/kvd-project/kvd/internal/tlsutil/tlstest"
	"github.com/kvd-project/kvd/transport"
	"github.com/kvd-project/kvd/transport/transporttest"
)

// testPKI is a client CA and a peer CA, and the certificates they issued.
type testPKI struct {
	clientCA, peerCA, otherCA *tlstest.CA
	server                    *tlstest.Leaf // shown to clients (client CA)
	peer                      *tlstest.Leaf // a member's (peer CA)
	client                    *tlstest.Leaf // a client's (client CA)
	readOnly                  *tlstest.Leaf // a client's, OU=read-only (client CA)
	stranger                  *tlstest.Leaf // from another CA
}

func newTestPKI(t testing.TB) *testPKI {
	p := &testPKI{
		clientCA: tlstest.NewCA(t, "client CA"),
		peerCA:   tlstest.NewCA(t, "peer CA"),
		otherCA:  tlstest.NewCA(t, "other CA"),
	}
	p.server = p.clientCA.Issue(t, "server", tlstest.Options{})
	p.peer = p.peerCA.Issue(t, "peer", tlstest.Options{})
	p.client = p.clientCA.Issue(t, "alice", tlstest.Options{})
	p.readOnly = p.clientCA.Issue(t, "reader", tlstest.Options{OU: []string{"read-only"}})
	p.stranger = p.otherCA.Issue(t, "mallory", tlstest.Options{})
	return p
}

func isReadOnly(leaf *x509.Certificate) bool {
	return slices.Contains(leaf.Subject.OrganizationalUnit, "read-only")
}

// listenTLS describes a listener's TLS: the certificate it shows to each
// role, and the CA that must have issued each role's dialer's certificate
// (nil: none asked for).
type listenTLS struct {
	serverCert, peerCert *tlstest.Leaf
	clientCA, peerCA     *tlstest.CA
}

func (l listenTLS) config() *TLS {
	return &TLS{
		Server: func(role transport.Role) (*tls.Config, error) {
			cert, ca := l.serverCert, l.clientCA
			if role == transport.RolePeer {
				cert, ca = l.peerCert, l.peerCA
			}
			cfg := &tls.Config{Certificates: []tls.Certificate{cert.TLS}}
			if ca != nil {
				cfg.ClientAuth, cfg.ClientCAs = tls.RequireAndVerifyClientCert, ca.Pool()
			}
			return cfg, nil
		},
		ReadOnly: isReadOnly,
	}
}

// dialTLS is a dialer's TLS: announcing role, trusting roots, showing cert
// (nil: none).
func dialTLS(role transport.Role, roots *tlstest.CA, cert *tlstest.Leaf) *TLS {
	return &TLS{
		Role: role,
		Client: func() (*tls.Config, error) {
			cfg := &tls.Config{RootCAs: roots.Pool()}
			if cert != nil {
				cfg.Certificates = []tls.Certificate{cert.TLS}
			}
			return cfg, nil
		},
	}
}

// forced is dialTLS, but the certificate is sent even if the listener
// names other CAs as acceptable (Go's client otherwise sends none), so that
// the listener's verification is what refuses it.
func forced(role transport.Role, roots *tlstest.CA, cert *tlstest.Leaf) *TLS {
	return &TLS{
		Role: role,
		Client: func() (*tls.Config, error) {
			return &tls.Config{RootCAs: roots.Pool(), GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
				return &cert.TLS, nil
			}}, nil
		},
	}
}

// mutual is the usual listener: both roles must show certificates.
func (p *testPKI) mutual() listenTLS {
	return listenTLS{serverCert: p.server, peerCert: p.peer, clientCA: p.clientCA, peerCA: p.peerCA}
}

func TestConformanceTLS(t *testing.T) {
	p := newTestPKI(t)
	for _, role := range []transport.Role{transport.RoleClient, transport.RolePeer} {
		t.Run(role.String(), func(t *testing.T) {
			roots, cert := p.clientCA, p.client
			if role == transport.RolePeer {
				roots, cert = p.peerCA, p.peer
			}
			transporttest.Run(t, transporttest.Factory{
				New: func(t *testing.T) (server, client transport.Transport, addr string) {
					return newTestTransport(t, Config{Credits: testCredits, TLS: p.mutual().config()}),
						newTestTransport(t, Config{Credits: testCredits, TLS: dialTLS(role, roots, cert)}),
						"127.0.0.1:0"
				},
				Credits: testCredits,
			})
		})
	}
}

// tlsConnect dials ln from a transport configured with dial and returns
// both ends, or Dial's error (and no accepted end).
func tlsConnect(t *testing.T, ln transport.Listener, dial *TLS) (c, s transport.Conn, err error) {
	t.Helper()
	ctx := testCtx(t)
	cli := newTestTransport(t, Config{TLS: dial})
	c, err = cli.Dial(ctx, ln.Addr())
	if err != nil {
		return nil, nil, err
	}
	s, err = ln.Accept(ctx)
	if err != nil {
		t.Fatalf("Accept after a successful Dial: %v", err)
	}
	return c, s, nil
}

func TestTLSAuthentication(t *testing.T) {
	p := newTestPKI(t)
	expired := p.clientCA.Issue(t, "server", tlstest.Options{
		NotBefore: time.Now().Add(-48 * time.Hour), NotAfter: time.Now().Add(-time.Hour)})
	expiredClient := p.clientCA.Issue(t, "old-alice", tlstest.Options{
		NotBefore: time.Now().Add(-48 * time.Hour), NotAfter: time.Now().Add(-time.Hour)})
	noAuth := listenTLS{serverCert: p.server, peerCert: p.peer}
	shared := listenTLS{serverCert: p.server, peerCert: p.server, clientCA: p.clientCA, peerCA: p.clientCA}
	client, peer := transport.RoleClient, transport.RolePeer

	tests := []struct {
		name   string
		listen listenTLS
		dial   *TLS
		// On success: the name each end sees of the other ("" none).
		serverSees, clientSees string
		readOnly               bool
		wantErr                string // substring of Dial's error; "" success
		serverFault            bool   // the listener's certificate is bad: no dial succeeds
	}{
		{name: "client, no client-cert auth", listen: noAuth, dial: dialTLS(client, p.clientCA, nil),
			clientSees: "server"},
		{name: "client cert ignored without client-cert auth", listen: noAuth, dial: dialTLS(client, p.clientCA, p.client),
			clientSees: "server"},
		{name: "client, client-cert auth", listen: p.mutual(), dial: dialTLS(client, p.clientCA, p.client),
			serverSees: "alice", clientSees: "server"},
		{name: "read-only client", listen: p.mutual(), dial: dialTLS(client, p.clientCA, p.readOnly),
			serverSees: "reader", clientSees: "server", readOnly: true},
		{name: "peer, peer-cert auth", listen: p.mutual(), dial: dialTLS(peer, p.peerCA, p.peer),
			serverSees: "peer", clientSees: "peer"},
		{name: "peer, no peer-cert auth", listen: noAuth, dial: dialTLS(peer, p.peerCA, nil),
			clientSees: "peer"},

		{name: "client without a certificate", listen: p.mutual(), dial: dialTLS(client, p.clientCA, nil),
			wantErr: "certificate required"},
		// Go's dialer shows no certificate the listener's CAs did not issue...
		{name: "client certificate from another CA", listen: p.mutual(), dial: dialTLS(client, p.clientCA, p.stranger),
			wantErr: "certificate required"},
		// ...so these force it, to test the listener's verification.
		{name: "client certificate from another CA, forced", listen: p.mutual(), dial: forced(client, p.clientCA, p.stranger),
			wantErr: "unknown certificate authority"},
		{name: "client's certificate as a peer", listen: p.mutual(), dial: forced(peer, p.peerCA, p.client),
			wantErr: "unknown certificate authority"},
		{name: "peer's certificate as a client", listen: p.mutual(), dial: forced(client, p.clientCA, p.peer),
			wantErr: "unknown certificate authority"},
		{name: "peer without a certificate", listen: p.mutual(), dial: dialTLS(peer, p.peerCA, nil),
			wantErr: "certificate required"},
		{name: "read-only certificate as a peer (one CA for both)", listen: shared,
			dial: dialTLS(peer, p.clientCA, p.readOnly), wantErr: "bad certificate"},
		{name: "server not trusted (wrong CA)", listen: p.mutual(), dial: dialTLS(client, p.otherCA, p.client),
			wantErr: "certificate signed by unknown authority"},
		{name: "peer not trusted (client CA for the peer role)", listen: p.mutual(), dial: dialTLS(peer, p.clientCA, p.peer),
			wantErr: "certificate signed by unknown authority"},
		{name: "expired server certificate", listen: listenTLS{serverCert: expired, peerCert: p.peer},
			dial: dialTLS(client, p.clientCA, nil), wantErr: "expired", serverFault: true},
		{name: "expired client certificate", listen: p.mutual(), dial: dialTLS(client, p.clientCA, expiredClient),
			wantErr: "expired certificate"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := newTestTransport(t, Config{TLS: tt.listen.config()})
			ln, err := srv.Listen("127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			c, s, err := tlsConnect(t, ln, tt.dial)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) || !errors.Is(err, ErrTLS) || !errors.Is(err, transport.ErrAuthRefused) {
					t.Fatalf("Dial: %v; want ErrTLS and transport.ErrAuthRefused (not worth retrying), containing %q", err, tt.wantErr)
				}
				if tt.serverFault {
					return
				}
				// The refused dialer was never queued: the next dial is
				// the first connection accepted.
				good := dialTLS(transport.RoleClient, p.clientCA, p.client)
				if _, s, err := tlsConnect(t, ln, good); err != nil || s.(transport.Identified).Identity().Name() != "alice" {
					t.Fatalf("a good dial after the refused one: %v", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("Dial: %v", err)
			}
			sid, cid := transport.IdentityOf(s), transport.IdentityOf(c)
			if !sid.TLS || !cid.TLS || sid.Role != tt.dial.Role || cid.Role != tt.dial.Role {
				t.Errorf("identities: server end %+v, client end %+v; want TLS, role %v", sid, cid, tt.dial.Role)
			}
			if sid.Name() != tt.serverSees || cid.Name() != tt.clientSees {
				t.Errorf("server end sees %q, client end sees %q; want %q, %q", sid.Name(), cid.Name(), tt.serverSees, tt.clientSees)
			}
			if sid.ReadOnly != tt.readOnly || cid.ReadOnly {
				t.Errorf("read-only: server end %v, client end %v; want %v, false", sid.ReadOnly, cid.ReadOnly, tt.readOnly)
			}
			if sid.PeerAllowed() != (tt.dial.Role == transport.RolePeer) || sid.ClientAllowed() != (tt.dial.Role == transport.RoleClient) {
				t.Errorf("PeerAllowed %v, ClientAllowed %v for role %v", sid.PeerAllowed(), sid.ClientAllowed(), tt.dial.Role)
			}
			// Messages and one-sided READs ride the TLS connection.
			ctx := testCtx(t)
			r, _ := srv.Register(64)
			copy(r.Bytes(), "secret bytes")
			dst := make([]byte, 12)
			if err := c.Read(ctx, []transport.ReadOp{{Remote: r.Descriptor(), Dst: dst}}); err != nil || string(dst) != "secret bytes" {
				t.Fatalf("Read over TLS: %q, %v", dst, err)
			}
			if err := c.Send(ctx, []byte("hi")); err != nil {
				t.Fatal(err)
			}
			if got, err := s.Recv(ctx, nil); err != nil || string(got) != "hi" {
				t.Fatalf("Recv over TLS: %q, %v", got, err)
			}
		})
	}
}

func TestTLSAndPlaintextRefuseEachOther(t *testing.T) {
	p := newTestPKI(t)
	ctx := testCtx(t)
	var handshakeErrs atomic.Int32
	lcfg := p.mutual().config()
	lcfg.HandshakeError = func(string, error) { handshakeErrs.Add(1) }
	secure := newTestTransport(t, Config{TLS: lcfg})
	sln, err := secure.Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	plain := newTestTransport(t, Config{})
	pln, err := plain.Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}

	var lastErr atomic.Value
	lcfg.HandshakeError = func(_ string, err error) { lastErr.Store(err.Error()); handshakeErrs.Add(1) }
	// The plaintext dialer is told why (a bare socket close would make a
	// client take the node for unreachable).
	if _, err := plain.Dial(ctx, sln.Addr()); !errors.Is(err, ErrTLS) || !errors.Is(err, transport.ErrAuthRefused) {
		t.Errorf("plaintext Dial of a TLS listener: %v; want ErrTLS and transport.ErrAuthRefused", err)
	}
	if msg, _ := lastErr.Load().(string); !strings.Contains(msg, "plaintext") {
		t.Errorf("the TLS listener's handshake error: %q; want it to say the dialer is plaintext", msg)
	}
	dialer := newTestTransport(t, Config{TLS: dialTLS(transport.RoleClient, p.clientCA, p.client)})
	if _, err := dialer.Dial(ctx, pln.Addr()); !errors.Is(err, ErrTLS) || !strings.Contains(err.Error(), "plaintext") {
		t.Errorf("TLS Dial of a plaintext listener: %v; want ErrTLS, saying the peer is plaintext", err)
	}
	// A TLS client that names no kvd role (ALPN) is refused.
	nc, err := tls.Dial("tcp", sln.Addr(), &tls.Config{RootCAs: p.clientCA.Pool(), Certificates: []tls.Certificate{p.client.TLS}})
	if err == nil {
		nc.SetDeadline(time.Now().Add(10 * time.Second))
		_, err = nc.Read(make([]byte, 1))
		nc.Close()
	}
	if err == nil || !strings.Contains(err.Error(), "internal error") {
		t.Errorf("TLS without ALPN: %v; want the handshake refused", err)
	}
	// Nor is TLS below 1.3.
	nc, err = tls.Dial("tcp", sln.Addr(), &tls.Config{RootCAs: p.clientCA.Pool(), Certificates: []tls.Certificate{p.client.TLS},
		NextProtos: []string{"kvd"}, MaxVersion: tls.VersionTLS12})
	if err == nil {
		nc.Close()
		t.Errorf("TLS 1.2 handshake accepted")
	} else if !strings.Contains(err.Error(), "protocol version") {
		t.Errorf("TLS 1.2: %v; want a protocol version alert", err)
	}
	// Only the good dial below is ever accepted, and the listener heard of
	// the failed handshakes.
	c, s, err := tlsConnect(t, sln, dialTLS(transport.RoleClient, p.clientCA, p.client))
	if err != nil || transport.IdentityOf(s).Name() != "alice" {
		t.Fatalf("good dial: %v", err)
	}
	c.Close()
	// The listener reports a refusal after its alert is on the way.
	wait.For(t, "HandshakeError for the plaintext dialer, no ALPN and TLS 1.2", func() bool { return handshakeErrs.Load() >= 3 })
	if n := handshakeErrs.Load(); n != 3 {
		t.Errorf("HandshakeError called %d times; want 3 (plaintext dialer, no ALPN, TLS 1.2)", n)
	}
	if id := transport.IdentityOf(s); id.TLS != true {
		t.Errorf("identity %+v", id)
	}
}

func TestPlaintextIdentityIsZero(t *testing.T) {
	c, s, _ := benchPair(t)
	for _, conn := range []transport.Conn{c, s} {
		id := transport.IdentityOf(conn)
		if id.TLS || id.Role != transport.RoleNone || id.Certificates != nil || id.ReadOnly || !id.PeerAllowed() || !id.ClientAllowed() {
			t.Errorf("plaintext identity %+v; want the zero Identity, allowed both ways", id)
		}
	}
}

// TestTLSServerConfigPerHandshake: the listener asks for its configuration
// at every handshake, so material swapped in (a reload) serves the next
// connection while the established one carries on.
func TestTLSServerConfigPerHandshake(t *testing.T) {
	p := newTestPKI(t)
	next := p.clientCA.Issue(t, "server-2", tlstest.Options{})
	var cur atomic.Pointer[tlstest.Leaf]
	cur.Store(p.server)
	srv := newTestTransport(t, Config{TLS: &TLS{Server: func(transport.Role) (*tls.Config, error) {
		return &tls.Config{Certificates: []tls.Certificate{cur.Load().TLS}}, nil
	}}})
	ln, err := srv.Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dial := dialTLS(transport.RoleClient, p.clientCA, nil)
	c1, s1, err := tlsConnect(t, ln, dial)
	if err != nil || transport.IdentityOf(c1).Name() != "server" {
		t.Fatalf("first dial: %v, %+v", err, transport.IdentityOf(c1))
	}
	cur.Store(next)
	c2, _, err := tlsConnect(t, ln, dial)
	if err != nil || transport.IdentityOf(c2).Name() != "server-2" {
		t.Fatalf("dial after the swap: %v, sees %q; want server-2", err, transport.IdentityOf(c2).Name())
	}
	ctx := testCtx(t)
	if err := c1.Send(ctx, []byte("old conn")); err != nil {
		t.Fatal(err)
	}
	if got, err := s1.Recv(ctx, nil); err != nil || string(got) != "old conn" {
		t.Fatalf("the established connection after the swap: %q, %v", got, err)
	}
}

func TestTLSConfigValidation(t *testing.T) {
	if _, err := New(Config{TLS: &TLS{}}); !errors.Is(err, ErrConfig) {
		t.Errorf("TLS with neither side: %v, want ErrConfig", err)
	}
	if _, err := New(Config{TLS: &TLS{Client: func() (*tls.Config, error) { return nil, nil }, Role: 9}}); !errors.Is(err, ErrConfig) {
		t.Errorf("bad role: %v, want ErrConfig", err)
	}
	cli := newTestTransport(t, Config{TLS: dialTLS(transport.RoleClient, newTestPKI(t).clientCA, nil)})
	if _, err := cli.Listen("127.0.0.1:0"); !errors.Is(err, ErrConfig) {
		t.Errorf("Listen without TLS.Server: %v, want ErrConfig", err)
	}
	srv := newTestTransport(t, Config{TLS: newTestPKI(t).mutual().config()})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	if _, err := srv.Dial(context.Background(), ln.Addr().String()); !errors.Is(err, ErrConfig) {
		t.Errorf("Dial without TLS.Client: %v, want ErrConfig", err)
	}
}

// TestTLSDialRefusesNonKVDServer: a TLS server that does not take up the
// dialer's kvd role (a web server at the address, say) is refused.
func TestTLSDialRefusesNonKVDServer(t *testing.T) {
	p := newTestPKI(t)
	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{p.server.TLS}})
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				if c.(*tls.Conn).Handshake() == nil {
					c.Write(okHello().marshal()) // even a kvd hello does not help
					c.Read(make([]byte, 1))
				}
			}()
		}
	}()
	dialer := newTestTransport(t, Config{TLS: dialTLS(transport.RoleClient, p.clientCA, nil)})
	if _, err := dialer.Dial(testCtx(t), ln.Addr().String()); !errors.Is(err, ErrTLS) || !strings.Contains(err.Error(), "kvd role") {
		t.Fatalf("Dial of a TLS server without ALPN: %v; want ErrTLS about the kvd role", err)
	}
}

// TestReadHelloSeesTLS: a plaintext end that receives a TLS ClientHello
// where a hello belongs says so.
func TestReadHelloSeesTLS(t *testing.T) {
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	go tls.Client(a, &tls.Config{ServerName: "x", NextProtos: []string{"kvd"}}).Handshake()
	if _, err := readHello(b); !errors.Is(err, ErrTLS) || !errors.Is(err, transport.ErrProtocol) {
		t.Fatalf("readHello of a ClientHello: %v; want ErrTLS and ErrProtocol", err)
	}
}
