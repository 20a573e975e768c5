// Package cli holds what kvd's commands share: flags mirrored from
// environment variables, parsing flags with one-line errors (Parse), byte
// sizes, cluster maps and choosing a transport. Flags map onto each
// component's Config in the commands themselves.
package cli
