// Package chaos holds kvd's fault tests: real 3-node clusters of kvd
// processes driven by concurrent clients while nodes are killed with SIGKILL,
// restarted and partitioned; the recorded histories are checked for
// linearizability with porcupine, and acknowledged writes for durability.
// The package has no non-test code.
package chaos
