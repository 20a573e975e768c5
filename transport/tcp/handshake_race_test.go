package tcp

import (
	"crypto/tls"
	"io"
	"net"
	"testing"
	"time"
)

// TestTLSHandshakeTimeoutRace: a TLS dialer that completes the TLS
// handshake and then sends no hello is dropped after HandshakeTimeout
// (review: the timeout's callback read the connection variable handshake
// had replaced with the TLS one, a data race that make test's -race run
// reports).
func TestTLSHandshakeTimeoutRace(t *testing.T) {
	p := newTestPKI(t)
	_, ln := listen(t, Config{HandshakeTimeout: 200 * time.Millisecond,
		TLS: listenTLS{serverCert: p.server, peerCert: p.peer}.config()})
	raw, err := net.Dial("tcp", ln.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	tc := tls.Client(raw, &tls.Config{RootCAs: p.clientCA.Pool(), ServerName: "127.0.0.1",
		NextProtos: []string{alpnClient}, MinVersion: tls.VersionTLS13})
	if err := tc.Handshake(); err != nil {
		t.Fatal(err)
	}
	// Say nothing; the listener's hello, then EOF after HandshakeTimeout.
	raw.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.Copy(io.Discard, tc); err != nil {
		t.Fatalf("silent TLS dialer: %v; want EOF", err)
	}
}
