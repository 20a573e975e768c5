package rdma

// Host tests of authentication: the key file, the handshake's messages and
// both halves of the handshake over an in-memory connection (no build tag:
// they need no RDMA device and run in every build). `go test -fuzz FuzzX
// ./transport/rdma` fuzzes one. auth_rdma_test.go runs the handshake on
// real queue pairs.

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kvd-project/kvd/transport"
)

func secret(b byte) []byte { return bytes.Repeat([]byte{b}, 32) }

func testKeys() []Key {
	return []Key{
		{Name: "alice", Role: AuthRW, Secret: secret(1)},
		{Name: "bob", Role: AuthRO, Secret: secret(2)},
		{Name: "node-1", Role: AuthPeer, Secret: secret(3)},
	}
}

func mustKeyring(t testing.TB, keys []Key, self string) *keyring {
	t.Helper()
	kr, err := (&Auth{Keys: keys, Name: self}).load()
	if err != nil {
		t.Fatalf("load: %v", err)
	}
	return kr
}

const goodFile = `# kvd RDMA keys
alice:rw:0101010101010101010101010101010101010101010101010101010101010101

  bob:ro:02020202020202020202020202020202
node-1:peer:0303030303030303030303030303030303030303030303030303030303030303
`

func TestParseKeys(t *testing.T) {
	keys, err := ParseKeys(strings.NewReader(goodFile))
	if err != nil {
		t.Fatalf("ParseKeys: %v", err)
	}
	want := []Key{{"alice", AuthRW, secret(1)}, {"bob", AuthRO, bytes.Repeat([]byte{2}, 16)}, {"node-1", AuthPeer, secret(3)}}
	if len(keys) != len(want) {
		t.Fatalf("got %d keys, want %d", len(keys), len(want))
	}
	for i := range want {
		if keys[i].Name != want[i].Name || keys[i].Role != want[i].Role || !bytes.Equal(keys[i].Secret, want[i].Secret) {
			t.Errorf("key %d = %+v, want %+v", i, keys[i], want[i])
		}
	}
	hex32 := strings.Repeat("ab", 32)
	bad := map[string]string{
		"empty":         "",
		"only comments": "# nothing\n\n",
		"two fields":    "alice:rw\n",
		"four fields":   "alice:rw:" + hex32 + ":x\n",
		"bad role":      "alice:admin:" + hex32 + "\n",
		"not hex":       "alice:rw:" + strings.Repeat("zz", 32) + "\n",
		"short key":     "alice:rw:" + strings.Repeat("ab", MinKeyBytes-1) + "\n",
		"long key":      "alice:rw:" + strings.Repeat("ab", MaxKeyBytes+1) + "\n",
		"empty name":    ":rw:" + hex32 + "\n",
		"bad name":      "al ice:rw:" + hex32 + "\n",
		"long name":     strings.Repeat("a", MaxNameBytes+1) + ":rw:" + hex32 + "\n",
		"duplicate":     "alice:rw:" + hex32 + "\nalice:ro:" + hex32 + "\n",
		// Cut at the limit, the last line loaded a prefix of its key.
		// (49 bytes of it within MaxKeyFileBytes+1: alice, rw and a 20-byte
		// key, which is valid.)
		"too long": strings.Repeat("#\n", (MaxKeyFileBytes+1-49)/2) + "alice:rw:" + strings.Repeat("ab", 64) + "\n",
	}
	for name, in := range bad {
		if keys, err := ParseKeys(strings.NewReader(in)); err == nil {
			t.Errorf("%s: ParseKeys = %v, want an error", name, keys)
		}
	}
}

func writeKeyFile(t *testing.T, contents string, mode os.FileMode) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "keys")
	if err := os.WriteFile(p, []byte(contents), mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(p, mode); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestReadKeyFile(t *testing.T) {
	if keys, err := ReadKeyFile(writeKeyFile(t, goodFile, 0o600)); err != nil || len(keys) != 3 {
		t.Fatalf("ReadKeyFile(0600) = %d keys, %v", len(keys), err)
	}
	for _, mode := range []os.FileMode{0o644, 0o640, 0o604, 0o660} {
		if _, err := ReadKeyFile(writeKeyFile(t, goodFile, mode)); err == nil || !strings.Contains(err.Error(), "chmod 600") {
			t.Errorf("ReadKeyFile(%v) = %v, want a refusal", mode, err)
		}
	}
	if _, err := ReadKeyFile(filepath.Join(t.TempDir(), "missing")); err == nil {
		t.Error("ReadKeyFile of a missing file succeeded")
	}
}

func TestAuthConfig(t *testing.T) {
	file := writeKeyFile(t, goodFile, 0o600)
	one := []Key{{Name: "solo", Role: AuthRW, Secret: secret(9)}}
	ok := []struct {
		name string
		a    Auth
		self string
	}{
		{"file, named", Auth{File: file, Name: "bob"}, "bob"},
		{"file, several, unnamed: cannot dial", Auth{File: file}, ""},
		{"one key is the default", Auth{Keys: one}, "solo"},
		{"timeout", Auth{Keys: one, Timeout: time.Minute}, "solo"},
	}
	for _, tc := range ok {
		kr, err := tc.a.load()
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		if got := ""; kr.self != nil {
			got = kr.self.Name
			if got != tc.self {
				t.Errorf("%s: self %q, want %q", tc.name, got, tc.self)
			}
		} else if tc.self != "" {
			t.Errorf("%s: no self, want %q", tc.name, tc.self)
		}
		if err := (Config{Auth: &tc.a}).Validate(); err != nil {
			t.Errorf("%s: Validate: %v", tc.name, err)
		}
	}
	bad := map[string]Auth{
		"nothing":          {},
		"file and keys":    {File: file, Keys: one},
		"unknown name":     {File: file, Name: "carol"},
		"missing file":     {File: file + ".missing"},
		"short secret":     {Keys: []Key{{Name: "a", Role: AuthRW, Secret: make([]byte, MinKeyBytes-1)}}},
		"bad role":         {Keys: []Key{{Name: "a", Role: 0, Secret: secret(1)}}},
		"bad name":         {Keys: []Key{{Name: "a:b", Role: AuthRW, Secret: secret(1)}}},
		"duplicate":        {Keys: []Key{one[0], one[0]}},
		"negative timeout": {Keys: one, Timeout: -1},
		"huge timeout":     {Keys: one, Timeout: time.Hour},
	}
	for name, a := range bad {
		if err := (Config{Auth: &a}).Validate(); !errors.Is(err, ErrConfig) {
			t.Errorf("%s: Validate = %v, want ErrConfig", name, err)
		}
	}
	// The keyring is a copy: the caller's slices may change afterwards.
	keys := testKeys()
	kr := mustKeyring(t, keys, "alice")
	keys[0].Secret[0] ^= 1
	if !bytes.Equal(kr.keys["alice"].Secret, secret(1)) || !bytes.Equal(kr.self.Secret, secret(1)) {
		t.Error("the keyring shares the caller's secret")
	}
}

func TestAuthIdentityTransport(t *testing.T) {
	cases := []struct {
		id   AuthIdentity
		want transport.Identity
	}{
		{AuthIdentity{}, transport.Identity{}},
		{AuthIdentity{"alice", AuthRW}, transport.Identity{Role: transport.RoleClient}},
		{AuthIdentity{"bob", AuthRO}, transport.Identity{Role: transport.RoleClient, ReadOnly: true}},
		{AuthIdentity{"node-1", AuthPeer}, transport.Identity{Role: transport.RolePeer}},
	}
	for _, tc := range cases {
		got := tc.id.Transport()
		if got.TLS || got.Role != tc.want.Role || got.ReadOnly != tc.want.ReadOnly || got.Certificates != nil {
			t.Errorf("%+v.Transport() = %+v, want %+v", tc.id, got, tc.want)
		}
	}
	for _, s := range []string{"rw", "ro", "peer"} {
		if r, err := ParseAuthRole(s); err != nil || r.String() != s {
			t.Errorf("ParseAuthRole(%q) = %v, %v", s, r, err)
		}
	}
}

func TestOffer(t *testing.T) {
	var n nonce
	_, _ = rand.Read(n[:])
	pd := appendOffer(validHello().encode(), &n)
	if len(pd) > 64 {
		t.Fatalf("hello and offer take %d bytes; the shim copies 64", len(pd))
	}
	// The connection manager pads private data.
	got, ok := parseOffer(append(pd, make([]byte, 100)...))
	if !ok || got != n {
		t.Fatalf("parseOffer = %x, %v; want %x", got, ok, n)
	}
	if _, err := parseHello(pd); err != nil {
		t.Fatalf("the hello does not parse with an offer after it: %v", err)
	}
	for name, b := range map[string][]byte{
		"no offer":  validHello().encode(),
		"padding":   append(validHello().encode(), make([]byte, 172)...),
		"short":     pd[:len(pd)-1],
		"bad magic": append(append(validHello().encode(), "KVA2"...), n[:]...),
	} {
		if _, ok := parseOffer(b); ok {
			t.Errorf("%s: parseOffer found an offer", name)
		}
	}
}

func sampleMsgs() []authMsg {
	var n nonce
	var m [macSize]byte
	for i := range n {
		n[i], m[i] = byte(i), byte(255-i)
	}
	return []authMsg{
		{tag: tagClaim, name: "alice", nonce: n, mac: m},
		{tag: tagClaim, name: strings.Repeat("x", MaxNameBytes), nonce: n, mac: m},
		{tag: tagProof, role: AuthRW, mac: m},
		{tag: tagProof, role: AuthPeer, mac: m},
		{tag: tagRefused, reason: reasonRefused},
		{tag: tagReady},
	}
}

func TestAuthMsgRoundTrip(t *testing.T) {
	for _, m := range sampleMsgs() {
		b := m.encode()
		if len(b) > AuthMaxMessage {
			t.Errorf("%s message of %d bytes exceeds AuthMaxMessage", m.tag, len(b))
		}
		got, err := decodeAuthMsg(b)
		if err != nil || got != m {
			t.Errorf("decode(encode(%+v)) = %+v, %v", m, got, err)
		}
	}
}

func TestDecodeAuthMsgRejects(t *testing.T) {
	claim := sampleMsgs()[0].encode()
	proof := sampleMsgs()[2].encode()
	mod := func(b []byte, f func(b []byte) []byte) []byte { return f(bytes.Clone(b)) }
	cases := map[string][]byte{
		"empty":             nil,
		"short":             []byte("KVA"),
		"unknown tag":       []byte("KVAX"),
		"claim short":       claim[:4+nonceSize+macSize],
		"claim long name":   mod(claim, func(b []byte) []byte { b[4+nonceSize+macSize]++; return b }),
		"claim short name":  mod(claim, func(b []byte) []byte { b[4+nonceSize+macSize]--; return b }),
		"claim empty name":  claim[:4+nonceSize+macSize+1],
		"claim bad name":    mod(claim, func(b []byte) []byte { b[len(b)-1] = ':'; return b }),
		"claim extra byte":  append(bytes.Clone(claim), 'x'),
		"proof role 0":      mod(proof, func(b []byte) []byte { b[4] = 0; return b }),
		"proof role 4":      mod(proof, func(b []byte) []byte { b[4] = 4; return b }),
		"proof short":       proof[:len(proof)-1],
		"proof long":        append(bytes.Clone(proof), 0),
		"refusal no reason": []byte(tagRefused),
		"ready with body":   []byte(tagReady + "x"),
	}
	for name, b := range cases {
		if m, err := decodeAuthMsg(b); !errors.Is(err, transport.ErrProtocol) {
			t.Errorf("%s: decode = %+v, %v; want ErrProtocol", name, m, err)
		}
	}
}

// FuzzDecodeAuthMsg: decoding never panics, and what decodes re-encodes to
// the same bytes (one encoding per message).
func FuzzDecodeAuthMsg(f *testing.F) {
	for _, m := range sampleMsgs() {
		f.Add(m.encode())
	}
	f.Add([]byte("KVAC"))
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := decodeAuthMsg(b)
		if err != nil {
			return
		}
		if got := m.encode(); !bytes.Equal(got, b) {
			t.Fatalf("decode(%x) = %+v re-encodes as %x", b, m, got)
		}
	})
}

// pipe is one end of an in-memory message connection.
type pipe struct {
	in, out chan []byte
	name    string
	log     *eventLog
}

type eventLog struct {
	mu sync.Mutex
	ev []string
}

func (l *eventLog) add(s string) {
	l.mu.Lock()
	l.ev = append(l.ev, s)
	l.mu.Unlock()
}

func (l *eventLog) events() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.ev...)
}

func pipes(log *eventLog) (d, a *pipe) {
	x, y := make(chan []byte, 8), make(chan []byte, 8)
	return &pipe{in: x, out: y, name: "dialer", log: log}, &pipe{in: y, out: x, name: "acceptor", log: log}
}

func (p *pipe) Send(ctx context.Context, msg []byte) error {
	p.log.add(p.name + " sends " + string(msg[:min(4, len(msg))]))
	select {
	case p.out <- bytes.Clone(msg):
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (p *pipe) Recv(ctx context.Context, buf []byte) ([]byte, error) {
	select {
	case m, ok := <-p.in:
		if !ok {
			return nil, transport.ErrClosed
		}
		p.log.add(p.name + " receives " + string(m[:min(4, len(m))]))
		return append(buf[:0], m...), nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func testView() authView {
	return authView{dialer: "10.0.0.2:40000", acceptor: "10.0.0.1:7301", dialerQPN: 17, acceptorQPN: 18}
}

type handshake struct {
	dialID, accID   AuthIdentity
	dialErr, accErr error
	log             []string
}

func (h handshake) granted(who string) bool {
	for _, e := range h.log {
		if e == who+" grants" {
			return true
		}
	}
	return false
}

// shake runs both halves against each other: the dialer proves self (with
// dialView), the acceptor checks against kr (with accView).
func shake(t *testing.T, kr *keyring, self Key, dialView, accView authView) handshake {
	t.Helper()
	log := &eventLog{}
	d, a := pipes(log)
	var ns nonce
	_, _ = rand.Read(ns[:])
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var h handshake
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		h.accID, h.accErr = acceptAuth(ctx, a, kr, &ns, accView, func() error { log.add("acceptor grants"); return nil })
		if h.accErr != nil {
			close(a.out) // the listener closes a refused connection
		}
	}()
	h.dialID, h.dialErr = dialAuth(ctx, d, &self, &ns, dialView, rand.Reader, func() error { log.add("dialer grants"); return nil })
	if h.dialErr != nil {
		close(d.out)
	}
	wg.Wait()
	h.log = log.events()
	return h
}

func TestHandshake(t *testing.T) {
	kr := mustKeyring(t, testKeys(), "")
	for _, k := range testKeys() {
		t.Run(k.Name, func(t *testing.T) {
			h := shake(t, kr, k, testView(), testView())
			want := AuthIdentity{Name: k.Name, Role: k.Role}
			if h.dialErr != nil || h.accErr != nil || h.dialID != want || h.accID != want {
				t.Fatalf("dialer %+v, %v; acceptor %+v, %v; want %+v", h.dialID, h.dialErr, h.accID, h.accErr, want)
			}
			// Each end grants READ only after the other proved itself, and
			// before it sends what lets the other hand the connection out:
			// the acceptor before its proof, the dialer before ready.
			want2 := []string{
				"dialer sends KVAC", "acceptor receives KVAC", "acceptor grants", "acceptor sends KVAP",
				"dialer receives KVAP", "dialer grants", "dialer sends KVAK", "acceptor receives KVAK",
			}
			if fmt.Sprint(h.log) != fmt.Sprint(want2) {
				t.Fatalf("events %q\nwant %q", h.log, want2)
			}
		})
	}
}

func refusedBoth(t *testing.T, h handshake, accWant string) {
	t.Helper()
	if !errors.Is(h.accErr, ErrAuth) || !strings.Contains(h.accErr.Error(), accWant) {
		t.Errorf("acceptor: %v; want ErrAuth saying %q", h.accErr, accWant)
	}
	if !errors.Is(h.dialErr, ErrAuth) || !strings.Contains(h.dialErr.Error(), "refused") {
		t.Errorf("dialer: %v; want ErrAuth, refused", h.dialErr)
	}
	if h.granted("acceptor") || h.granted("dialer") || h.accID != (AuthIdentity{}) || h.dialID != (AuthIdentity{}) {
		t.Errorf("a refused handshake granted something: %q, %+v, %+v", h.log, h.accID, h.dialID)
	}
}

func TestHandshakeWrongKey(t *testing.T) {
	kr := mustKeyring(t, testKeys(), "")
	wrong := Key{Name: "alice", Role: AuthRW, Secret: secret(7)}
	refusedBoth(t, shake(t, kr, wrong, testView(), testView()), "wrong key")
	// A key one bit off.
	off := Key{Name: "alice", Role: AuthRW, Secret: secret(1)}
	off.Secret[31] ^= 0x80
	refusedBoth(t, shake(t, kr, off, testView(), testView()), "wrong key")
	// Another holder's key under this name.
	refusedBoth(t, shake(t, kr, Key{Name: "alice", Role: AuthRW, Secret: secret(2)}, testView(), testView()), "wrong key")
}

func TestHandshakeUnknownName(t *testing.T) {
	kr := mustKeyring(t, testKeys(), "")
	refusedBoth(t, shake(t, kr, Key{Name: "mallory", Role: AuthPeer, Secret: secret(3)}, testView(), testView()), "unknown key name")
}

// A relay: the dialer's connection and the acceptor's are different
// connections (the relay's), so their views differ and the dialer's proof
// does not fit the acceptor's connection, even with the right key.
func TestHandshakeRelay(t *testing.T) {
	kr := mustKeyring(t, testKeys(), "")
	alice := testKeys()[0]
	for name, f := range map[string]func(*authView){
		"dialer address":   func(v *authView) { v.dialer = "10.0.0.66:40000" },
		"acceptor address": func(v *authView) { v.acceptor = "10.0.0.66:7301" },
		"dialer QPN":       func(v *authView) { v.dialerQPN++ },
		"acceptor QPN":     func(v *authView) { v.acceptorQPN++ },
	} {
		t.Run(name, func(t *testing.T) {
			av := testView()
			f(&av)
			refusedBoth(t, shake(t, kr, alice, testView(), av), "wrong key")
		})
	}
}

// A claim recorded on one connection is no good on another: the listener's
// nonce differs.
func TestHandshakeReplay(t *testing.T) {
	kr := mustKeyring(t, testKeys(), "")
	alice := testKeys()[0]
	var ns1, ns2 nonce
	_, _ = rand.Read(ns1[:])
	_, _ = rand.Read(ns2[:])
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	// Record alice's claim for ns1.
	log := &eventLog{}
	d, a := pipes(log)
	go func() { _, _ = dialAuth(ctx, d, &alice, &ns1, testView(), rand.Reader, func() error { return nil }) }()
	claim := <-a.in
	// Replay it where the listener offered ns2.
	d2, a2 := pipes(log)
	d2.out <- claim
	granted := false
	_, err := acceptAuth(ctx, a2, kr, &ns2, testView(), func() error { granted = true; return nil })
	if !errors.Is(err, ErrAuth) || granted {
		t.Fatalf("replayed claim: %v, granted %v; want a refusal", err, granted)
	}
	// The same claim where ns1 was offered passes (it is the nonce that
	// stops the replay).
	d3, a3 := pipes(log)
	d3.out <- claim
	go func() { <-d3.in; d3.out <- []byte(tagReady) }()
	if _, err := acceptAuth(ctx, a3, kr, &ns1, testView(), func() error { return nil }); err != nil {
		t.Fatalf("claim on its own connection: %v", err)
	}
}

// impostor plays a listener that does not hold the dialer's key: it answers
// a claim with a proof it computes with secret (and role), or with a proof
// captured elsewhere.
func impostor(t *testing.T, a *pipe, ns *nonce, v authView, proof func(m authMsg) authMsg) {
	b := <-a.in
	m, err := decodeAuthMsg(b)
	if err != nil {
		t.Errorf("impostor: %v", err)
		return
	}
	p := proof(m)
	a.out <- p.encode()
}

func TestHandshakeImpostorListener(t *testing.T) {
	alice := testKeys()[0]
	v := testView()
	cases := map[string]func(m authMsg) authMsg{
		"other key": func(m authMsg) authMsg {
			return authMsg{tag: tagProof, role: AuthRW, mac: authMAC(secret(9), labelAcceptor, &nonce{}, &m.nonce, m.name, v, AuthRW)}
		},
		"echoes the claim's mac": func(m authMsg) authMsg { return authMsg{tag: tagProof, role: AuthRW, mac: m.mac} },
		"dialer label": func(m authMsg) authMsg {
			return authMsg{tag: tagProof, role: AuthRW, mac: authMAC(alice.Secret, labelDialer, &nonce{}, &m.nonce, m.name, v, AuthRW)}
		},
		// A man in the middle that changes the granted role (peer for rw).
		"role changed": func(m authMsg) authMsg {
			return authMsg{tag: tagProof, role: AuthPeer, mac: authMAC(alice.Secret, labelAcceptor, &nonce{}, &m.nonce, m.name, v, AuthRW)}
		},
		"ready instead of a proof": func(m authMsg) authMsg { return authMsg{tag: tagReady} },
	}
	for name, proof := range cases {
		t.Run(name, func(t *testing.T) {
			log := &eventLog{}
			d, a := pipes(log)
			var ns nonce // zero: the impostor's offer
			go impostor(t, a, &ns, v, proof)
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			granted := false
			id, err := dialAuth(ctx, d, &alice, &ns, v, rand.Reader, func() error { granted = true; return nil })
			if !errors.Is(err, ErrAuth) || granted || id != (AuthIdentity{}) {
				t.Fatalf("dialAuth = %+v, %v, granted %v; want ErrAuth and nothing granted", id, err, granted)
			}
		})
	}
	// The honest proof passes (the cases above fail for their flaw).
	log := &eventLog{}
	d, a := pipes(log)
	var ns nonce
	go impostor(t, a, &ns, v, func(m authMsg) authMsg {
		return authMsg{tag: tagProof, role: AuthRW, mac: authMAC(alice.Secret, labelAcceptor, &ns, &m.nonce, m.name, v, AuthRW)}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if _, err := dialAuth(ctx, d, &alice, &ns, v, rand.Reader, func() error { return nil }); err != nil {
		t.Fatalf("honest proof: %v", err)
	}
}

func TestHandshakeNotAClaim(t *testing.T) {
	kr := mustKeyring(t, testKeys(), "")
	for name, first := range map[string][]byte{
		"ready":   []byte(tagReady),
		"garbage": []byte("GET / HTTP/1.1"),
		"empty":   {},
	} {
		log := &eventLog{}
		d, a := pipes(log)
		d.out <- first
		granted := false
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		_, err := acceptAuth(ctx, a, kr, &nonce{}, testView(), func() error { granted = true; return nil })
		cancel()
		if !errors.Is(err, ErrAuth) || !errors.Is(err, transport.ErrProtocol) || granted {
			t.Errorf("%s: %v, granted %v; want ErrAuth and ErrProtocol", name, err, granted)
		}
		if m, _ := decodeAuthMsg(<-d.in); m.tag != tagRefused || m.reason != reasonProtocol {
			t.Errorf("%s: the dialer was told %+v", name, m)
		}
	}
}

// An acceptor that stops after the proof (a dialer that never sends ready)
// hands nothing out.
func TestHandshakeNoReady(t *testing.T) {
	kr := mustKeyring(t, testKeys(), "")
	alice := testKeys()[0]
	log := &eventLog{}
	d, a := pipes(log)
	var ns nonce
	v := testView()
	var nc nonce
	claim := authMsg{tag: tagClaim, name: alice.Name, nonce: nc, mac: authMAC(alice.Secret, labelDialer, &ns, &nc, alice.Name, v, 0)}
	d.out <- claim.encode()
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	id, err := acceptAuth(ctx, a, kr, &ns, v, func() error { return nil })
	if !errors.Is(err, ErrAuth) || !errors.Is(err, context.DeadlineExceeded) || id != (AuthIdentity{}) {
		t.Fatalf("acceptAuth = %+v, %v; want a timeout", id, err)
	}
}

// FuzzAcceptClaim: whatever a dialer without the key sends, the acceptor
// never grants anything and refuses.
func FuzzAcceptClaim(f *testing.F) {
	for _, m := range sampleMsgs() {
		f.Add(m.encode())
	}
	kr := mustKeyring(f, testKeys(), "")
	f.Fuzz(func(t *testing.T, b []byte) {
		log := &eventLog{}
		d, a := pipes(log)
		d.out <- b
		granted := false
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		if id, err := acceptAuth(ctx, a, kr, &nonce{1}, testView(), func() error { granted = true; return nil }); err == nil || granted {
			t.Fatalf("claim %x accepted as %+v (granted %v)", b, id, granted)
		}
	})
}
