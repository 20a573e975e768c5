// Package tcp implements transport.Transport over TCP, keeping RDMA's
// semantics so that code tested here behaves the same over transport/rdma.
//
// It owns the wire protocol below, each connection's goroutines and
// buffers, and the transport's registry of regions.
//
// # Semantics
//
// Regions are mmap'd off the Go heap; Descriptor.Addr is their real base
// address and Key a random non-zero number unique within the Transport. Any
// connection of the Transport, dialed or accepted, serves READs of any of
// its regions: the connection's own goroutine copies the bytes straight out
// of the registered memory into the socket, taking no application lock and
// calling no application code, as a NIC would. A READ racing with the
// owner's writes may therefore return torn bytes. A per-region lock, held
// only for memory copies, keeps Region.Close from unmapping memory that is
// being copied.
//
// Each connection runs two goroutines. readLoop is the only reader of the
// socket and never blocks on anything else: delivered messages go into a
// queue sized by the credits this end granted, READ requests into a queue
// sized by the READs it allows in flight, and READ data straight into the
// caller's Dst (under the posting slot's lock, so a Read that gives up on its
// context is never written to afterwards; readLoop drains the rest of that
// response). serveLoop writes READ responses and returned credits, so
// readLoop never waits on the socket's send side, nor Recv on the socket. All writers share one buffered writer under a mutex;
// the last writer waiting flushes, which coalesces frames under load. Two
// writers leave the flush to serveLoop instead: a Read leaves its request
// for serveLoop to flush after every goroutine ready to run has had its
// turn, so that the READs of concurrent GETs share one socket write (one
// wakeup of the peer); and serveLoop leaves a READ response unflushed
// while more batches wait to be served, so that one write answers them
// all.
//
// Read posts a batch in one frame and waits for one response. Posting,
// waiting, copying and serving allocate nothing once warm: request slots
// and serving slots are made as a connection first needs them and reused,
// write buffers and the scratch buffers of large READ responses come from
// pools.
//
// # Limits
//
// Everything a peer can make a connection hold is bounded (Config, with
// defaults; a server can adjust a listener's cap through Limits):
//
//   - Connections: each listener holds at most MaxConns (10,000) accepted
//     connections, handshaking or open. Beyond it a socket is answered with
//     a refusal in place of the hello and closed; the dialer's Dial fails
//     with an error wrapping ErrRefused that says why (over TLS too: the
//     refusal comes before the TLS handshake).
//   - Handshakes: an accepted socket must finish the TLS handshake and the
//     hellos within HandshakeTimeout (5s).
//   - Idle connections: an accepted connection on which nothing arrives for
//     IdleTimeout (5m) is closed. A server exempts its cluster peers
//     (SetIdleTimeout), whose connections may be silent between elections.
//   - Frames: a frame must arrive whole within ReadTimeout (30s) of its
//     header, and a message's buffer grows as its bytes arrive (from 64 KiB,
//     doubling), never from the header's length.
//   - Writes: a connection whose peer takes no bytes for WriteTimeout (10s)
//     while this end has bytes for it is closed, failing the blocked Send
//     (and READ responses, credits) with ErrClosed; Send waits for credit
//     only while its context lasts.
//   - READs: one batch reads at most transport.MaxReadBatchBytes (16 MiB);
//     a peer that asks for more breaks the protocol.
//   - Messages in flight: besides its credits, a sender may have at most
//     DefaultQueueBytes (16 MiB, or the conn's max message if larger) of
//     messages whose credits have not come back; Send waits for room, and
//     a peer that sends beyond it breaks the protocol (bytewindow.go). So a
//     receiver that consumes nothing holds at most that much, not credits
//     times the max message.
//   - Memory per idle connection: a 16 KiB read buffer and the queues sized
//     by credits and outstanding READs (about 27 KiB of heap, and two
//     goroutines), whatever it was sent before: write buffers, and the
//     buffers of received messages up to 64 KiB, are taken from pools
//     shared by all connections only while in use (msgbuf.go).
//
// One watchdog goroutine per Transport enforces the timeouts, so the data
// path sets no socket deadline. Every refusal and every connection closed
// for breaking a limit is reported to the listener's refusal hook
// (Limits.SetRefusalHook) with a reason (ReasonMaxConns, ...), for a server
// to count and log; a connection the Transport dialed is reported to its
// first listener's.
//
// Closing either end, or a socket error, fails pending and later operations
// on both ends with errors wrapping transport.ErrClosed. Messages that had
// arrived before the peer closed are still handed to Recv.
//
// # Fault injection
//
// Config.Filter (or Transport.SetFilter) cuts chosen peers off, by node name
// (Config.Node of each end, exchanged in the handshake). While
// Filter(local, remote) is true: Send to the peer succeeds but the message is
// dropped; messages from the peer are dropped on arrival; Reads of the peer
// fail with ErrPartitioned, and READs the peer posts here are refused with
// it. Credits are still returned, so healing (the Filter returning false
// again) restores the connection exactly; connections stay open throughout.
// Both ends check their own Filter, so cutting A from B on A alone is a full
// partition. For example:
//
//	var cut sync.Map // "a|b" -> true
//	filter := func(local, remote string) bool {
//		_, ok := cut.Load(local + "|" + remote)
//		return ok
//	}
//	a, _ := tcp.New(tcp.Config{Node: "a", Filter: filter})
//	cut.Store("a|b", true) // partition a from b
//	cut.Delete("a|b")      // heal
//
// # TLS
//
// With Config.TLS every connection runs over TLS 1.3 (crypto/tls): the TLS
// handshake comes first, then everything below travels inside TLS, READ
// requests and responses included, so one-sided READs ride the same
// encrypted connection as messages. A transport with TLS speaks nothing
// else: a plaintext peer fails the handshake on either side, with an error
// that says so (wrapping ErrTLS).
//
// The dialer names its role in the handshake through ALPN: "kvd" for a
// client, "kvd-peer" for a cluster member (TLS.Role). One listener serves
// both: TLS.Server picks, per role, the certificate it shows and whether
// and against which CAs the dialer's certificate is verified, and it is
// asked at every handshake, so reloaded material applies to new connections.
// A dialer that names neither role, or both, is refused. The accepted
// connection reports the negotiated role, the verified chain and whether
// TLS.ReadOnly marks it read-only through transport.Identity
// (transport.IdentityOf); a read-only certificate is refused the peer role.
// Servers authorise with it: peer traffic only on RolePeer connections,
// client requests only on RoleClient ones, no writes from read-only ones.
//
// In TLS 1.3 the dialer's handshake completes before the listener has
// checked its certificate, so a refused dialer learns it from the alert that
// arrives where the listener's hello should: Dial fails then, wrapping
// ErrTLS. Closing a connection closes its socket without a close_notify
// alert, which could block on a peer that reads nothing; the peer sees EOF,
// as without TLS. Without Config.TLS nothing here changes: the plaintext
// path is the same code with the same allocations.
//
// # Wire format
//
// All integers are little-endian. A connection opens (after the TLS
// handshake, if any) with each end sending a hello, then reading the peer's:
//
//	off size field
//	0   4    magic "KVDT"
//	4   2    version, 1; a peer with another version is rejected
//	6   2    length of the node name that follows, at most 255
//	8   4    max message this end accepts; the conn uses the smaller
//	12  4    credits: messages this end queues, the peer's send window
//	16  4    READ batches this end serves at once; the peer's limit is the
//	         smaller of this and its own MaxOutstandingReads
//	20  4    reserved, 0
//	24  n    node name
//
// A hello with the wrong magic or version, or values out of range, fails
// the handshake with an error wrapping transport.ErrProtocol.
//
// A listener that refuses a connection (MaxConns) sends, before any TLS
// handshake and in place of its hello, 24 bytes: magic "KVDR", a reason
// code (1: too many connections), zeros; then it closes the socket.
//
// Then both directions carry frames: a 16-byte header and length payload
// bytes.
//
//	off size field
//	0   1    type
//	1   1    a (per type)
//	2   1    b (per type)
//	3   1    reserved, 0
//	4   4    id (per type)
//	8   8    length of the payload
//
// Frame types:
//
//	1 MSG        payload: one message, length <= the conn's max message.
//	             id: credits returned to the receiver, riding along (may
//	             be 0). a = b = 0. Costs the sender one credit and length
//	             bytes of the byte window, both back with the credit.
//	2 CREDIT     id: credits returned (>= 1). a = b = length = 0. Sent by a
//	             receiver that has consumed a quarter of its credits, or a
//	             quarter of the byte window, or all it was sent, when no
//	             MSG took the credits along.
//	3 READ_REQ   a: op count, 1..16 (transport.MaxBatch). id: request id
//	             (the poster's slot). payload: a ops of 16 bytes each:
//	             remote address u64 (Descriptor.Addr + offset), length u32,
//	             key u32. The lengths add up to at most
//	             transport.MaxReadBatchBytes.
//	4 READ_RESP  a: status (0 ok, 1 unknown key, 2 out of range,
//	             3 partitioned). b: index of the failing op. id: the
//	             request's id. If a != 0, length is 0. If a == 0, the payload
//	             is the bytes of every op, in order, then a 2-byte trailer
//	             (status, op index): status 1 if a region was closed while
//	             being copied (zeros stood in for its bytes).
//
// Responses answer requests in order. A frame that breaks these rules
// (unknown type, bad field, more MSGs than credits, more credits returned
// than messages sent, more READ batches than announced, a response to no
// request) closes the connection with an error wrapping both
// transport.ErrProtocol and transport.ErrClosed.
package tcp
