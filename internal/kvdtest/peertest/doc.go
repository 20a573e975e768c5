// Package peertest holds what the tests of raft, raft/peer and the state
// machine on top of raft (internal/kv) share about peers: builders of the
// raft messages peers exchange, the accept loop that hands a node its peer
// connections, a quiet logger, and readers of what a node logged and
// counted. It imports none of those packages, so their own (internal)
// tests can use it. It is imported only by tests.
package peertest
