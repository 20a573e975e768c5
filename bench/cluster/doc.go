// Package cluster starts a local kvd cluster as separate processes (the
// kvd binary from a build directory, each node on a loopback port with a
// data directory under a temporary directory), waits until it serves
// writes, and stops it. Processes are separate so that their CPU time can
// be read from /proc and charged to the benchmark. With Config.TLS it
// generates certificates (GenerateCerts) and runs the cluster over TLS.
package cluster
