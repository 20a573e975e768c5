// Package rdma is the kvd transport over real RDMA verbs: libibverbs for the
// data path and librdmacm for connection setup, through cgo. It is the only
// package in kvd that imports "C".
//
// It owns one device context per Transport: the protection domain, the
// completion queues and the goroutine that reaps them, the memory regions
// registered for remote READ, and the RC queue pairs behind each Conn.
//
// The real implementation needs the build tag "rdma" and the libibverbs-dev
// and librdmacm-dev headers. Without the tag the package still compiles (so
// the rest of kvd builds anywhere, with CGO_ENABLED=0 too) and New returns an
// error wrapping transport.ErrUnsupported.
//
// Mapping onto the transport interface:
//   - Register allocates with mmap (off the Go heap) and registers the memory
//     with IBV_ACCESS_REMOTE_READ only: a peer can never write into it.
//     Descriptor.Addr is the virtual address, Key the rkey.
//   - Messages travel as SENDs into pre-posted, registered receive buffers.
//     Two credit counts keep the receiver from being overrun without relying
//     on RNR retries (queue pairs are set up with rnr_retry 0, so a
//     flow-control bug shows up as an error instead of a stall): buffer
//     credits (one per posted receive buffer) and message credits (one per
//     slot of the receiver's delivered-message queue). Credits ride back in
//     the header of every message, or in a small control message when the
//     receiver has nothing to send.
//   - A Read batch is posted as one chain with one ibv_post_send, only the
//     last work request signalled, into a registered staging slot owned by
//     the connection; the bytes are copied into the caller's Dst after the
//     completion, so the device never holds a Go pointer.
package rdma
