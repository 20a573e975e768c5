// Package transporttest is the conformance suite every transport.Transport
// implementation must pass. It owns no transport code: only tests of the
// contract written in package transport, using nothing but its interface.
//
// # Hooking a transport in
//
// From the implementation's own tests, call Run with a Factory that makes a
// fresh pair of transports and names an address the server can listen on:
//
//	func TestConformance(t *testing.T) {
//		transporttest.Run(t, transporttest.Factory{
//			New: func(t *testing.T) (server, client transport.Transport, addr string) {
//				s, err := mytransport.New(mytransport.Config{Credits: 8})
//				if err != nil {
//					t.Fatal(err)
//				}
//				c, err := mytransport.New(mytransport.Config{Credits: 8})
//				if err != nil {
//					t.Fatal(err)
//				}
//				return s, c, "127.0.0.1:0" // or the RDMA device's IP, port 0
//			},
//			Credits: 8, // what both were configured with
//		})
//	}
//
// The suite closes the transports it is given. Subtests run one after
// another, each with its own pair and at most a few connections open, and
// at most 16 goroutines of their own, so the suite suits Soft-RoCE as well
// as loopback TCP; it takes a few seconds.
//
// # What the contract allows
//
// The suite asserts only what package transport promises. In particular, a
// READ racing with the region owner's writes may return any mix of old and
// new bytes, torn anywhere (even within an aligned word): the suite checks
// only that such READs succeed and that every byte returned was, at some
// point, in the region. After a READ fails with ErrBadKey or ErrOutOfRange
// the suite does not use that connection again (on RDMA a remote access
// error may break the queue pair). Timing is never asserted: deadlines only
// keep a broken implementation from hanging the suite, and the checks that
// an operation blocks (a Send with no credit left) hold for any speed of
// machine.
package transporttest
