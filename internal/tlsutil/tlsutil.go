package tlsutil

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kvd-project/kvd/transport"
	"github.com/kvd-project/kvd/transport/tcp"
)

// ReadOnlyOU, as an organizational unit (OU) of a client certificate's
// subject, marks its holder read-only: it may GET, but its PUTs, DELETEs and
// membership changes are refused, and it can never be a peer.
const ReadOnlyOU = "kvd-read-only"

// DefaultPoll is how often kvd checks its TLS files for changes.
const DefaultPoll = 5 * time.Second

// ServerFiles names a kvd server's TLS material. A node that serves
// clients and peers on one listener has TLS on for both or for neither:
// either both certificate pairs are given (they may be the same files) or
// none. A node with a listener for peers (PeerListener) has client TLS
// (CertFile) and peer TLS (PeerCertFile) each on or off.
type ServerFiles struct {
	// CertFile and KeyFile (--cert-file, --key-file) are the certificate
	// the listener shows to clients.
	CertFile, KeyFile string
	// TrustedCAFile (--trusted-ca-file) is the CA bundle that must have
	// issued clients' certificates; used with ClientCertAuth only.
	TrustedCAFile string
	// ClientCertAuth (--client-cert-auth): clients must show a certificate
	// issued by TrustedCAFile.
	ClientCertAuth bool
	// PeerCertFile and PeerKeyFile (--peer-cert-file, --peer-key-file) are
	// the certificate shown to peers, both when they dial this node and
	// when it dials them.
	PeerCertFile, PeerKeyFile string
	// PeerTrustedCAFile (--peer-trusted-ca-file) is the CA bundle that
	// issued the members' peer certificates; required with peer TLS,
	// since the node verifies the peers it dials against it.
	PeerTrustedCAFile string
	// PeerClientCertAuth (--peer-client-cert-auth): peers dialing this node
	// must show a certificate issued by PeerTrustedCAFile.
	PeerClientCertAuth bool
	// ReadOnlyCNs (--read-only-client-cn) are client certificate common
	// names that are read-only, besides certificates with ReadOnlyOU.
	// Needs ClientCertAuth.
	ReadOnlyCNs []string
	// PeerListener: the node listens for peers apart from clients
	// (--listen-peer), so client TLS and peer TLS are independent.
	PeerListener bool
}

// Enabled reports whether any certificate is named, so TLS is wanted.
func (f ServerFiles) Enabled() bool { return f.clientTLS() || f.peerTLS() }

func (f ServerFiles) clientTLS() bool { return f.CertFile != "" || f.KeyFile != "" }
func (f ServerFiles) peerTLS() bool   { return f.PeerCertFile != "" || f.PeerKeyFile != "" }

// Check reports a combination of settings that cannot work, naming flags.
func (f ServerFiles) Check() error {
	switch {
	case !f.PeerListener && !f.Enabled():
		if f.TrustedCAFile != "" || f.ClientCertAuth || f.PeerTrustedCAFile != "" || f.PeerClientCertAuth || len(f.ReadOnlyCNs) > 0 {
			return errors.New("TLS settings given without certificates: TLS needs --cert-file/--key-file and --peer-cert-file/--peer-key-file " +
				"(or only one pair, with --listen-peer)")
		}
		return nil
	case (f.CertFile == "") != (f.KeyFile == ""):
		return errors.New("--cert-file and --key-file go together")
	case (f.PeerCertFile == "") != (f.PeerKeyFile == ""):
		return errors.New("--peer-cert-file and --peer-key-file go together")
	case !f.PeerListener && (f.CertFile == "" || f.PeerCertFile == ""):
		return errors.New("kvd serves clients and peers on one address (--listen), so TLS is on for both or neither: " +
			"give --cert-file/--key-file and --peer-cert-file/--peer-key-file (they may name the same files), " +
			"or give peers an address of their own with --listen-peer to turn client TLS and peer TLS on separately")
	}
	if err := f.checkPeer(); err != nil {
		return err
	}
	return f.checkClient()
}

// checkPeer checks the peer TLS settings.
func (f ServerFiles) checkPeer() error {
	switch {
	case !f.peerTLS() && (f.PeerTrustedCAFile != "" || f.PeerClientCertAuth):
		return errors.New("--peer-trusted-ca-file and --peer-client-cert-auth are peer TLS settings: give --peer-cert-file/--peer-key-file too")
	case f.peerTLS() && f.PeerTrustedCAFile == "":
		return errors.New("peer TLS needs --peer-trusted-ca-file: this node verifies the members it dials against it")
	}
	return nil
}

// checkClient checks the client TLS settings.
func (f ServerFiles) checkClient() error {
	switch {
	case !f.clientTLS() && (f.TrustedCAFile != "" || f.ClientCertAuth || len(f.ReadOnlyCNs) > 0):
		return errors.New("--trusted-ca-file, --client-cert-auth and --read-only-client-cn are client TLS settings: give --cert-file/--key-file too")
	case f.ClientCertAuth && f.TrustedCAFile == "":
		return errors.New("--client-cert-auth needs --trusted-ca-file, the CA that issues client certificates")
	case !f.ClientCertAuth && f.TrustedCAFile != "":
		return errors.New("--trusted-ca-file is used only with --client-cert-auth; without it, clients are not authenticated")
	case !f.ClientCertAuth && len(f.ReadOnlyCNs) > 0:
		return errors.New("--read-only-client-cn needs --client-cert-auth: only authenticated clients can be told apart")
	}
	return nil
}

// ClientFiles names a client's TLS material: etcdctl's flags.
type ClientFiles struct {
	// CACert (--cacert) verifies the servers; empty: the system's roots.
	CACert string
	// Cert and Key (--cert, --key) are shown to servers that ask for a
	// client certificate.
	Cert, Key string
}

// Enabled reports whether any file is named, so TLS is wanted.
func (f ClientFiles) Enabled() bool { return f.CACert != "" || f.Cert != "" || f.Key != "" }

// Check reports a combination of settings that cannot work, naming flags.
func (f ClientFiles) Check() error {
	if (f.Cert == "") != (f.Key == "") {
		return errors.New("--cert and --key go together")
	}
	return nil
}

// Store holds the TLS material in use and reloads it. It is safe for
// concurrent use.
type Store struct {
	files    []file // in a fixed order; the labels name flags
	build    func(contents map[string][]byte) (*material, error)
	role     transport.Role // what dials announce
	readOnly map[string]bool
	log      *slog.Logger

	cur   atomic.Pointer[material]
	loads atomic.Uint64 // successful loads, the first included

	mu   sync.Mutex        // serializes reloads; guards seen
	seen map[string][]byte // contents last looked at, loaded or not
}

// file is one PEM file and the flag that names it.
type file struct{ flag, path string }

// material is one loaded set: the listener's configurations per role (nil
// for a client) and the dialer's.
type material struct {
	client, peer, dial *tls.Config
}

// NewServer loads a kvd server's material. f must pass Check. The error
// names the flag whose file failed.
func NewServer(f ServerFiles, log *slog.Logger) (*Store, error) {
	if err := f.Check(); err != nil {
		return nil, err
	}
	s := &Store{role: transport.RolePeer, readOnly: map[string]bool{}, log: orDiscard(log)}
	for _, cn := range f.ReadOnlyCNs {
		s.readOnly[cn] = true
	}
	if f.clientTLS() {
		s.files = append(s.files, file{"--cert-file", f.CertFile}, file{"--key-file", f.KeyFile})
	}
	if f.peerTLS() {
		s.files = append(s.files, file{"--peer-cert-file", f.PeerCertFile}, file{"--peer-key-file", f.PeerKeyFile},
			file{"--peer-trusted-ca-file", f.PeerTrustedCAFile})
	}
	if f.TrustedCAFile != "" {
		s.files = append(s.files, file{"--trusted-ca-file", f.TrustedCAFile})
	}
	s.build = func(c map[string][]byte) (*material, error) {
		m := &material{}
		if f.clientTLS() {
			if err := s.buildClient(c, f, m); err != nil {
				return nil, err
			}
		}
		if f.peerTLS() {
			if err := s.buildPeer(c, f, m); err != nil {
				return nil, err
			}
		}
		return m, nil
	}
	if err := s.Reload(); err != nil {
		return nil, err
	}
	return s, nil
}

// buildClient sets m's client listener configuration.
func (s *Store) buildClient(c map[string][]byte, f ServerFiles, m *material) error {
	cert, err := s.keyPair(c, "--cert-file", "--key-file")
	if err != nil {
		return err
	}
	m.client = listenConfig(transport.RoleClient, cert)
	if f.ClientCertAuth {
		if m.client.ClientCAs, err = s.pool(c, "--trusted-ca-file"); err != nil {
			return err
		}
		m.client.ClientAuth = tls.RequireAndVerifyClientCert
	}
	return nil
}

// buildPeer sets m's peer listener and peer dial configurations.
func (s *Store) buildPeer(c map[string][]byte, f ServerFiles, m *material) error {
	peerCert, err := s.keyPair(c, "--peer-cert-file", "--peer-key-file")
	if err != nil {
		return err
	}
	peerCAs, err := s.pool(c, "--peer-trusted-ca-file")
	if err != nil {
		return err
	}
	m.peer = listenConfig(transport.RolePeer, peerCert)
	m.dial = &tls.Config{MinVersion: tls.VersionTLS13, RootCAs: peerCAs, Certificates: []tls.Certificate{peerCert}}
	if f.PeerClientCertAuth {
		m.peer.ClientCAs, m.peer.ClientAuth = peerCAs, tls.RequireAndVerifyClientCert
	}
	return nil
}

// NewClient loads a client's material. f must pass Check.
func NewClient(f ClientFiles) (*Store, error) {
	if err := f.Check(); err != nil {
		return nil, err
	}
	s := &Store{role: transport.RoleClient, log: orDiscard(nil)}
	if f.CACert != "" {
		s.files = append(s.files, file{"--cacert", f.CACert})
	}
	if f.Cert != "" {
		s.files = append(s.files, file{"--cert", f.Cert}, file{"--key", f.Key})
	}
	s.build = func(c map[string][]byte) (*material, error) {
		m := &material{dial: &tls.Config{MinVersion: tls.VersionTLS13}}
		var err error
		if f.CACert != "" {
			if m.dial.RootCAs, err = s.pool(c, "--cacert"); err != nil {
				return nil, err
			}
		}
		if f.Cert != "" {
			cert, err := s.keyPair(c, "--cert", "--key")
			if err != nil {
				return nil, err
			}
			m.dial.Certificates = []tls.Certificate{cert}
		}
		return m, nil
	}
	if err := s.Reload(); err != nil {
		return nil, err
	}
	return s, nil
}

func orDiscard(log *slog.Logger) *slog.Logger {
	if log == nil {
		return slog.New(slog.DiscardHandler)
	}
	return log
}

func listenConfig(role transport.Role, cert tls.Certificate) *tls.Config {
	return &tls.Config{
		MinVersion:   tls.VersionTLS13,
		NextProtos:   []string{tcp.ALPN(role)},
		Certificates: []tls.Certificate{cert},
		// Resumed sessions would skip verifying against a CA pool that
		// has been reloaded since; connections are long-lived anyway.
		SessionTicketsDisabled: true,
	}
}

// keyPair parses a certificate and its key, and refuses a certificate that
// has expired or whose key does not match.
func (s *Store) keyPair(c map[string][]byte, certFlag, keyFlag string) (tls.Certificate, error) {
	cert, err := tls.X509KeyPair(c[certFlag], c[keyFlag])
	if err != nil {
		return cert, fmt.Errorf("%s, %s: %w", s.name(certFlag), s.name(keyFlag), err)
	}
	if now := time.Now(); now.After(cert.Leaf.NotAfter) {
		return cert, fmt.Errorf("%s: certificate %q expired at %s", s.name(certFlag), cert.Leaf.Subject.CommonName,
			cert.Leaf.NotAfter.UTC().Format(time.RFC3339))
	}
	return cert, nil
}

// pool parses a CA bundle.
func (s *Store) pool(c map[string][]byte, flag string) (*x509.CertPool, error) {
	p := x509.NewCertPool()
	if !p.AppendCertsFromPEM(c[flag]) {
		return nil, fmt.Errorf("%s: no PEM certificate in the file", s.name(flag))
	}
	return p, nil
}

// name is a flag and the file it names, for errors.
func (s *Store) name(flag string) string {
	for _, f := range s.files {
		if f.flag == flag {
			return flag + " " + f.path
		}
	}
	return flag
}

// read reads every file, keyed by flag.
func (s *Store) read() (map[string][]byte, error) {
	c := make(map[string][]byte, len(s.files))
	for _, f := range s.files {
		b, err := os.ReadFile(f.path)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", f.flag, err) // err names the path
		}
		c[f.flag] = b
	}
	return c, nil
}

// Reload reads and loads every file. If anything fails it keeps the
// material in use, logs why, and returns the error (naming the flag).
func (s *Store) Reload() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	c, err := s.read()
	if err == nil {
		s.seen = c
		err = s.load(c)
	}
	if err != nil && s.cur.Load() != nil {
		s.log.Error("TLS material not reloaded; keeping the material in use", "err", err)
	}
	return err
}

// load builds material from c and puts it in use.
func (s *Store) load(c map[string][]byte) error {
	m, err := s.build(c)
	if err != nil {
		return err
	}
	first := s.cur.Swap(m) == nil
	s.loads.Add(1)
	if !first {
		s.log.Info("TLS material reloaded; new connections use it")
	}
	return nil
}

// reloadIfChanged loads the files if their contents differ from what was
// last looked at. Contents, not modification times, are compared, so that
// a rotation is seen however fast it follows the last one. A failed load is
// not retried until the files change again.
func (s *Store) reloadIfChanged() {
	s.mu.Lock()
	defer s.mu.Unlock()
	c, err := s.read()
	if err != nil {
		// Mid-rotation, perhaps: look again next time.
		s.log.Warn("TLS files not readable; keeping the material in use", "err", err)
		return
	}
	if sameContents(c, s.seen) {
		return
	}
	s.seen = c
	if err := s.load(c); err != nil {
		s.log.Error("TLS material changed on disk but does not load; keeping the material in use", "err", err)
	}
}

func sameContents(a, b map[string][]byte) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if !bytes.Equal(v, b[k]) {
			return false
		}
	}
	return true
}

// Watch checks the files every interval (DefaultPoll if not positive) and
// reloads them when their contents change, until ctx ends.
func (s *Store) Watch(ctx context.Context, every time.Duration) {
	if every <= 0 {
		every = DefaultPoll
	}
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			s.reloadIfChanged()
		}
	}
}

// Loads counts the successful loads, the first included.
func (s *Store) Loads() uint64 { return s.loads.Load() }

// ReadOnly reports whether a verified client certificate marks its holder
// read-only: ReadOnlyOU among its subject's organizational units, or its
// common name among ServerFiles.ReadOnlyCNs.
func (s *Store) ReadOnly(leaf *x509.Certificate) bool {
	return slices.Contains(leaf.Subject.OrganizationalUnit, ReadOnlyOU) || s.readOnly[leaf.Subject.CommonName]
}

// TCP is the tcp transport's TLS configuration, drawing on the material in
// use at each handshake. A server's transport listens for both roles and
// dials as a peer; a client's only dials, as a client. A server's needs
// both its client and its peer material (ServerFiles without
// PeerListener).
func (s *Store) TCP() *tcp.TLS {
	t := &tcp.TLS{
		Role:     s.role,
		Client:   func() (*tls.Config, error) { return s.cur.Load().dial, nil },
		ReadOnly: s.ReadOnly,
	}
	if s.role == transport.RolePeer {
		t.Server = func(role transport.Role) (*tls.Config, error) {
			m := s.cur.Load()
			if role == transport.RolePeer {
				return m.peer, nil
			}
			return m.client, nil
		}
		t.HandshakeError = s.handshakeFailed
	}
	return t
}

// ClientTCP is the TLS configuration of a server's client listener when
// it has a peer listener apart (ServerFiles.PeerListener): it serves
// clients only, and a peer's handshake on it fails. Nil without client
// TLS (--cert-file).
func (s *Store) ClientTCP() *tcp.TLS {
	if s.role != transport.RolePeer || s.cur.Load().client == nil {
		return nil
	}
	return &tcp.TLS{
		Role: transport.RoleClient,
		Server: func(role transport.Role) (*tls.Config, error) {
			if role != transport.RoleClient {
				return nil, errors.New("a peer's handshake on the client listener: peers dial the peer address (--listen-peer)")
			}
			return s.cur.Load().client, nil
		},
		ReadOnly:       s.ReadOnly,
		HandshakeError: s.handshakeFailed,
	}
}

// PeerTCP is the TLS configuration of a server's peer listener and peer
// dials when it has a peer listener apart (ServerFiles.PeerListener): a
// client's handshake on it fails. Nil without peer TLS
// (--peer-cert-file).
func (s *Store) PeerTCP() *tcp.TLS {
	if s.role != transport.RolePeer || s.cur.Load().peer == nil {
		return nil
	}
	return &tcp.TLS{
		Role:   transport.RolePeer,
		Client: func() (*tls.Config, error) { return s.cur.Load().dial, nil },
		Server: func(role transport.Role) (*tls.Config, error) {
			if role != transport.RolePeer {
				return nil, errors.New("a client's handshake on the peer listener: clients connect to the client address (--listen)")
			}
			return s.cur.Load().peer, nil
		},
		ReadOnly:       s.ReadOnly,
		HandshakeError: s.handshakeFailed,
	}
}

func (s *Store) handshakeFailed(remote string, err error) {
	s.log.Info("TLS handshake failed", "remote", remote, "err", err)
}

// ClientConfig is the client's TLS configuration as loaded now (for
// client.Config.TLS); nil for a server's Store.
func (s *Store) ClientConfig() *tls.Config {
	if s.role != transport.RoleClient {
		return nil
	}
	return s.cur.Load().dial
}
