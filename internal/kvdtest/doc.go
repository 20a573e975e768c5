// Package kvdtest starts kvd nodes and clusters in-process for tests: real
// servers over the real TCP transport, on loopback ports and temporary data
// directories. It is imported only by tests.
package kvdtest
