// Package rdma is the kvd transport over real RDMA verbs: libibverbs for the
// data path and librdmacm for connection setup, through cgo. It is the only
// package in kvd that imports "C".
//
// A Transport is one device context. It owns the protection domain, the
// completion queues its connections share, the goroutine that reaps them,
// the regions registered for remote READ, and every connection's RC queue
// pair and registered buffers.
//
// The real implementation needs the build tag "rdma" and the libibverbs-dev
// and librdmacm-dev headers. Without the tag the package still compiles (so
// the rest of kvd builds anywhere, with CGO_ENABLED=0 too) and New returns an
// error wrapping transport.ErrUnsupported. Its tests run on Soft-RoCE in a
// VM: scripts/rdmavm/test-rdma.sh.
//
// # Mapping onto package transport
//
//   - Register allocates with mmap (off the Go heap) and registers the memory
//     with IBV_ACCESS_REMOTE_READ only: a peer can never write into it.
//     Descriptor.Addr is the virtual address, Key the rkey. A region of 2 MiB
//     or more is backed by reserved 2 MiB huge pages when enough are free
//     (MAP_HUGETLB; reserve them with vm.nr_hugepages), so the NIC needs 512
//     times fewer translations for it; otherwise, and for smaller regions,
//     by ordinary pages advised with MADV_HUGEPAGE (transparent huge pages,
//     where the kernel enables them for madvised memory). Either way Close
//     deregisters and unmaps it (internal/mmap.AllocHuge).
//   - Messages travel as SENDs into pre-posted, registered receive buffers of
//     Config.BufSize; larger messages are fragmented. The completion
//     goroutine, shared by every connection, copies no fragment: it hands
//     them to the connection's own assembler goroutine, which copies them
//     out and reposts their buffers (so a 1 MiB message on one connection
//     does not hold up another's Raft heartbeat or GET reply), with the
//     whole messages that arrive meanwhile queued behind, in order. Two
//     credit counts keep the receiver from being overrun without relying on
//     RNR retries (queue pairs use rnr_retry 0, so a flow-control bug fails
//     loudly instead of stalling): buffer credits, one per posted receive
//     buffer, and message credits, one per slot of the receiver's queue of
//     delivered messages (Config.Credits). Credits ride back in the header
//     of every message, or in a credit-only message, for which a few receive
//     buffers are reserved, when the receiver has nothing to send.
//   - SENDs of at most Config.MaxInline bytes (256 asked; the device's grant
//     is used) are posted inline. While SENDs overlap (a stream, a
//     fragmented message), one in Config.SignalEvery (16) asks for a
//     completion; the others are retired, and their buffers reused, when a
//     later signalled work request completes (an RC send queue completes in
//     order). A SEND posted with no signalled one outstanding is signalled,
//     so one message at a time costs what it did. Each buffer pool signals
//     at least once per half its size, so a sender out of buffers always
//     has some coming back; a keepalive READ retires what an idle
//     connection still holds, and Close posts one as a fence so its linger
//     ends when the peer has everything.
//   - A Read batch is posted as one chain with one ibv_post_send (one
//     doorbell), only the last work request signalled, into a registered
//     staging slot owned by the connection; bytes are copied into each Dst
//     after the completion, so the device never holds a Go pointer. Batches
//     larger than a slot (Config.ReadSlotSize) take several rounds, up to 4
//     in flight at once in the slots free when the Read starts (a large
//     value's rounds overlap on the wire and with copying out). The
//     staging is allocated on a connection's first Read (a server's accepted
//     connections never read, so never have any) and registered with local
//     and remote WRITE: iWARP places a READ response like a WRITE, so its
//     sink needs remote write. No peer can use that: queue pairs grant remote
//     READ only.
//   - Completions of all connections land in shared CQs (each connection
//     reserves room for everything its queue pair can produce, so a CQ never
//     overflows) reaped by one goroutine, sleeping on the completion channel
//     through the Go netpoller (PollEvents) or spinning (PollBusy). cgo is
//     crossed once per chain posted and once per burst of completions.
//   - In PollEvents mode, polling is adaptive (Config.SpinPoll, default
//     50µs): a wake-up through the channel and the netpoller, then a hand-off
//     to the waiting goroutine, costs several times the round trip itself, so
//     a Read that has posted its chain, or a Recv that finds nothing queued,
//     first polls the CQ itself for up to SpinPoll (yielding between polls)
//     and, if its completion arrives, continues without sleeping or
//     switching goroutines; and the reaper keeps polling for SpinPoll after
//     each burst it reaps. Whoever polls handles every completion it reaps,
//     for any connection of that CQ. Idle, nothing spins; busy, the CPU cost
//     is at most SpinPoll per wait the window does not cover, and the reaper
//     polls continuously under steady load. A negative SpinPoll turns it off.
//   - The CQs are armed for solicited completions only, and every SEND is
//     solicited: a received message wakes the reaper, a node's own READs,
//     SENDs and fences do not. Their completions are reaped by whoever polls
//     next (the spinning reader, the drain a message causes); a goroutine
//     about to sleep on one arms its CQ for the next completion first and
//     polls once more (poller.go, "Arming"). A one-sided GET thus costs the
//     reader one post and one poll, and nothing on another CPU.
//
// # Where RDMA shows through
//
//   - A READ the peer's device refuses (unknown or deregistered key) puts the
//     queue pair in error: that Read fails with an error wrapping both
//     transport.ErrBadKey and transport.ErrClosed, and the connection is
//     closed on both ends. Out-of-range READs are caught before posting
//     (from the Descriptor's length) and leave the connection usable.
//   - A Send whose context ends after its first fragment was posted closes
//     the connection (a posted fragment cannot be taken back, and the peer
//     must never see a torn message). Before that it just fails.
//   - RoCE cannot route loopback addresses (127/8, ::1): listen and dial on
//     an address of the RDMA netdev (the test VM uses 10.77.0.1 on dummy0).
//   - Each connection pins (RecvBuffers+8+SendBuffers)*BufSize+512 bytes,
//     page-rounded: 964 KiB with the defaults (READ staging is allocated
//     only when first needed), and a connection that
//     has read ReadSlots*ReadSlotSize more, 2 MiB. Transport.Pinned reports
//     the totals, each connection's PinnedBytes its own.
//   - Queue pairs are moved to RTS by this package, not by librdmacm (which
//     would grant remote READ, WRITE and atomics): they grant remote READ
//     only, and with Config.Auth nothing until the other end has
//     authenticated. Regions grant remote READ only. Both are needed for a
//     READ; no remote WRITE is ever allowed by a queue pair. The READ depths
//     the acceptor grants are the request's as rdma_cm reports them (already
//     from the acceptor's point of view), each capped by the device's limit
//     for the same role.
//
// # Dead peers
//
// A peer whose process dies is noticed at once: its kernel disconnects. A
// peer whose host dies, or whose network goes, sends nothing more, and an
// RC queue pair notices only when a work request goes unacknowledged: the
// device resends it after the local ACK timeout (Config.AckTimeout,
// 4.096µs·2^n on the wire) and fails it after Config.RetryCount resends, so
// outstanding work fails after AckTimeout×(RetryCount+1). The IB
// specification lets a device wait up to 4 times the timeout per attempt,
// hence a worst case 4 times longer. A connection with nothing outstanding
// would never notice, so one that has seen no completion for
// Config.KeepAlive posts a zero-length READ (the peer's device answers it,
// not its CPU; it needs no memory key), checked every KeepAlive/4. With the
// defaults (67.1ms, 6 retries, 500ms):
//
//   - busy: 67.1ms × 7 = 470ms (1.9s on a device that waits 4 times as
//     long);
//   - idle: at most 625ms more, 1.1s (2.5s).
//
// Config.DeadPeerBound computes these for any Config. Soft-RoCE takes
// RetryCount 7 to mean "retry for ever", hence the default of 6; a
// negative AckTimeout keeps the connection manager's (on RoCE 0.54s or
// more per attempt: several seconds to notice).
//
// # Authentication
//
// RDMA traffic is not encrypted, and a READ needs no help from the remote
// CPU: whoever holds a connected queue pair and a region's (address, rkey)
// can read the region. So with Config.Auth access is decided when a
// connection is set up, before either end can read anything: every key is a
// shared secret with a name and a role (rw, ro, peer) in a key file both
// ends hold (the client only its own line), and a connection proceeds as
// follows.
//
//  1. The dialer connects (rdma_connect, its hello in the private data).
//  2. The listener accepts with its hello followed by an offer: "KVA1" and a
//     fresh 32-byte random nonce Ns. Its queue pair has no remote access.
//     The dialer's queue pair, once established, has none either. A dialer
//     without Auth that sees an offer gives up (ErrAuth), as does a dialer
//     with Auth that sees none: both ends authenticate or neither.
//  3. Dialer → listener, claim: "KVAC", a fresh nonce Nc, MAC_d, the key's
//     name. MAC_d = HMAC-SHA256(key, "kvd-rdma-auth-v1", "dialer", Ns, Nc,
//     name, both ends' addresses and queue pair numbers as each end sees
//     them, role 0).
//  4. The listener looks the name up, checks MAC_d (an unknown name costs
//     the same work as a wrong MAC), and on failure answers "KVAR" (refused,
//     nothing more) and closes. On success it grants remote READ on its
//     queue pair and lifts the message size limit, then answers with a
//     proof: "KVAP", the key's role, MAC_l = HMAC-SHA256(key, ...,
//     "acceptor", Ns, Nc, name, the same view, role).
//  5. The dialer checks MAC_l, so it never talks to a listener that does not
//     hold its key (nor accepts a role a man in the middle changed), grants
//     remote READ on its own queue pair, lifts its limit, sends ready
//     ("KVAK"), and Dial returns. The listener's Accept returns the
//     connection on ready, reporting the name and role (AuthIdentity, and
//     transport.Identity: peer keys are RolePeer, rw and ro RoleClient, ro
//     ReadOnly). A kvd server only ever sends its region's descriptor on
//     connections Accept returned.
//
// The nonces make every proof single-use (a recorded claim fails on another
// connection: another Ns); the labels keep a proof from being reflected;
// the view binds a proof to its connection, so a relay between two
// connections fails. Each end grants READ before the message that lets the
// other hand the connection out, so no READ of an authenticated peer is
// ever refused. Until it has authenticated, a connection may send messages
// of at most AuthMaxMessage bytes (a longer one closes it), must finish
// within Auth.Timeout of its connection request (DefaultAuthTimeout, 5s),
// and a listener holds at most Config.Backlog such connections (more
// requests are rejected); every refusal is counted (AuthStats) and
// reported (Auth.Refused). A region's rkey is assigned by the device at
// registration, so a restarted process serves under a new rkey (and, as the
// mapping is new, a new address); a leaked descriptor is in any case
// useless without a queue pair that has authenticated.
package rdma
