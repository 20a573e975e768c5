// Command kvctl is kvd's command-line client.
//
//	kvctl [flags] put KEY [VALUE]   (no VALUE: --value-file, else standard input)
//	kvctl [flags] get KEY
//	kvctl [flags] del KEY
//	kvctl [flags] status
//	kvctl [flags] member list | add ID ADDR | promote ID | remove ID
//
// Flags may come before or after the command. Each flag is mirrored by an
// environment variable: KVCTL_ plus its name in upper case with dashes as
// underscores (--endpoints → KVCTL_ENDPOINTS).
//
// Exit status: 0 on success, 1 when the operation failed (a missing key
// included), 2 on a usage error.
package main
