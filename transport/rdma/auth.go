package rdma

// Connection authentication: the key file, the handshake's messages and its
// two halves. This file has no build tag and no cgo, so host tests (and
// fuzzing) reach all of it; auth_conn.go runs it on real connections. The
// protocol is described in doc.go ("Authentication").

import (
	"bufio"
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/kvd-project/kvd/transport"
)

// AuthRole is what a key lets its holder do. The key file spells it rw, ro
// or peer.
type AuthRole uint8

const (
	// AuthRW: a client that may read and write.
	AuthRW AuthRole = 1 + iota
	// AuthRO: a client that may only read; a server refuses its writes.
	AuthRO
	// AuthPeer: a cluster member, the only role that may carry Raft traffic.
	AuthPeer
)

func (r AuthRole) String() string {
	switch r {
	case AuthRW:
		return "rw"
	case AuthRO:
		return "ro"
	case AuthPeer:
		return "peer"
	}
	return fmt.Sprintf("role(%d)", uint8(r))
}

func (r AuthRole) valid() bool { return r >= AuthRW && r <= AuthPeer }

// ParseAuthRole parses rw, ro or peer.
func ParseAuthRole(s string) (AuthRole, error) {
	for r := AuthRW; r <= AuthPeer; r++ {
		if s == r.String() {
			return r, nil
		}
	}
	return 0, fmt.Errorf("role %q: want rw, ro or peer", s)
}

// AuthIdentity is who the remote end of an authenticated connection proved
// to be: the name of the key it holds and that key's role, as the
// listener's key file says. On a dialed connection it is this end's own
// name and the role the listener granted it.
type AuthIdentity struct {
	Name string
	Role AuthRole
}

// Transport maps the identity onto package transport's: peer keys are
// RolePeer, rw and ro keys RoleClient, and ro keys ReadOnly. The zero
// AuthIdentity (an unauthenticated connection) maps to the zero Identity.
//
// TLS stays false: an RDMA connection is authenticated, not encrypted.
func (id AuthIdentity) Transport() transport.Identity {
	switch id.Role {
	case AuthPeer:
		return transport.Identity{Role: transport.RolePeer, KeyName: id.Name}
	case AuthRW:
		return transport.Identity{Role: transport.RoleClient, KeyName: id.Name}
	case AuthRO:
		return transport.Identity{Role: transport.RoleClient, ReadOnly: true, KeyName: id.Name}
	}
	return transport.Identity{}
}

// AuthIdentityOf returns the identity an rdma connection authenticated, and
// false if c is not an rdma connection or was not authenticated.
func AuthIdentityOf(c transport.Conn) (AuthIdentity, bool) {
	a, ok := c.(interface{ AuthIdentity() AuthIdentity })
	if !ok {
		return AuthIdentity{}, false
	}
	id := a.AuthIdentity()
	return id, id.Role != 0
}

// Key is one entry of an auth key file: a name, its role and the shared
// secret its holder proves it knows.
type Key struct {
	Name   string
	Role   AuthRole
	Secret []byte
}

// Limits of the key file.
const (
	MinKeyBytes  = 16 // secrets shorter than this are refused; use 32
	MaxKeyBytes  = 64
	MaxNameBytes = 64
)

// Auth configures the authentication of every connection of a Transport
// (Config.Auth). Either File or Keys names the keys.
//
// A listener with Auth accepts a connection only after the dialer proved
// it holds one of the keys, and has proved back that it holds the same key;
// until then Accept does not return it and its queue pair has no remote
// access at all, so nothing of this end's regions can be read through it. A
// dialer with Auth proves Name's key and insists that the listener prove it
// too. Each end grants remote READ on the queue pair only once the other
// has proved itself. Limits on a connection that has not authenticated yet:
// AuthMaxMessage bytes per message, Timeout from its connection request, and
// at most Config.Backlog such connections per listener at once (further
// requests are rejected). Every refusal is counted (Transport.AuthStats)
// and reported to Refused.
type Auth struct {
	// File is a key file: one key per line, NAME:ROLE:HEXKEY, ROLE rw, ro or
	// peer, HEXKEY MinKeyBytes to MaxKeyBytes bytes in hex; blank lines and
	// lines starting with # are ignored; names are letters, digits and
	// ._@- (at most MaxNameBytes). It must not be readable by group or
	// others. It is read when the Transport is made.
	File string
	// Keys is used instead of File (not both).
	Keys []Key
	// Name is the key this end proves when it dials. Default: the only key,
	// if there is exactly one; otherwise Dial fails until it is set. A
	// listener accepts every key whatever Name is.
	Name string
	// Timeout bounds the authentication of an incoming connection, from its
	// connection request; a dial is bounded by its context and by Timeout.
	// Default DefaultAuthTimeout.
	Timeout time.Duration
	// Refused, if set, hears of every incoming connection refused before or
	// during authentication (remote is its address, err says why): the
	// dialer only learns that it was refused, this is the listener's trace.
	// It must not block.
	Refused func(remote string, err error)
}

const (
	// DefaultAuthTimeout is the default Auth.Timeout.
	DefaultAuthTimeout = 5 * time.Second
	// AuthMaxMessage is the largest message a connection accepts from its
	// peer until the peer has authenticated (the handshake's messages are
	// smaller); a longer one closes the connection.
	AuthMaxMessage = 256
	maxAuthTimeout = time.Minute
)

// ErrAuth: authentication failed, or the two ends disagree about whether
// to authenticate. The connection is closed. A failure that redialling
// cannot mend (a refused key, an impostor listener, disagreeing settings)
// also wraps transport.ErrAuthRefused; a handshake that ran out of time does
// not.
var ErrAuth = errors.New("rdma: authentication failed")

// AuthStats counts a transport's incoming connections by the outcome of
// their authentication.
type AuthStats struct {
	Accepted uint64 // authenticated and handed to Accept
	Refused  uint64 // refused, timed out or rejected before authenticating
}

func (a *Auth) timeout() time.Duration {
	if a.Timeout == 0 {
		return DefaultAuthTimeout
	}
	return a.Timeout
}

// keyring is a loaded Auth: every key by name, and the one this end dials
// with (nil if none).
type keyring struct {
	keys map[string]Key
	self *Key
}

// load reads the keys Auth names. Errors wrap ErrConfig.
func (a *Auth) load() (*keyring, error) {
	switch {
	case a.File != "" && len(a.Keys) > 0:
		return nil, fmt.Errorf("%w: Auth has both File and Keys", ErrConfig)
	case a.Timeout < 0 || a.Timeout > maxAuthTimeout:
		return nil, fmt.Errorf("%w: Auth.Timeout %v not in [0, %v]", ErrConfig, a.Timeout, maxAuthTimeout)
	}
	keys := a.Keys
	if a.File != "" {
		var err error
		if keys, err = ReadKeyFile(a.File); err != nil {
			return nil, fmt.Errorf("%w: %w", ErrConfig, err)
		}
	}
	if len(keys) == 0 {
		return nil, fmt.Errorf("%w: Auth names no keys", ErrConfig)
	}
	kr := &keyring{keys: make(map[string]Key, len(keys))}
	for _, k := range keys {
		if err := k.check(); err != nil {
			return nil, fmt.Errorf("%w: %w", ErrConfig, err)
		}
		if _, dup := kr.keys[k.Name]; dup {
			return nil, fmt.Errorf("%w: key %q appears twice", ErrConfig, k.Name)
		}
		kr.keys[k.Name] = Key{Name: k.Name, Role: k.Role, Secret: bytes.Clone(k.Secret)}
	}
	switch {
	case a.Name != "":
		k, ok := kr.keys[a.Name]
		if !ok {
			return nil, fmt.Errorf("%w: Auth.Name %q is not among the keys", ErrConfig, a.Name)
		}
		kr.self = &k
	case len(keys) == 1:
		k := kr.keys[keys[0].Name]
		kr.self = &k
	}
	return kr, nil
}

// SelfKey returns the key a transport with this Auth dials with, if any.
func (a *Auth) SelfKey() (Key, bool, error) {
	kr, err := a.load()
	if err != nil {
		return Key{}, false, err
	}
	if kr.self == nil {
		return Key{}, false, nil
	}
	return *kr.self, true, nil
}

func (k Key) check() error {
	switch {
	case !validName(k.Name):
		return fmt.Errorf("key name %q: want 1 to %d letters, digits or ._@-", k.Name, MaxNameBytes)
	case !k.Role.valid():
		return fmt.Errorf("key %q: bad role %v", k.Name, k.Role)
	case len(k.Secret) < MinKeyBytes || len(k.Secret) > MaxKeyBytes:
		return fmt.Errorf("key %q: %d bytes, want %d to %d (32 random bytes: openssl rand -hex 32)",
			k.Name, len(k.Secret), MinKeyBytes, MaxKeyBytes)
	}
	return nil
}

func validName(s string) bool {
	if len(s) == 0 || len(s) > MaxNameBytes {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte("._@-", c) >= 0) {
			return false
		}
	}
	return true
}

// ReadKeyFile reads a key file (see Auth.File). It refuses a file that
// group or others may read or write.
func ReadKeyFile(path string) ([]Key, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("auth key file: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("auth key file: %w", err)
	}
	if m := st.Mode().Perm(); m&0o077 != 0 {
		return nil, fmt.Errorf("auth key file %s: mode %v lets group or others at the keys (chmod 600 it)", path, m)
	}
	keys, err := ParseKeys(f)
	if err != nil {
		return nil, fmt.Errorf("auth key file %s: %w", path, err)
	}
	return keys, nil
}

// MaxKeyFileBytes bounds a key file; a longer one is refused whole (cut at
// the limit, a line could load a prefix of its key, and the rest would be
// silently missing).
const MaxKeyFileBytes = 1 << 20

// ParseKeys parses a key file's contents (see Auth.File).
func ParseKeys(r io.Reader) ([]Key, error) {
	var keys []Key
	seen := map[string]bool{}
	lr := &io.LimitedReader{R: r, N: MaxKeyFileBytes + 1}
	sc := bufio.NewScanner(lr)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' {
			continue
		}
		parts := strings.Split(line, ":")
		if len(parts) != 3 {
			return nil, fmt.Errorf("line %d: want NAME:ROLE:HEXKEY", n)
		}
		role, err := ParseAuthRole(parts[1])
		if err != nil {
			return nil, fmt.Errorf("line %d: %w", n, err)
		}
		secret, err := hex.DecodeString(parts[2])
		if err != nil {
			return nil, fmt.Errorf("line %d: key is not hex", n)
		}
		k := Key{Name: parts[0], Role: role, Secret: secret}
		if err := k.check(); err != nil {
			return nil, fmt.Errorf("line %d: %w", n, err)
		}
		if seen[k.Name] {
			return nil, fmt.Errorf("line %d: key %q appears twice", n, k.Name)
		}
		seen[k.Name] = true
		keys = append(keys, k)
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if lr.N == 0 {
		return nil, fmt.Errorf("longer than %d bytes", MaxKeyFileBytes)
	}
	if len(keys) == 0 {
		return nil, errors.New("no keys")
	}
	return keys, nil
}

// The offer: what an authenticating listener appends to the hello in its
// accept's private data (doc.go, "Authentication").
const (
	nonceSize  = 32
	macSize    = sha256.Size
	offerMagic = "KVA1"
	offerSize  = len(offerMagic) + nonceSize
)

type nonce = [nonceSize]byte

// appendOffer appends the offer of nonce n to a hello's private data.
func appendOffer(pdata []byte, n *nonce) []byte {
	return append(append(pdata, offerMagic...), n[:]...)
}

// parseOffer finds the offer after the hello in a listener's private data
// (which may arrive zero-padded); ok is false if there is none.
func parseOffer(pdata []byte) (n nonce, ok bool) {
	if len(pdata) < helloSize+offerSize || string(pdata[helloSize:helloSize+len(offerMagic)]) != offerMagic {
		return n, false
	}
	copy(n[:], pdata[helloSize+len(offerMagic):])
	return n, true
}

// Handshake messages, sent as ordinary messages over the new connection.
// Each starts with a 4-byte tag:
//
//	claim   "KVAC" nonce[32] mac[32] nameLen[1] name   dialer → listener
//	proof   "KVAP" role[1] mac[32]                      listener → dialer
//	refused "KVAR" reason[1]                            listener → dialer
//	ready   "KVAK"                                      dialer → listener
const (
	tagClaim   = "KVAC"
	tagProof   = "KVAP"
	tagRefused = "KVAR"
	tagReady   = "KVAK"

	reasonRefused  = 1 // unknown name or wrong proof (not told apart)
	reasonProtocol = 2 // not a claim
)

type authMsg struct {
	tag    string
	name   string
	nonce  nonce
	mac    [macSize]byte
	role   AuthRole
	reason byte
}

func (m *authMsg) encode() []byte {
	b := make([]byte, 0, 4+nonceSize+macSize+1+len(m.name))
	b = append(b, m.tag...)
	switch m.tag {
	case tagClaim:
		b = append(b, m.nonce[:]...)
		b = append(b, m.mac[:]...)
		b = append(b, byte(len(m.name)))
		b = append(b, m.name...)
	case tagProof:
		b = append(b, byte(m.role))
		b = append(b, m.mac[:]...)
	case tagRefused:
		b = append(b, m.reason)
	}
	return b
}

// decodeAuthMsg parses a handshake message. It accepts exactly what encode
// produces for a valid message, and never panics.
func decodeAuthMsg(b []byte) (authMsg, error) {
	if len(b) < 4 {
		return authMsg{}, fmt.Errorf("rdma: auth message of %d bytes: %w", len(b), transport.ErrProtocol)
	}
	m := authMsg{tag: string(b[:4])}
	body := b[4:]
	bad := func(what string) (authMsg, error) {
		return authMsg{}, fmt.Errorf("rdma: malformed auth %s (%d bytes): %w", what, len(b), transport.ErrProtocol)
	}
	switch m.tag {
	case tagClaim:
		if len(body) < nonceSize+macSize+1 {
			return bad("claim")
		}
		copy(m.nonce[:], body)
		copy(m.mac[:], body[nonceSize:])
		n := int(body[nonceSize+macSize])
		name := body[nonceSize+macSize+1:]
		if len(name) != n || !validName(string(name)) {
			return bad("claim")
		}
		m.name = string(name)
	case tagProof:
		if len(body) != 1+macSize || !AuthRole(body[0]).valid() {
			return bad("proof")
		}
		m.role = AuthRole(body[0])
		copy(m.mac[:], body[1:])
	case tagRefused:
		if len(body) != 1 {
			return bad("refusal")
		}
		m.reason = body[0]
	case tagReady:
		if len(body) != 0 {
			return bad("ready")
		}
	default:
		return authMsg{}, fmt.Errorf("rdma: not an auth message (tag %q): %w", b[:4], transport.ErrProtocol)
	}
	return m, nil
}

// authView is the connection as one end sees it: both ends compute the same
// view of one connection, and a proof made for one connection does not fit
// another (a relay between two connections fails).
type authView struct {
	dialer, acceptor       string // addresses, "ip:port"
	dialerQPN, acceptorQPN uint32
}

const (
	labelDialer   = "dialer"
	labelAcceptor = "acceptor"
)

// authMAC is HMAC-SHA256 under key of the label (whose proof it is), both
// nonces, the dialer's key name, the view and the granted role (0 in the
// dialer's proof).
func authMAC(key []byte, label string, ns, nc *nonce, name string, v authView, role AuthRole) [macSize]byte {
	b := make([]byte, 0, 160+len(name)+len(v.dialer)+len(v.acceptor))
	b = append(b, "kvd-rdma-auth-v1\x00"...)
	b = append(b, label...)
	b = append(b, 0)
	b = append(b, ns[:]...)
	b = append(b, nc[:]...)
	for _, s := range []string{name, v.dialer, v.acceptor} {
		b = le.AppendUint16(b, uint16(len(s)))
		b = append(b, s...)
	}
	b = le.AppendUint32(b, v.dialerQPN)
	b = le.AppendUint32(b, v.acceptorQPN)
	b = append(b, byte(role))
	h := hmac.New(sha256.New, key)
	h.Write(b)
	var out [macSize]byte
	h.Sum(out[:0])
	return out
}

// msgConn is the part of a connection the handshake uses.
type msgConn interface {
	Send(ctx context.Context, msg []byte) error
	Recv(ctx context.Context, buf []byte) ([]byte, error)
}

// dummySecret stands in for an unknown name's key, so that refusing an
// unknown name costs the same as refusing a wrong proof.
var dummySecret = make([]byte, 32)

// acceptAuth is the listener's half, run on an established connection whose
// accept offered ns; v is the connection as this end sees it. It calls
// grant once the dialer has proved its key, before proving this end's;
// until then nothing of this end is granted. On error the caller closes the
// connection.
func acceptAuth(ctx context.Context, c msgConn, kr *keyring, ns *nonce, v authView, grant func() error) (AuthIdentity, error) {
	b, err := c.Recv(ctx, nil)
	if err != nil {
		return AuthIdentity{}, fmt.Errorf("%w: no claim from the dialer: %w", ErrAuth, err)
	}
	m, err := decodeAuthMsg(b)
	if err == nil && m.tag != tagClaim {
		err = fmt.Errorf("rdma: %q where a claim belongs: %w", m.tag, transport.ErrProtocol)
	}
	if err != nil {
		refuse(ctx, c, reasonProtocol)
		return AuthIdentity{}, fmt.Errorf("%w: %w", ErrAuth, err)
	}
	k, known := kr.keys[m.name]
	secret := k.Secret
	if !known {
		secret = dummySecret
	}
	want := authMAC(secret, labelDialer, ns, &m.nonce, m.name, v, 0)
	if ok := hmac.Equal(want[:], m.mac[:]); !ok || !known {
		refuse(ctx, c, reasonRefused)
		if !known {
			return AuthIdentity{}, fmt.Errorf("%w: unknown key name %q", ErrAuth, m.name)
		}
		return AuthIdentity{}, fmt.Errorf("%w: %q did not prove its key (wrong key)", ErrAuth, m.name)
	}
	if err := grant(); err != nil {
		return AuthIdentity{}, err
	}
	p := authMsg{tag: tagProof, role: k.Role, mac: authMAC(k.Secret, labelAcceptor, ns, &m.nonce, m.name, v, k.Role)}
	if err := c.Send(ctx, p.encode()); err != nil {
		return AuthIdentity{}, fmt.Errorf("%w: sending the proof: %w", ErrAuth, err)
	}
	if b, err = c.Recv(ctx, b[:0]); err != nil {
		return AuthIdentity{}, fmt.Errorf("%w: %q did not confirm: %w", ErrAuth, m.name, err)
	}
	if r, err := decodeAuthMsg(b); err != nil || r.tag != tagReady {
		return AuthIdentity{}, fmt.Errorf("%w: %q sent no ready: %w", ErrAuth, m.name, transport.ErrProtocol)
	}
	return AuthIdentity{Name: m.name, Role: k.Role}, nil
}

// refuse tells the dialer it was refused, briefly: it learns no more than
// that.
func refuse(ctx context.Context, c msgConn, reason byte) {
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	m := authMsg{tag: tagRefused, reason: reason}
	_ = c.Send(ctx, m.encode())
}

// dialAuth is the dialer's half, run on an established connection whose
// listener offered ns. It proves self's key with a fresh nonce from random,
// checks the listener's proof, then calls grant and confirms. On error the
// caller closes the connection.
func dialAuth(ctx context.Context, c msgConn, self *Key, ns *nonce, v authView, random io.Reader, grant func() error) (AuthIdentity, error) {
	var nc nonce
	if _, err := io.ReadFull(random, nc[:]); err != nil {
		return AuthIdentity{}, fmt.Errorf("rdma: auth nonce: %w", err)
	}
	claim := authMsg{tag: tagClaim, name: self.Name, nonce: nc, mac: authMAC(self.Secret, labelDialer, ns, &nc, self.Name, v, 0)}
	if err := c.Send(ctx, claim.encode()); err != nil {
		return AuthIdentity{}, fmt.Errorf("%w: sending the claim: %w", ErrAuth, err)
	}
	b, err := c.Recv(ctx, nil)
	if err != nil {
		return AuthIdentity{}, fmt.Errorf("%w: no answer to the claim of %q (refused?): %w", ErrAuth, self.Name, err)
	}
	m, err := decodeAuthMsg(b)
	switch {
	case err != nil:
		return AuthIdentity{}, fmt.Errorf("%w: %w", ErrAuth, err)
	case m.tag == tagRefused:
		return AuthIdentity{}, fmt.Errorf("%w: the listener refused key %q (unknown to it, or not the same key): %w", ErrAuth, self.Name, transport.ErrAuthRefused)
	case m.tag != tagProof:
		return AuthIdentity{}, fmt.Errorf("%w: %q where a proof belongs: %w", ErrAuth, m.tag, transport.ErrProtocol)
	}
	want := authMAC(self.Secret, labelAcceptor, ns, &nc, self.Name, v, m.role)
	if !hmac.Equal(want[:], m.mac[:]) {
		return AuthIdentity{}, fmt.Errorf("%w: the listener did not prove it holds key %q: not the server meant, or a relay: %w", ErrAuth, self.Name, transport.ErrAuthRefused)
	}
	if err := grant(); err != nil {
		return AuthIdentity{}, err
	}
	ready := authMsg{tag: tagReady}
	if err := c.Send(ctx, ready.encode()); err != nil {
		return AuthIdentity{}, fmt.Errorf("%w: sending ready: %w", ErrAuth, err)
	}
	return AuthIdentity{Name: self.Name, Role: m.role}, nil
}
