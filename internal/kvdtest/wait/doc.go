// Package wait is how kvd's tests wait for a condition: For polls it until
// it holds or a generous deadline passes, instead of sleeping for a guessed
// time, which is too short on a loaded machine and too long everywhere
// else. It imports only the standard library, so any package's tests can
// use it, raft's and server's own (in-package) tests included, which
// cannot import kvdtest. It is imported only by tests.
package wait
