// Command kvd runs one kvd node. See README.md for a local cluster.
//
// Every flag can also be set through an environment variable: KVD_ plus the
// flag name in upper case with dashes as underscores (--data-dir →
// KVD_DATA_DIR). Flags given on the command line win.
package main
