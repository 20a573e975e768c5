package tlsutil_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/kvd-project/kvd/internal/tlsutil"
	"github.com/kvd-project/kvd/internal/tlsutil/tlstest"
	"github.com/kvd-project/kvd/transport"
	"github.com/kvd-project/kvd/transport/tcp"
)

// TestServerFilesCheckPeerListener: with a peer listener, client TLS and
// peer TLS are each on or off, and each side's settings need that side's
// certificate.
func TestServerFilesCheckPeerListener(t *testing.T) {
	client := tlsutil.ServerFiles{CertFile: "c", KeyFile: "k", TrustedCAFile: "ca", ClientCertAuth: true, PeerListener: true}
	peer := tlsutil.ServerFiles{PeerCertFile: "pc", PeerKeyFile: "pk", PeerTrustedCAFile: "pca", PeerClientCertAuth: true, PeerListener: true}
	for _, tc := range []struct {
		name    string
		f       tlsutil.ServerFiles
		wantErr string
	}{
		{"clients only", client, ""},
		{"peers only", peer, ""},
		{"neither", tlsutil.ServerFiles{PeerListener: true}, ""},
		{"peer auth without a peer certificate", func() tlsutil.ServerFiles { f := client; f.PeerClientCertAuth = true; return f }(),
			"give --peer-cert-file"},
		{"client auth without a client certificate", func() tlsutil.ServerFiles { f := peer; f.ClientCertAuth = true; return f }(),
			"give --cert-file"},
		{"peer certificate without its CA", func() tlsutil.ServerFiles { f := peer; f.PeerTrustedCAFile, f.PeerClientCertAuth = "", false; return f }(),
			"--peer-trusted-ca-file"},
		{"clients only, one address", func() tlsutil.ServerFiles { f := client; f.PeerListener = false; return f }(),
			"--listen-peer"},
	} {
		err := tc.f.Check()
		if (err == nil) != (tc.wantErr == "") || (err != nil && !strings.Contains(err.Error(), tc.wantErr)) {
			t.Errorf("%s: Check() = %v; want an error containing %q", tc.name, err, tc.wantErr)
		}
	}
}

// TestSplitListenersTakeOneRole: with a peer listener, the client
// listener's TLS (ClientTCP) serves clients and fails a peer's handshake,
// and the peer listener's (PeerTCP) serves peers and fails a client's.
func TestSplitListenersTakeOneRole(t *testing.T) {
	p := newPKI(t)
	files := p.files
	files.PeerListener = true
	st, err := tlsutil.NewServer(files, nil)
	if err != nil {
		t.Fatal(err)
	}
	listen := func(cfg *tcp.TLS) transport.Listener {
		tr, err := tcp.New(tcp.Config{TLS: cfg})
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
	clientLn, peerLn := listen(st.ClientTCP()), listen(st.PeerTCP())
	// peerDial dials as a peer, trusting roots and showing cf's
	// certificate (the node's own peer material if cf is empty).
	peerDial := func(ln transport.Listener, cf tlsutil.ClientFiles) error {
		cfg := st.PeerTCP()
		if cf.CACert != "" {
			cs, err := tlsutil.NewClient(cf)
			if err != nil {
				t.Fatal(err)
			}
			cfg.Client = cs.TCP().Client
		}
		tr, err := tcp.New(tcp.Config{TLS: cfg})
		if err != nil {
			t.Fatal(err)
		}
		defer tr.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		c, err := tr.Dial(ctx, ln.Addr())
		if err == nil {
			c.Close()
		}
		return err
	}
	alice := p.clientFiles(t, p.clientCA, "alice", tlstest.Options{})
	if c, _, err := dial(t, clientLn, alice); err != nil {
		t.Errorf("a client on the client listener: %v", err)
	} else {
		c.Close()
	}
	if err := peerDial(peerLn, tlsutil.ClientFiles{}); err != nil {
		t.Errorf("a peer on the peer listener: %v", err)
	}
	// Credentials each listener would take for the other role: only the
	// role keeps them out.
	if err := peerDial(clientLn, alice); err == nil {
		t.Error("a peer's handshake on the client listener succeeded")
	}
	bob := p.clientFiles(t, p.peerCA, "bob", tlstest.Options{})
	bob.CACert = p.files.PeerTrustedCAFile
	if c, _, err := dial(t, peerLn, bob); err == nil {
		c.Close()
		t.Error("a client's handshake on the peer listener succeeded")
	}
	one := p.files // without a peer listener, one configuration for both
	if st, err := tlsutil.NewServer(one, nil); err != nil || st.TCP() == nil {
		t.Fatalf("NewServer without a peer listener: %v", err)
	}
	files.CertFile, files.KeyFile, files.TrustedCAFile, files.ClientCertAuth = "", "", "", false
	if st, err := tlsutil.NewServer(files, nil); err != nil || st.ClientTCP() != nil || st.PeerTCP() == nil {
		t.Errorf("peer TLS only: %v; want no client TLS and peer TLS", err)
	}
}
