//go:build rdma

package rdma

// Authentication on real queue pairs (Soft-RoCE in the test VM: step
// scripts/rdmavm/steps/22-rdma-auth.sh runs these by name). The handshake's
// logic is tested on the host too (auth_test.go).

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kvd-project/kvd/transport"
)

// refusalLog records a listener's refusals (Auth.Refused).
type refusalLog struct {
	mu   sync.Mutex
	errs []error
	note chan struct{}
}

func newRefusalLog() *refusalLog { return &refusalLog{note: make(chan struct{}, 1)} }

func (r *refusalLog) add(_ string, err error) {
	r.mu.Lock()
	r.errs = append(r.errs, err)
	r.mu.Unlock()
	select {
	case r.note <- struct{}{}:
	default:
	}
}

// wait returns the first refusal whose error contains want (or one of its
// |-separated alternatives), waiting up to 10s for it.
func (r *refusalLog) wait(t *testing.T, want string) error {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		r.mu.Lock()
		for _, err := range r.errs {
			for _, w := range strings.Split(want, "|") {
				if strings.Contains(err.Error(), w) {
					r.mu.Unlock()
					return err
				}
			}
		}
		got := append([]error(nil), r.errs...)
		r.mu.Unlock()
		select {
		case <-r.note:
		case <-deadline:
			t.Fatalf("no refusal saying %q; refusals: %v", want, got)
		}
	}
}

// authServer is a transport authenticating with testKeys, listening, with a
// 4 KiB region of pattern(4096, 3).
type authServer struct {
	tr      *Transport
	ln      transport.Listener
	region  transport.Region
	refused *refusalLog
}

func newAuthServer(t *testing.T, cfg Config) *authServer {
	t.Helper()
	s := &authServer{refused: newRefusalLog()}
	if cfg.Auth == nil {
		cfg.Auth = &Auth{Keys: testKeys(), Timeout: 3 * time.Second}
	}
	cfg.Auth.Refused = s.refused.add
	s.tr = newTransport(t, cfg)
	var err error
	if s.ln, err = s.tr.Listen(testAddr()); err != nil {
		t.Fatalf("Listen: %v", err)
	}
	t.Cleanup(func() { _ = s.ln.Close() })
	s.region = newRegion(t, s.tr, 4096)
	return s
}

// noAccept checks that the listener hands out no connection for a while.
func (s *authServer) noAccept(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	if c, err := s.ln.Accept(ctx); err == nil {
		c.Close()
		t.Fatalf("Accept returned a connection from %s, which did not authenticate", c.RemoteAddr())
	}
}

func clientWith(t *testing.T, keys ...Key) *Transport {
	t.Helper()
	cfg := Config{}
	if len(keys) > 0 {
		cfg.Auth = &Auth{Keys: keys}
	}
	return newTransport(t, cfg)
}

// rawClient dials without authenticating (what a client that skips the
// handshake, or an attacker, gets: a connected queue pair).
func rawClient(t *testing.T) *Transport {
	tr := newTransport(t, Config{})
	tr.auth.rawDial = true
	return tr
}

func dial(t *testing.T, tr *Transport, addr string) (transport.Conn, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c, err := tr.Dial(ctx, addr)
	if err == nil {
		t.Cleanup(func() { _ = c.Close() })
	}
	return c, err
}

func accept(t *testing.T, ln transport.Listener) transport.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c, err := ln.Accept(ctx)
	if err != nil {
		t.Fatalf("Accept: %v", err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func encodeDesc(d transport.Descriptor) []byte {
	b := le.AppendUint64(nil, d.Addr)
	b = le.AppendUint64(b, d.Len)
	return le.AppendUint32(b, d.Key)
}

func decodeDesc(b []byte) transport.Descriptor {
	return transport.Descriptor{Addr: le.Uint64(b), Len: le.Uint64(b[8:]), Key: le.Uint32(b[16:])}
}

// A client with the right key connects, learns the region (as kvd's hello
// hands it out) and reads it; the server can read the client's region too,
// and full-size messages pass both ways once authenticated.
func TestAuthConnectAndRead(t *testing.T) {
	srv := newAuthServer(t, Config{})
	alice := testKeys()[0]
	ct := clientWith(t, alice)
	c, err := dial(t, ct, srv.ln.Addr())
	if err != nil {
		t.Fatalf("Dial with the right key: %v", err)
	}
	s := accept(t, srv.ln)
	want := AuthIdentity{Name: "alice", Role: AuthRW}
	if id, ok := AuthIdentityOf(s); !ok || id != want {
		t.Fatalf("accepted identity %+v, %v; want %+v", id, ok, want)
	}
	if id, ok := AuthIdentityOf(c); !ok || id != want {
		t.Fatalf("dialed identity %+v, %v; want %+v", id, ok, want)
	}
	ctx := ctxT(t)
	if err := s.Send(ctx, encodeDesc(srv.region.Descriptor())); err != nil {
		t.Fatal(err)
	}
	b, err := c.Recv(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	dst := make([]byte, 4096)
	if err := c.Read(ctx, []transport.ReadOp{{Remote: decodeDesc(b), Dst: dst}}); err != nil {
		t.Fatalf("Read after authenticating: %v", err)
	}
	if !bytes.Equal(dst, srv.region.Bytes()) {
		t.Fatal("Read returned other bytes")
	}
	// The other way: the dialer granted READ too.
	cr := newRegion(t, ct, 512)
	if err := s.Read(ctx, []transport.ReadOp{{Remote: cr.Descriptor(), Dst: make([]byte, 512)}}); err != nil {
		t.Fatalf("server's Read of the client's region: %v", err)
	}
	big := pattern(1<<20, 5)
	for _, p := range [][2]transport.Conn{{c, s}, {s, c}} {
		if err := p[0].Send(ctx, big); err != nil {
			t.Fatal(err)
		}
		if got, err := p[1].Recv(ctx, nil); err != nil || !bytes.Equal(got, big) {
			t.Fatalf("1 MiB message after authenticating: %d bytes, %v", len(got), err)
		}
	}
	if st := srv.tr.AuthStats(); st.Accepted != 1 || st.Refused != 0 {
		t.Fatalf("AuthStats = %+v", st)
	}
}

// A wrong key, or a name the server does not know, is refused on both
// ends; the server never hands the connection out.
func TestAuthRefusesWrongKey(t *testing.T) {
	srv := newAuthServer(t, Config{})
	cases := []struct {
		key    Key
		reason string
	}{
		{Key{Name: "alice", Role: AuthRW, Secret: secret(7)}, `"alice" did not prove its key`},
		{Key{Name: "mallory", Role: AuthRW, Secret: secret(1)}, `unknown key name "mallory"`},
	}
	for _, tc := range cases {
		c, err := dial(t, clientWith(t, tc.key), srv.ln.Addr())
		if err == nil {
			c.Close()
			t.Fatalf("Dial as %s with a wrong key succeeded", tc.key.Name)
		}
		if !errors.Is(err, ErrAuth) || !errors.Is(err, transport.ErrAuthRefused) || !strings.Contains(err.Error(), "refused") {
			t.Fatalf("Dial as %s = %v; want ErrAuth and transport.ErrAuthRefused (not worth retrying)", tc.key.Name, err)
		}
		srv.refused.wait(t, tc.reason)
	}
	srv.noAccept(t)
	if st := srv.tr.AuthStats(); st.Accepted != 0 || st.Refused != 2 {
		t.Fatalf("AuthStats = %+v, want 2 refused", st)
	}
}

// A client without a key cannot connect to a server that authenticates,
// and a client with one will not talk to a server that does not.
func TestAuthRefusesNoKey(t *testing.T) {
	srv := newAuthServer(t, Config{})
	if c, err := dial(t, clientWith(t), srv.ln.Addr()); err == nil || !errors.Is(err, ErrAuth) || !errors.Is(err, transport.ErrAuthRefused) {
		if c != nil {
			c.Close()
		}
		t.Fatalf("Dial without a key = %v; want ErrAuth", err)
	}
	// (If the poller fails the connection before the connection manager
	// reports it established, the refusal says so instead.)
	srv.refused.wait(t, "no claim from the dialer|not authenticated within|failed before authenticating")
	srv.noAccept(t)

	plain := newTransport(t, Config{})
	ln, err := plain.Listen(testAddr())
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	if c, err := dial(t, clientWith(t, testKeys()[0]), ln.Addr()); err == nil || !strings.Contains(fmtErr(err), "does not authenticate") || !errors.Is(err, transport.ErrAuthRefused) {
		if c != nil {
			c.Close()
		}
		t.Fatalf("Dial of an unauthenticated server = %v; want a refusal", err)
	}
}

func fmtErr(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// A dialer that skips the handshake has a connected queue pair, and even
// knowing the region's descriptor it cannot READ through it: the server's
// queue pair has no remote access until the dialer authenticates. The
// server refuses it and never hands it out.
func TestAuthUnauthenticatedQPCannotRead(t *testing.T) {
	srv := newAuthServer(t, Config{})
	c, err := dial(t, rawClient(t), srv.ln.Addr())
	if err != nil {
		t.Fatalf("raw Dial: %v", err)
	}
	ctx := ctxT(t)
	err = c.Read(ctx, []transport.ReadOp{{Remote: srv.region.Descriptor(), Dst: make([]byte, 64)}})
	if !errors.Is(err, transport.ErrBadKey) {
		t.Fatalf("unauthenticated Read = %v; want it refused (ErrBadKey)", err)
	}
	// (If the poller fails the connection before the connection manager
	// reports it established, the refusal says so instead.)
	srv.refused.wait(t, "no claim from the dialer|not authenticated within|failed before authenticating")
	srv.noAccept(t)
}

// Before authenticating, a peer may send only small messages and has
// Auth.Timeout to finish; a listener holds at most Backlog such
// connections.
func TestAuthLimitsUnauthenticated(t *testing.T) {
	// The oversized message can fail the connection before or after the
	// connection manager reports it established (CI's faster machines saw
	// it fail first, and the refusal was then reported only at the
	// deadline, as a timeout); "poller first" drops the ESTABLISHED event
	// once the poller has failed the connection.
	for _, poller := range []bool{false, true} {
		name := "message size"
		if poller {
			name += ", poller first"
		}
		t.Run(name, func(t *testing.T) {
			srv := newAuthServer(t, Config{})
			if poller {
				drop := func(c *conn) bool {
					select {
					case <-c.closed:
						return true
					case <-time.After(10 * time.Second):
						return false
					}
				}
				srv.tr.auth.dropEstablished.Store(&drop)
			}
			c, err := dial(t, rawClient(t), srv.ln.Addr())
			if err != nil {
				t.Fatal(err)
			}
			if err := c.Send(ctxT(t), make([]byte, AuthMaxMessage+1)); err != nil {
				t.Fatal(err)
			}
			err = srv.refused.wait(t, "exceeds the limit of 256")
			if !errors.Is(err, transport.ErrProtocol) || !errors.Is(err, ErrAuth) {
				t.Fatalf("refusal %v; want ErrAuth and ErrProtocol", err)
			}
			if _, err := c.Recv(ctxT(t), nil); !errors.Is(err, transport.ErrClosed) {
				t.Fatalf("the refused dialer's Recv = %v; want ErrClosed", err)
			}
			srv.noAccept(t)
		})
	}
	// "poller before the watcher": the oversized message fails the
	// connection before the listener has started its event watcher (CI's
	// race build once saw teardown read the watcher's channel while the
	// listener wrote it). No watcher may start on a failed connection, and
	// teardown must finish.
	t.Run("poller before the watcher", func(t *testing.T) {
		srv := newAuthServer(t, Config{})
		failed := make(chan *conn, 1)
		hook := func(c *conn) {
			select {
			case <-c.closed:
			case <-time.After(10 * time.Second):
			}
			failed <- c
		}
		srv.tr.acceptHook.Store(&hook)
		c, err := dial(t, rawClient(t), srv.ln.Addr())
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Send(ctxT(t), make([]byte, AuthMaxMessage+1)); err != nil {
			t.Fatal(err)
		}
		srv.refused.wait(t, "exceeds the limit of 256")
		sc := <-failed
		select {
		case <-sc.done:
		case <-time.After(10 * time.Second):
			t.Fatal("teardown of the refused connection did not finish")
		}
		sc.mu.Lock()
		started := sc.watchDone != nil
		sc.mu.Unlock()
		if started {
			t.Fatal("an event watcher started on a connection that had already failed")
		}
		srv.noAccept(t)
	})
	t.Run("timeout", func(t *testing.T) {
		srv := newAuthServer(t, Config{Auth: &Auth{Keys: testKeys(), Timeout: 500 * time.Millisecond}})
		c, err := dial(t, rawClient(t), srv.ln.Addr())
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		srv.refused.wait(t, "not authenticated within 500ms")
		if _, err := c.Recv(ctxT(t), nil); !errors.Is(err, transport.ErrClosed) {
			t.Fatalf("the silent dialer's Recv = %v; want ErrClosed", err)
		}
		if d := time.Since(start); d > 5*time.Second {
			t.Fatalf("refused after %v", d)
		}
		srv.noAccept(t)
	})
	t.Run("pending", func(t *testing.T) {
		srv := newAuthServer(t, Config{Backlog: 2, Auth: &Auth{Keys: testKeys(), Timeout: time.Second}})
		raw := rawClient(t)
		for i := range 2 {
			if _, err := dial(t, raw, srv.ln.Addr()); err != nil {
				t.Fatalf("raw Dial %d: %v", i, err)
			}
		}
		if c, err := dial(t, raw, srv.ln.Addr()); err == nil {
			c.Close()
			t.Fatal("a third unauthenticated connection was taken with Backlog 2")
		}
		srv.refused.wait(t, "too many connections authenticating")
		// Once the silent ones time out, a client gets in.
		srv.refused.wait(t, "not authenticated within")
		time.Sleep(200 * time.Millisecond)
		if _, err := dial(t, clientWith(t, testKeys()[0]), srv.ln.Addr()); err != nil {
			t.Fatalf("Dial after the silent connections were dropped: %v", err)
		}
		accept(t, srv.ln)
	})
}

// The identity a connection proved is reported on both ends: read-only
// clients as ReadOnly, members as RolePeer, and only members as RolePeer.
func TestAuthIdentityRoles(t *testing.T) {
	srv := newAuthServer(t, Config{})
	cases := []struct {
		key  Key
		want transport.Identity
	}{
		{testKeys()[0], transport.Identity{Role: transport.RoleClient}},
		{testKeys()[1], transport.Identity{Role: transport.RoleClient, ReadOnly: true}},
		{testKeys()[2], transport.Identity{Role: transport.RolePeer}},
	}
	for _, tc := range cases {
		c, err := dial(t, clientWith(t, tc.key), srv.ln.Addr())
		if err != nil {
			t.Fatalf("Dial as %s: %v", tc.key.Name, err)
		}
		s := accept(t, srv.ln)
		got := transport.IdentityOf(s)
		if got.TLS || got.Role != tc.want.Role || got.ReadOnly != tc.want.ReadOnly {
			t.Errorf("%s: accepted Identity %+v, want %+v", tc.key.Name, got, tc.want)
		}
		if id, _ := AuthIdentityOf(s); id.Name != tc.key.Name || id.Role != tc.key.Role {
			t.Errorf("%s: accepted AuthIdentity %+v", tc.key.Name, id)
		}
		if (got.Role == transport.RolePeer) != (tc.key.Role == AuthPeer) {
			t.Errorf("%s (%v) reported as role %v", tc.key.Name, tc.key.Role, got.Role)
		}
		if dr := transport.IdentityOf(c).Role; dr != tc.want.Role {
			t.Errorf("%s: dialed end reports role %v, want %v", tc.key.Name, dr, tc.want.Role)
		}
	}
}

// A region's rkey is the device's, new at every registration: a transport
// made again (a restart) registers its region under a new key, and the old
// descriptor no longer reads anything.
func TestRegionKeyFreshAcrossRestart(t *testing.T) {
	var descs []transport.Descriptor
	for range 4 {
		tr := newTransport(t, Config{})
		r, err := tr.Register(64 << 10)
		if err != nil {
			t.Fatal(err)
		}
		descs = append(descs, r.Descriptor())
		tr.Close()
	}
	for i := range descs {
		for j := range i {
			if descs[i].Key == descs[j].Key {
				t.Fatalf("restarts %d and %d registered their regions under the same rkey %#x", j, i, descs[i].Key)
			}
		}
	}
	// A client that kept an old descriptor reads nothing from the new one.
	c, _, _, st := pair(t, Config{})
	r := newRegion(t, st, 64<<10)
	for _, d := range descs {
		if d.Key == r.Descriptor().Key {
			t.Fatalf("the live region reuses an old rkey %#x", d.Key)
		}
	}
	err := c.Read(ctxT(t), []transport.ReadOp{{Remote: descs[len(descs)-1], Dst: make([]byte, 8)}})
	if !errors.Is(err, transport.ErrBadKey) {
		t.Fatalf("Read with a descriptor from before the restart = %v; want ErrBadKey", err)
	}
}

// Regions are registered for remote READ only, and queue pairs grant READ
// only: an RDMA WRITE into a region fails whether or not the queue pair
// would allow it, and the region's bytes do not change.
func TestRegionRemoteReadOnly(t *testing.T) {
	for _, qpWrite := range []bool{false, true} {
		name := "queue pair grants READ"
		if qpWrite {
			name = "queue pair also grants WRITE"
		}
		t.Run(name, func(t *testing.T) {
			srv := newAuthServer(t, Config{})
			c, err := dial(t, clientWith(t, testKeys()[0]), srv.ln.Addr())
			if err != nil {
				t.Fatal(err)
			}
			s := accept(t, srv.ln).(*conn)
			if qpWrite { // only this test grants it: the region itself must refuse
				if err := s.qp.setAccess(accessRemoteRead | accessRemoteWrite); err != nil {
					t.Fatal(err)
				}
			}
			before := bytes.Clone(srv.region.Bytes())
			err = c.(*conn).writeProbe(ctxT(t), srv.region.Descriptor(), 64)
			if !errors.Is(err, transport.ErrBadKey) {
				t.Fatalf("RDMA WRITE into the region = %v; want it refused", err)
			}
			if !bytes.Equal(before, srv.region.Bytes()) {
				t.Fatal("a refused WRITE changed the region")
			}
		})
	}
}
