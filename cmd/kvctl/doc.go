// Command kvctl is kvd's command-line client.
//
//	kvctl [flags] put KEY [VALUE]   (no VALUE: --value-file, else standard input)
//	kvctl [flags] get KEY
//	kvctl [flags] get --prefix PREFIX | --from A [--to B] [--limit N] [--keys-only | --count] [--rev N]   (scan.go)
//	kvctl [flags] get KEY --rev N                  (KEY as it was at revision N: a range read)
//	kvctl [flags] del KEY [--prev-kv]
//	kvctl [flags] del KEY END | --prefix P | --from-key KEY [--prev-kv]   (one revision; del.go)
//	kvctl [flags] put --prev-kv KEY [VALUE]        (prints the previous value)
//	kvctl [flags] compaction REV                   (leader.go)
//	kvctl [flags] put --if-mod-revision N KEY [VALUE]   (compare-and-swap; N 0: KEY must not exist)
//	kvctl [flags] del --if-mod-revision N KEY
//	kvctl [flags] txn                              (the transaction on standard input; see txn.go)
//	kvctl [flags] put --lease ID KEY [VALUE]       (KEY deleted when lease ID ends)
//	kvctl [flags] lease grant TTL | keepalive ID | revoke ID | ttl ID | list   (lease.go)
//	kvctl [flags] watch [--prefix] KEY [--rev N] [--prev-kv] [--progress-notify]   (events until interrupted; see watch.go)
//	kvctl [flags] status
//	kvctl [flags] member list | add ID ADDR | promote ID | remove ID
//	kvctl [flags] move-leader ID                   (leader.go)
//	kvctl [flags] snapshot save FILE | status FILE   (a backup from the leader; check one: snapshot.go)
//
// Flags may come before or after the command. Each flag is mirrored by an
// environment variable: KVCTL_ plus its name in upper case with dashes as
// underscores (--endpoints → KVCTL_ENDPOINTS).
//
// Exit status: 0 on success, 1 when the operation failed (a get of a
// missing key, and a conditional put or del whose mod revision did not match,
// included), 2 on a usage error. A del of a missing key prints 0 and exits
// 0, as etcdctl's does. -w json prints IDs as strings (ids.go). A txn exits 0 whichever branch ran (its first line says
// SUCCESS or FAILURE), as etcdctl's does.
package main
