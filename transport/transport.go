package transport

import (
	"context"
	"crypto/x509"
	"fmt"
)

// Defaults shared by implementations. An implementation may support other
// values through its own Config, but must document them.
const (
	// DefaultMaxMessage is the largest message Send accepts unless configured
	// otherwise. It comfortably holds the largest kvd request (a 1 MiB value
	// plus key and framing) and a Raft snapshot chunk.
	DefaultMaxMessage = 4 << 20

	// DefaultCredits is how many messages a sender may have in flight to a
	// receiver that has not yet consumed them. It is also the depth of the
	// receiver's queue of delivered messages.
	DefaultCredits = 64

	// MaxBatch is the most READs one Read call may post.
	MaxBatch = 16

	// MaxReadBatchBytes is the most bytes one Read call may read, all its
	// ops together: a Read over it fails with ErrBatchTooLarge without
	// posting anything, and a peer that posts one anyway breaks the
	// protocol (its connection is closed). It bounds what one small
	// request can make a server send. A kvd GET needs at most the header,
	// two buckets and 13 candidate records of up to 1 MiB and 1 KiB each:
	// about 13 MiB.
	MaxReadBatchBytes = 16 << 20
)

// Descriptor names a registered region to a remote reader: what RDMA calls
// (remote address, length, rkey). It is plain data and may be sent to peers.
type Descriptor struct {
	// Addr is the base address remote READs are relative to. On RDMA it is the
	// region's virtual address; other transports may use any value.
	Addr uint64
	// Len is the region's length in bytes.
	Len uint64
	// Key authorises remote READs of this region (the rkey).
	Key uint32
}

func (d Descriptor) String() string {
	return fmt.Sprintf("region{addr=%#x len=%d key=%#x}", d.Addr, d.Len, d.Key)
}

// Region is memory registered for remote reading.
//
// The memory is allocated off the Go heap by the transport and stays valid
// until Close returns; the owner must not touch Bytes after that. Remote
// READs copy bytes out of the region without any coordination with the
// owner: they take none of its locks and may observe a write half done.
// Owners that need consistent remote reads must make their data
// self-verifying (kvd's table does, with checksums).
type Region interface {
	// Bytes is the registered memory. The slice header is fixed for the
	// region's life; the bytes may be written at any time by the owner.
	Bytes() []byte
	// Descriptor is what a remote peer needs to READ this region.
	Descriptor() Descriptor
	// Close deregisters the region and frees its memory. It waits for READs
	// being served from it to finish; later READs fail with ErrBadKey.
	// Close is idempotent.
	Close() error
}

// ReadOp is one one-sided READ within a batch: Len(Dst) bytes of the remote
// region named by Remote, starting at Offset, copied into Dst.
type ReadOp struct {
	Remote Descriptor
	Offset uint64
	Dst    []byte
}

// Conn is one reliable connection between two endpoints (an RC queue pair).
//
// Concurrency: every method may be called from many goroutines at once.
// Messages sent by one goroutine arrive in the order sent; messages from
// different goroutines interleave whole, never torn.
type Conn interface {
	// Send delivers msg to the peer's Recv. It copies msg before returning,
	// so the caller may reuse it at once. It blocks while the peer holds all
	// of this connection's credits (has not consumed earlier messages), until
	// ctx is done or the connection fails. Messages larger than MaxMessage
	// fail with ErrMessageTooLarge; empty messages are delivered.
	Send(ctx context.Context, msg []byte) error

	// Recv waits for the next message and returns it appended to buf[:0],
	// growing buf only if it is too small. The caller owns the result.
	Recv(ctx context.Context, buf []byte) ([]byte, error)

	// Read posts a batch of up to MaxBatch one-sided READs of the peer's
	// regions, of at most MaxReadBatchBytes in all, and waits for all of
	// them. It returns nil only if every op
	// filled its Dst. The remote application is not involved. On error the
	// contents of every Dst are undefined. If ctx ends first, Read returns
	// ctx's error and guarantees no op will write to any Dst afterwards.
	Read(ctx context.Context, ops []ReadOp) error

	// MaxMessage is the largest message Send accepts on this connection.
	MaxMessage() int

	// RemoteAddr is the peer's address as the transport names it.
	RemoteAddr() string

	// Close tears the connection down. Pending and later operations on both
	// sides fail with ErrClosed (or a wrapped cause) promptly.
	Close() error
}

// LimitCloser is a Conn that an application can close for a limit of its
// own (a reply its client left unread) under the same rule as the
// transport's limits (a write timeout): of the closures that race for one
// connection, only the one that closes it is counted. A transport whose
// own limits never close connections need not implement it.
type LimitCloser interface {
	// CloseForLimit closes the connection as Close does, and reports
	// whether this call closed it (false: it was closed already, and
	// whoever closed it counts it).
	CloseForLimit(err error) (closed bool)
}

// BatchSender is a Conn that can send several messages together: a
// server answering many watches of one connection at once hands them over
// in one call, which a transport may put in one socket write.
type BatchSender interface {
	// SendBatch sends msgs in order, as that many Sends would, and returns
	// how many it sent: on an error, msgs[:n] went out as Send's do and
	// the rest did not. The caller may reuse msgs once it returns.
	SendBatch(ctx context.Context, msgs [][]byte) (n int, err error)
}

// Listener accepts connections. Accept and Close may be called concurrently.
type Listener interface {
	Accept(ctx context.Context) (Conn, error)
	Addr() string
	Close() error
}

// Transport is one endpoint's device context: it owns the registered
// regions, and the connections made through it serve remote READs of them.
// All methods are safe for concurrent use.
type Transport interface {
	// Register allocates size bytes off the Go heap, zeroed, and registers
	// them for remote READ (never remote write).
	Register(size int) (Region, error)
	// Listen accepts connections at addr ("host:port").
	Listen(addr string) (Listener, error)
	// Dial connects to a listener at addr.
	Dial(ctx context.Context, addr string) (Conn, error)
	// Name is the transport's name as flags spell it ("tcp", "rdma").
	Name() string
	// Close closes every listener, connection and region of the transport.
	Close() error
}

// Role is what a connection was opened for, as negotiated (and
// authenticated) when it was set up: a kvd client talking to a server, or a
// cluster peer (Raft traffic). Unauthenticated connections have no role.
type Role uint8

const (
	// RoleNone: the transport negotiated no role (plaintext TCP, RDMA
	// without authentication): nothing is known about the remote end.
	RoleNone Role = iota
	// RoleClient: the dialing end is a client. Over TLS, its certificate
	// (if the listener asked for one) was verified against the client CA.
	RoleClient
	// RolePeer: the dialing end is a cluster member. Over TLS, its
	// certificate (if the listener asked for one) was verified against the
	// peer CA, and is not marked read-only.
	RolePeer
)

func (r Role) String() string {
	switch r {
	case RoleNone:
		return "none"
	case RoleClient:
		return "client"
	case RolePeer:
		return "peer"
	}
	return fmt.Sprintf("role(%d)", uint8(r))
}

// Identity is what a transport established about a connection's remote end
// when the connection was set up. It does not change for the connection's
// life (certificates reloaded later apply to new connections only).
//
// The zero Identity means nothing is known: the connection is not
// authenticated (a plaintext TCP or RDMA connection), so a server must
// either trust its network or refuse.
type Identity struct {
	// TLS: the connection is encrypted and its role authenticated by TLS
	// (transport/tcp with TLS). A transport may authenticate a role without
	// TLS (Role set, TLS false).
	TLS bool
	// Role is what the dialing end connected as, as authenticated; the
	// same on both ends. RoleNone: not authenticated.
	Role Role
	// Certificates is the remote end's certificate chain as verified, leaf
	// first: on an accepted connection the dialer's (empty if the listener
	// did not require one for Role), on a dialed one the listener's. An
	// unverified certificate is never reported here.
	Certificates []*x509.Certificate
	// ReadOnly: the remote end's credential (a verified certificate) marks
	// it read-only (how is the transport's configuration); a server must
	// refuse its writes. Only ever set on accepted RoleClient connections.
	ReadOnly bool
	// KeyName names the shared key the remote end proved, for transports
	// that authenticate with keys rather than certificates (RDMA's
	// --rdma-auth-file); "" otherwise.
	KeyName string
}

// Name is the verified leaf certificate's subject common name, or the key
// name, or "" if there is neither; for logs and refusals.
func (id Identity) Name() string {
	if len(id.Certificates) == 0 {
		return id.KeyName
	}
	return id.Certificates[0].Subject.CommonName
}

// PeerAllowed reports whether the connection may carry cluster-peer (Raft)
// traffic: it negotiated no role (nothing is authenticated, as on a
// plaintext connection), or RolePeer, which a TLS listener grants only to a
// dialer that passed its peer checks. A server must refuse peer traffic on
// connections for which it is false: a client could otherwise pose as a
// member.
func (id Identity) PeerAllowed() bool { return id.Role == RoleNone || id.Role == RolePeer }

// ClientAllowed reports whether the connection may carry client requests:
// it negotiated no role, or RoleClient. (A peer-role connection is refused
// client requests so that it cannot bypass client-certificate checks when
// peer certificates are not required.)
func (id Identity) ClientAllowed() bool { return id.Role == RoleNone || id.Role == RoleClient }

// Identified is implemented by connections that know their remote end's
// Identity (transport/tcp's). Use IdentityOf rather than asserting it.
type Identified interface {
	Identity() Identity
}

// IdentityOf returns c's Identity, or the zero Identity if c's transport
// establishes none.
func IdentityOf(c Conn) Identity {
	if i, ok := c.(Identified); ok {
		return i.Identity()
	}
	return Identity{}
}
