// Package transport defines the verbs-shaped interface that every kvd
// transport implements, and nothing else.
//
// The shape follows RDMA verbs so that the RDMA implementation maps onto it
// one to one, and so that the TCP implementation is forced to keep RDMA's
// semantics (in particular: one-sided READs that never involve the remote
// application, and may observe torn bytes):
//
//   - A Region is memory registered for remote reading. Its Descriptor
//     (address, length, key) is what a peer needs to READ it; how the
//     descriptor reaches the peer is the application's business (kvd sends it
//     in a handshake message).
//   - A Conn is a reliable, connected pair (an RC queue pair) carrying
//     messages (SEND/RECV, with credit-based flow control) and one-sided READs
//     of a peer's regions, posted in batches that complete together.
//
// Implementations: transport/tcp (runs anywhere) and transport/rdma
// (libibverbs + librdmacm, build tag "rdma"). Both pass the conformance suite
// in transport/transporttest.
package transport
