package tlsutil_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kvd-project/kvd/internal/kvdtest/wait"
	"github.com/kvd-project/kvd/internal/tlsutil"
	"github.com/kvd-project/kvd/internal/tlsutil/tlstest"
	"github.com/kvd-project/kvd/transport"
	"github.com/kvd-project/kvd/transport/tcp"
)

// pki is a client CA and a peer CA with certificates, written to dir.
type pki struct {
	dir              string
	clientCA, peerCA *tlstest.CA
	files            tlsutil.ServerFiles
	roots            string // what clients verify the server with: the client CA, in a file of its own
}

func newPKI(t *testing.T) *pki {
	p := &pki{dir: t.TempDir(), clientCA: tlstest.NewCA(t, "client CA"), peerCA: tlstest.NewCA(t, "peer CA")}
	f := &p.files
	f.CertFile, f.KeyFile = p.clientCA.Issue(t, "server-1", tlstest.Options{}).Write(t, p.dir, "server")
	f.PeerCertFile, f.PeerKeyFile = p.peerCA.Issue(t, "peer-1", tlstest.Options{}).Write(t, p.dir, "peer")
	f.TrustedCAFile = p.clientCA.Write(t, p.dir, "client-ca.crt")
	f.PeerTrustedCAFile = p.peerCA.Write(t, p.dir, "peer-ca.crt")
	f.ClientCertAuth, f.PeerClientCertAuth = true, true
	p.roots = p.clientCA.Write(t, p.dir, "roots.crt")
	return p
}

// clientFiles writes a client certificate the CA issues for cn.
func (p *pki) clientFiles(t *testing.T, ca *tlstest.CA, cn string, o tlstest.Options) tlsutil.ClientFiles {
	cert, key := ca.Issue(t, cn, o).Write(t, p.dir, "client-"+cn)
	return tlsutil.ClientFiles{CACert: p.roots, Cert: cert, Key: key}
}

// logBuf collects a Store's logs.
type logBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuf) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuf) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func (l *logBuf) logger() *slog.Logger { return slog.New(slog.NewTextHandler(l, nil)) }

func TestServerFilesCheck(t *testing.T) {
	full := tlsutil.ServerFiles{CertFile: "c", KeyFile: "k", PeerCertFile: "pc", PeerKeyFile: "pk",
		PeerTrustedCAFile: "pca", TrustedCAFile: "ca", ClientCertAuth: true, PeerClientCertAuth: true}
	tests := []struct {
		name    string
		edit    func(*tlsutil.ServerFiles)
		wantErr string
	}{
		{"all set", func(*tlsutil.ServerFiles) {}, ""},
		{"none set", func(f *tlsutil.ServerFiles) { *f = tlsutil.ServerFiles{} }, ""},
		{"server auth only, no client-cert auth", func(f *tlsutil.ServerFiles) {
			f.TrustedCAFile, f.ClientCertAuth, f.PeerClientCertAuth = "", false, false
		}, ""},
		{"auth without certificates", func(f *tlsutil.ServerFiles) { *f = tlsutil.ServerFiles{ClientCertAuth: true} },
			"without certificates"},
		{"cert without key", func(f *tlsutil.ServerFiles) { f.KeyFile = "" }, "--cert-file and --key-file"},
		{"peer key without cert", func(f *tlsutil.ServerFiles) { f.PeerCertFile = "" }, "--peer-cert-file and --peer-key-file"},
		{"clients only", func(f *tlsutil.ServerFiles) { f.PeerCertFile, f.PeerKeyFile = "", "" }, "one address"},
		{"peers only", func(f *tlsutil.ServerFiles) { f.CertFile, f.KeyFile = "", "" }, "one address"},
		{"no peer CA", func(f *tlsutil.ServerFiles) { f.PeerTrustedCAFile, f.PeerClientCertAuth = "", false }, "--peer-trusted-ca-file"},
		{"client-cert auth without CA", func(f *tlsutil.ServerFiles) { f.TrustedCAFile = "" }, "--client-cert-auth needs"},
		{"CA without client-cert auth", func(f *tlsutil.ServerFiles) { f.ClientCertAuth = false }, "only with --client-cert-auth"},
		{"read-only CNs without client-cert auth", func(f *tlsutil.ServerFiles) {
			f.ClientCertAuth, f.TrustedCAFile, f.ReadOnlyCNs = false, "", []string{"x"}
		}, "--read-only-client-cn needs"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := full
			tt.edit(&f)
			err := f.Check()
			if (err == nil) != (tt.wantErr == "") || (err != nil && !strings.Contains(err.Error(), tt.wantErr)) {
				t.Errorf("Check() = %v; want an error containing %q", err, tt.wantErr)
			}
		})
	}
	if err := (tlsutil.ClientFiles{Cert: "c"}).Check(); err == nil {
		t.Error("ClientFiles with --cert and no --key passed Check")
	}
}

// TestNewServerRefusesBadMaterial: kvd refuses to start with material that
// does not load, and the error names the flag and the file.
func TestNewServerRefusesBadMaterial(t *testing.T) {
	p := newPKI(t)
	other := tlstest.NewCA(t, "other")
	_, wrongKey := other.Issue(t, "x", tlstest.Options{}).Write(t, p.dir, "wrong")
	expiredCert, expiredKey := p.clientCA.Issue(t, "old", tlstest.Options{
		NotBefore: time.Now().Add(-48 * time.Hour), NotAfter: time.Now().Add(-time.Hour)}).Write(t, p.dir, "expired")
	garbage := filepath.Join(p.dir, "garbage.pem")
	if err := os.WriteFile(garbage, []byte("not a certificate"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		edit    func(*tlsutil.ServerFiles)
		wantErr string
	}{
		{"missing certificate", func(f *tlsutil.ServerFiles) { f.CertFile = filepath.Join(p.dir, "nope.crt") },
			"--cert-file: open " + filepath.Join(p.dir, "nope.crt") + ": no such file"},
		{"key of another certificate", func(f *tlsutil.ServerFiles) { f.PeerKeyFile = wrongKey },
			"--peer-cert-file " + p.files.PeerCertFile + ", --peer-key-file " + wrongKey + ": tls: private key does not match"},
		{"garbage certificate", func(f *tlsutil.ServerFiles) { f.CertFile = garbage }, "--cert-file " + garbage},
		{"expired certificate", func(f *tlsutil.ServerFiles) { f.CertFile, f.KeyFile = expiredCert, expiredKey },
			`--cert-file ` + expiredCert + `: certificate "old" expired at`},
		{"CA file with no certificate", func(f *tlsutil.ServerFiles) { f.TrustedCAFile = garbage },
			"--trusted-ca-file " + garbage + ": no PEM certificate"},
		{"peer CA file with no certificate", func(f *tlsutil.ServerFiles) { f.PeerTrustedCAFile = garbage },
			"--peer-trusted-ca-file " + garbage + ": no PEM certificate"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := p.files
			tt.edit(&f)
			if _, err := tlsutil.NewServer(f, nil); err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("NewServer: %v; want an error containing %q", err, tt.wantErr)
			}
		})
	}
	if _, err := tlsutil.NewServer(p.files, nil); err != nil {
		t.Fatalf("NewServer with good files: %v", err)
	}
	if _, err := tlsutil.NewClient(tlsutil.ClientFiles{CACert: garbage}); err == nil || !strings.Contains(err.Error(), "--cacert") {
		t.Errorf("NewClient with a bad --cacert: %v", err)
	}
}

// serve starts a transport with the store's TLS, listening on loopback.
func serve(t *testing.T, st *tlsutil.Store) transport.Listener {
	tr, err := tcp.New(tcp.Config{TLS: st.TCP()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tr.Close() })
	ln, err := tr.Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return ln
}

// dial connects with a client store's TLS and returns both ends' identities
// (the dialed end's first: it names the server's certificate).
func dial(t *testing.T, ln transport.Listener, cf tlsutil.ClientFiles) (transport.Conn, transport.Identity, error) {
	t.Helper()
	cs, err := tlsutil.NewClient(cf)
	if err != nil {
		t.Fatal(err)
	}
	tr, err := tcp.New(tcp.Config{TLS: cs.TCP()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tr.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c, err := tr.Dial(ctx, ln.Addr())
	if err != nil {
		return nil, transport.Identity{}, err
	}
	s, err := ln.Accept(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return c, transport.IdentityOf(s), nil
}

// TestReload rotates the files under a running listener: new connections
// use the new material, established ones keep working, and material that
// does not load is refused while the old one stays in use.
func TestReload(t *testing.T) {
	p := newPKI(t)
	logs := &logBuf{}
	st, err := tlsutil.NewServer(p.files, logs.logger())
	if err != nil {
		t.Fatal(err)
	}
	ln := serve(t, st)
	alice := p.clientFiles(t, p.clientCA, "alice", tlstest.Options{})
	sees := func(cf tlsutil.ClientFiles) string {
		t.Helper()
		c, _, err := dial(t, ln, cf)
		if err != nil {
			t.Fatalf("dial: %v", err)
		}
		return transport.IdentityOf(c).Name()
	}
	old, _, err := dial(t, ln, alice)
	if err != nil || transport.IdentityOf(old).Name() != "server-1" {
		t.Fatalf("first dial: %v", err)
	}

	// SIGHUP's path: Reload.
	p.clientCA.Issue(t, "server-2", tlstest.Options{}).Write(t, p.dir, "server")
	if got := sees(alice); got != "server-1" {
		t.Fatalf("before Reload the server shows %q; want server-1", got)
	}
	if err := st.Reload(); err != nil {
		t.Fatal(err)
	}
	if got := sees(alice); got != "server-2" {
		t.Fatalf("after Reload the server shows %q; want server-2", got)
	}

	// The poll's path: Watch sees the contents change.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go st.Watch(ctx, 10*time.Millisecond)
	waitLoads := func(n uint64) {
		t.Helper()
		wait.NoError(t, "Watch to reload", func() error {
			if l := st.Loads(); l < n {
				return fmt.Errorf("loads %d, want %d; logs:\n%s", l, n, logs)
			}
			return nil
		})
	}
	p.clientCA.Issue(t, "server-3", tlstest.Options{}).Write(t, p.dir, "server")
	waitLoads(3)
	if got := sees(alice); got != "server-3" {
		t.Fatalf("after the poll the server shows %q; want server-3", got)
	}

	// Half a rotation (a new certificate, the old key) does not load: the
	// material in use stays, and the failure is logged.
	next := p.clientCA.Issue(t, "server-4", tlstest.Options{})
	certFile, keyFile := p.files.CertFile, p.files.KeyFile
	mark := len(logs.String())
	writeAtomic(t, certFile, next.CertPEM)
	wait.NoError(t, "a failed reload to be logged", func() error {
		if l := logs.String(); !strings.Contains(l[mark:], "does not load") {
			return fmt.Errorf("logs:\n%s", l)
		}
		return nil
	})
	if err := st.Reload(); err == nil || !strings.Contains(err.Error(), "private key does not match") {
		t.Fatalf("Reload of a mismatched pair: %v", err)
	}
	if got := sees(alice); got != "server-3" {
		t.Fatalf("after a failed reload the server shows %q; want server-3 still", got)
	}
	writeAtomic(t, keyFile, next.KeyPEM) // the rotation completes
	waitLoads(4)
	if got := sees(alice); got != "server-4" {
		t.Fatalf("after the rotation completed the server shows %q; want server-4", got)
	}

	// A new client CA: its certificates get in, the old CA's no longer do.
	newCA := tlstest.NewCA(t, "client CA 2")
	bob := p.clientFiles(t, newCA, "bob", tlstest.Options{})
	if _, _, err := dial(t, ln, bob); err == nil {
		t.Fatal("a certificate of a CA not yet trusted got in")
	}
	newCA.Write(t, p.dir, "client-ca.crt")
	waitLoads(5)
	if _, id, err := dial(t, ln, bob); err != nil || id.Name() != "bob" {
		t.Fatalf("after the CA rotation, bob: %v (%q)", err, id.Name())
	}
	if _, _, err := dial(t, ln, alice); err == nil {
		t.Fatal("after the CA rotation, a certificate of the old CA still got in")
	}

	// The connection made before all this still works.
	ctx2, cancel2 := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel2()
	if err := old.Send(ctx2, []byte("still here")); err != nil {
		t.Fatalf("the first connection after the rotations: %v", err)
	}
}

func writeAtomic(t *testing.T, path string, b []byte) {
	t.Helper()
	if err := os.WriteFile(path+".tmp", b, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(path+".tmp", path); err != nil {
		t.Fatal(err)
	}
}

func TestReadOnlyCertificates(t *testing.T) {
	p := newPKI(t)
	p.files.ReadOnlyCNs = []string{"carol"}
	st, err := tlsutil.NewServer(p.files, nil)
	if err != nil {
		t.Fatal(err)
	}
	ln := serve(t, st)
	for _, tt := range []struct {
		cn       string
		ou       []string
		readOnly bool
	}{
		{"alice", nil, false},
		{"alice-ro", []string{tlsutil.ReadOnlyOU}, true},
		{"alice-other-ou", []string{"ops"}, false},
		{"carol", nil, true}, // --read-only-client-cn
	} {
		_, id, err := dial(t, ln, p.clientFiles(t, p.clientCA, tt.cn, tlstest.Options{OU: tt.ou}))
		if err != nil {
			t.Fatalf("%s: %v", tt.cn, err)
		}
		if id.Name() != tt.cn || id.ReadOnly != tt.readOnly || id.Role != transport.RoleClient {
			t.Errorf("%s: identity %q read-only %v role %v; want read-only %v, client", tt.cn, id.Name(), id.ReadOnly, id.Role, tt.readOnly)
		}
	}
}

// TestPeerAuthentication: with --peer-client-cert-auth only certificates of
// the peer CA get in as peers; the server's own transport dials as a peer
// with its peer certificate.
func TestPeerAuthentication(t *testing.T) {
	p := newPKI(t)
	st, err := tlsutil.NewServer(p.files, nil)
	if err != nil {
		t.Fatal(err)
	}
	ln := serve(t, st)
	peerDial := func(cert *tlstest.Leaf) (transport.Identity, error) {
		t.Helper()
		cfg := st.TCP()
		if cert != nil {
			cf := tlsutil.ClientFiles{CACert: p.files.PeerTrustedCAFile}
			cf.Cert, cf.Key = cert.Write(t, p.dir, "dialer")
			cs, err := tlsutil.NewClient(cf)
			if err != nil {
				t.Fatal(err)
			}
			cfg.Client = cs.TCP().Client // a peer's role, another certificate
		}
		tr, err := tcp.New(tcp.Config{TLS: cfg})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { tr.Close() })
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		if _, err := tr.Dial(ctx, ln.Addr()); err != nil {
			return transport.Identity{}, err
		}
		s, err := ln.Accept(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return transport.IdentityOf(s), nil
	}
	if id, err := peerDial(nil); err != nil || id.Role != transport.RolePeer || id.Name() != "peer-1" || !id.PeerAllowed() || id.ClientAllowed() {
		t.Fatalf("a member's own dial: %v, %+v", err, id)
	}
	if _, err := peerDial(p.clientCA.Issue(t, "alice", tlstest.Options{})); err == nil {
		t.Fatal("a client CA's certificate got in as a peer")
	}
	if _, err := peerDial(tlstest.NewCA(t, "stranger").Issue(t, "peer-x", tlstest.Options{})); err == nil {
		t.Fatal("a stranger's certificate got in as a peer")
	}
	noCert := st.TCP()
	anon, err := tlsutil.NewClient(tlsutil.ClientFiles{CACert: p.files.PeerTrustedCAFile})
	if err != nil {
		t.Fatal(err)
	}
	noCert.Client = anon.TCP().Client
	tr, err := tcp.New(tcp.Config{TLS: noCert})
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := tr.Dial(ctx, ln.Addr()); err == nil || !strings.Contains(err.Error(), "certificate required") {
		t.Fatalf("a peer without a certificate: %v; want certificate required", err)
	}
}
