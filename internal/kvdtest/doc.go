// Package kvdtest starts kvd nodes and clusters in-process for tests: real
// servers over the real TCP transport, on loopback ports and temporary data
// directories; and fake nodes (FakeNode) that speak the wire protocol by
// hand, for client tests that need a node to answer, lose an answer or
// hang exactly when they say. It is imported only by tests.
package kvdtest
