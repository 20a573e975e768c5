// Package peertest builds the raft messages that peers exchange, and reads
// what a node logged and counted, for the tests of raft and raft/peer. It
// imports neither package, so both packages' own (internal) tests can use
// it. It is imported only by tests.
package peertest
